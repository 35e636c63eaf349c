"""How WordPiece learns its vocabulary, and what a vocabulary costs a corpus (chapter 11).

:meth:`transformer_book.tokenizer.WordPiece.train` starts from single characters
(``##``-prefixed inside a word) and merges adjacent pairs of units, one at a time, until
the vocabulary is full. Which pair it merges is the rule (``MERGE_RULES``): the merge
that raises most the log-likelihood of the corpus under a unigram model of the units
(Schuster & Nakajima, 2012; Wu et al., 2016; :func:`merge_gain` is its exact score),
the association of the two units alone, or the pair's count (byte-pair encoding,
Sennrich et al., 2016). :func:`learn_merges` runs the merges; :func:`unit_counts`
counts what the first merge sees. A learnt vocabulary is then measured on text:
:func:`pieces_per_word` (how finely it cuts words) and :func:`bits_per_word` (how
predictable its pieces are under a unigram model of the training text).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Protocol

from .basic_tokenizer import basic_tokenize

__all__ = [
    "MERGE_RULES",
    "merge_gain",
    "unit_counts",
    "learn_merges",
    "corpus_pieces",
    "pieces_per_word",
    "bits_per_word",
]

MERGE_RULES = ("likelihood", "ratio", "frequency")


class WordPieces(Protocol):
    """What the measurements read of a tokenizer (a
    :class:`~transformer_book.tokenizer.WordPiece`): its casing, its vocabulary size and
    how it cuts one word into pieces."""

    lowercase: bool

    def __len__(self) -> int: ...

    def word_pieces(self, word: str) -> list[str]: ...


@functools.lru_cache(maxsize=1 << 18)
def _xlogx(x: int) -> float:
    return x * math.log(x) if x > 0 else 0.0


def _merge_score(rule: str, k: int, ca: int, cb: int, n: int, same: bool) -> float:
    """Score of merging units a, b (counts ca, cb) that occur k times side by side, in a
    corpus of n units; ``same`` when a == b."""
    if rule == "frequency":
        return float(k)
    if rule == "ratio":
        return k / (ca * cb)
    # log-likelihood after the merge minus before: k fewer a's and b's, k new ab's,
    # k fewer units in all (sum_u c_u log c_u - N log N, before and after)
    if same:
        units = _xlogx(max(ca - 2 * k, 0)) - _xlogx(ca)
    else:
        units = _xlogx(ca - k) - _xlogx(ca) + _xlogx(cb - k) - _xlogx(cb)
    return units + _xlogx(k) - _xlogx(n - k) + _xlogx(n)


def merge_gain(k: int, c_a: int, c_b: int, n: int) -> float:
    """The exact change of log L = sum_u c_u log(c_u / N) when two different units
    (counts ``c_a``, ``c_b``, in a text of ``n`` units) that occur ``k`` times side by
    side merge: the ``"likelihood"`` rule's score."""
    return _merge_score("likelihood", k, c_a, c_b, n, same=False)


def unit_counts(
    texts: Iterable[str], lowercase: bool = True
) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """Before the first merge of ``WordPiece.train``: the counts of the single-character
    units (``##``-prefixed inside a word) and of the pairs of adjacent units, over the
    words of ``texts`` (basic tokenisation)."""
    words = Counter(w for t in texts for w in basic_tokenize(t, lowercase))
    units: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for w, c in words.items():
        chars = [w[0], *("##" + ch for ch in w[1:])]
        for u in chars:
            units[u] += c
        for p in zip(chars, chars[1:]):
            pairs[p] += c
    return units, pairs


def corpus_pieces(tok: WordPieces, texts: Iterable[str]) -> tuple[list[str], int]:
    """The word pieces of all words of ``texts`` in order, and the number of words."""
    words = [w for t in texts for w in basic_tokenize(t, tok.lowercase)]
    return [p for w in words for p in tok.word_pieces(w)], len(words)


def pieces_per_word(tok: WordPieces, texts: Iterable[str]) -> float:
    """How many pieces ``tok`` cuts a word of ``texts`` into, on average."""
    pieces, n_words = corpus_pieces(tok, texts)
    return len(pieces) / n_words


def bits_per_word(tok: WordPieces, train: Iterable[str], texts: Iterable[str]) -> float:
    """-log2 of ``texts``' probability under a unigram model of ``tok``'s units whose
    (add-one) frequencies are counted on ``train``, per word of ``texts``."""
    counts = Counter(corpus_pieces(tok, train)[0])
    total = sum(counts.values()) + len(tok)
    pieces, n_words = corpus_pieces(tok, texts)
    return -sum(math.log2((counts[p] + 1) / total) for p in pieces) / n_words


def learn_merges(
    splits: list[list[str]],
    freqs: list[int],
    n_merges: int,
    rule: str,
    min_pair_count: int,
) -> list[str]:
    """Merge the best pair ``n_merges`` times (or until none is left); return the new
    tokens in merge order. ``splits`` (each word type as units) changes in place.

    Bookkeeping keeps this fast: counts of units and pairs, the words each pair occurs
    in, and a max-heap of scores checked when popped. A merge changes the counts of a
    and b, so every pair containing a or b gets a fresh entry; other scores can only
    fall (N shrinks), so an entry popped with an outdated score is pushed back.
    """
    unit: Counter[str] = Counter()
    pair: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    partners: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)
    for i, (s, f) in enumerate(zip(splits, freqs)):
        for u in s:
            unit[u] += f
        for p in zip(s, s[1:]):
            pair[p] += f
            where[p].add(i)
            partners[p[0]].add(p)
            partners[p[1]].add(p)
    n = sum(unit.values())

    def entry(p: tuple[str, str]) -> tuple[float, int, tuple[str, str]]:
        score = _merge_score(rule, pair[p], unit[p[0]], unit[p[1]], n, p[0] == p[1])
        return (-score, -pair[p], p)  # ties: the more frequent pair, then a-z

    touched: set[tuple[str, str]] = set()  # pairs whose count changed in a merge

    def add(q: tuple[str, str], f: int, i: int) -> None:
        """Count f more (or, f < 0, fewer) pairs q, in word i."""
        pair[q] += f
        touched.add(q)
        if f > 0:
            where[q].add(i)
            partners[q[0]].add(q)
            partners[q[1]].add(q)

    heap = [entry(p) for p, c in pair.items() if c >= min_pair_count]
    heapq.heapify(heap)
    merges: list[str] = []
    while heap and len(merges) < n_merges:
        top = heapq.heappop(heap)
        p = top[2]
        if pair[p] < min_pair_count:
            continue  # the pair is gone
        now = entry(p)
        if now != top:
            heapq.heappush(heap, now)  # outdated score: back in at its current one
            continue
        a, b = p
        new = a + b[2:]  # the "##" of the second part goes: ("hu", "##gs") -> "hugs"
        merges.append(new)
        touched.clear()
        for i in sorted(where.pop(p)):  # the words that had ab (some may not any more)
            s, f = splits[i], freqs[i]
            j, out = 0, []
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    # only the neighbours' pairs change: (x, a) -> (x, ab), (b, y) -> (ab, y)
                    if out:
                        add((out[-1], a), -f, i)
                        add((out[-1], new), f, i)
                    if j + 2 < len(s):
                        add((b, s[j + 2]), -f, i)
                        add((new, s[j + 2]), f, i)
                    pair[p] -= f
                    unit[a] -= f
                    unit[b] -= f
                    unit[new] += f
                    n -= f
                    out.append(new)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            splits[i] = out
        for u in (a, b):  # forget the pairs of a and b that no longer occur
            partners[u] = {q for q in partners[u] if pair[q] > 0}
        for q in touched | partners[a] | partners[b]:
            if pair[q] >= min_pair_count:
                heapq.heappush(heap, entry(q))
    return merges
