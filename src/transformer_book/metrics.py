"""Scores for token and sentence classification: accuracy, BIO spans and span-level F1 (chapter 05).

Slot filling tags every word with a BIO label (Ramshaw and Marcus, 1995): ``B-type`` begins a
span of that type, ``I-type`` continues it, ``O`` is outside every span. Token accuracy counts
tags; span scores count whole spans, the way the CoNLL ``conlleval`` script does:

    precision = correct spans / predicted spans      recall = correct spans / gold spans
    F1 = 2 · precision · recall / (precision + recall)

A predicted span is correct only if its type, start and end all equal a gold span's. ``O`` is
never a span, so the easy majority tag earns nothing here.

Reading a tagger's mistakes: :func:`tag_confusions` counts (gold, predicted) pairs,
:func:`confusion_kinds` sorts them (missed or invented, wrong type, boundary),
:func:`role_added` and :func:`slot_roles` look at ATIS's roles (``fromloc.`` ...), and
:func:`pooled_span_scores` adds up the scores of several span types.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from collections.abc import Container, Hashable, Sequence
from dataclasses import dataclass

__all__ = [
    "auc",
    "accuracy",
    "token_accuracy",
    "bio_spans",
    "SpanScores",
    "span_scores",
    "span_scores_by_type",
    "pooled_span_scores",
    "tag_confusions",
    "confusion_kinds",
    "role_added",
    "slot_roles",
    "distinct_ngram_share",
    "mean_distinct_share",
    "known_word_share",
]

Span = tuple[str, int, int]


def _check_paired(gold: Sequence, pred: Sequence, what: str) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"{what}: gold has {len(gold)} items but pred has {len(pred)}")


def accuracy(gold: Sequence[Hashable], pred: Sequence[Hashable]) -> float:
    """Fraction of positions where ``pred`` equals ``gold`` (e.g. one intent per sentence)."""
    _check_paired(gold, pred, "accuracy")
    if not gold:
        raise ValueError("accuracy of an empty sequence is undefined")
    return sum(g == p for g, p in zip(gold, pred)) / len(gold)


def token_accuracy(
    gold: Sequence[Sequence[str]],
    pred: Sequence[Sequence[str]],
    ignore: str | None = None,
) -> float:
    """Fraction of tokens tagged correctly over all sentences.

    ``ignore="O"`` scores only the tokens whose *gold* tag is not ``ignore``.
    Shapes: gold and pred are lists of sentences, each a list of tags of equal length.
    """
    _check_paired(gold, pred, "token_accuracy")
    correct = total = 0
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(
                f"token_accuracy: sentence {i} has {len(g)} gold tags but {len(p)} predicted tags"
            )
        for gt, pt in zip(g, p):
            if ignore is not None and gt == ignore:
                continue
            correct += gt == pt
            total += 1
    if total == 0:
        raise ValueError("token_accuracy: no tokens to score")
    return correct / total


def bio_spans(tags: Sequence[str]) -> list[Span]:
    """The spans ``(type, start, end)`` of one BIO-tagged sentence; ``end`` is exclusive
    (slice-style).

    As in conlleval: a span starts at ``B-x``, and also at ``I-x`` when the previous tag is ``O``
    or of another type (a stray ``I-`` is read as the start of a span, not dropped). A span ends
    before ``O``, before ``B-``, before an ``I-`` of another type, and at the end of the sentence.
    """
    spans: list[Span] = []
    kind: str | None = None  # type of the open span, None when outside
    start = 0
    for i, tag in enumerate(tags):
        if tag == "O":
            prefix, typ = "O", None
        elif len(tag) > 2 and tag[:2] in ("B-", "I-"):
            prefix, typ = tag[0], tag[2:]
        else:
            raise ValueError(
                f"bio_spans: tag {tag!r} at position {i} is neither 'O' nor 'B-type'/'I-type'"
            )
        continues = prefix == "I" and typ == kind
        if kind is not None and not continues:
            spans.append((kind, start, i))
            kind = None
        if typ is not None and not continues:
            kind, start = typ, i
    if kind is not None:
        spans.append((kind, start, len(tags)))
    return spans


@dataclass(frozen=True)
class SpanScores:
    """Span counts and the precision, recall and F1 they give (0.0 where a denominator is 0)."""

    n_gold: int
    n_pred: int
    n_correct: int

    @property
    def precision(self) -> float:
        return self.n_correct / self.n_pred if self.n_pred else 0.0

    @property
    def recall(self) -> float:
        return self.n_correct / self.n_gold if self.n_gold else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def __str__(self) -> str:
        return (
            f"precision {self.precision:.4f}  recall {self.recall:.4f}  F1 {self.f1:.4f}  "
            f"({self.n_correct} correct of {self.n_pred} predicted, {self.n_gold} gold spans)"
        )


def _span_sets(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]
) -> tuple[Counter, Counter]:
    _check_paired(gold, pred, "span scores")
    g_all: Counter = Counter()
    p_all: Counter = Counter()
    for i, (g, p) in enumerate(zip(gold, pred)):
        if len(g) != len(p):
            raise ValueError(
                f"span scores: sentence {i} has {len(g)} gold tags but {len(p)} predicted tags"
            )
        g_all.update((i, *s) for s in bio_spans(g))
        p_all.update((i, *s) for s in bio_spans(p))
    return g_all, p_all


def span_scores(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]
) -> SpanScores:
    """Span-level precision, recall and F1 over a corpus (micro-averaged, as conlleval
    reports them)."""
    g, p = _span_sets(gold, pred)
    return SpanScores(
        n_gold=sum(g.values()), n_pred=sum(p.values()), n_correct=sum((g & p).values())
    )


def span_scores_by_type(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]
) -> dict[str, SpanScores]:
    """:func:`span_scores` for each span type separately, sorted by type name."""
    g, p = _span_sets(gold, pred)
    both = g & p
    types = sorted({k[1] for k in g} | {k[1] for k in p})

    def count(c: Counter, t: str) -> int:
        return sum(n for k, n in c.items() if k[1] == t)

    return {t: SpanScores(count(g, t), count(p, t), count(both, t)) for t in types}


def pooled_span_scores(scores: Sequence[SpanScores]) -> SpanScores:
    """One :class:`SpanScores` from the counts of several (the span types of
    :func:`span_scores_by_type` pooled, say)."""
    return SpanScores(
        sum(s.n_gold for s in scores),
        sum(s.n_pred for s in scores),
        sum(s.n_correct for s in scores),
    )


def tag_confusions(
    gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]
) -> Counter:
    """How often each (gold tag, predicted tag) pair with gold != predicted occurs."""
    _check_paired(gold, pred, "sentences")
    return Counter(
        (g, p) for gs, ps in zip(gold, pred) for g, p in zip(gs, ps) if g != p
    )


def confusion_kinds(confusions: Counter) -> dict[str, int]:
    """The wrongly tagged words of :func:`tag_confusions` in three kinds: ``"missed or
    invented"`` (one side is ``O``), ``"wrong type"`` (both in a slot, of different
    types) and ``"boundary"`` (the same type, ``B-`` and ``I-`` swapped)."""
    in_slots = {(g, p): n for (g, p), n in confusions.items() if g != "O" and p != "O"}
    wrong_type = sum(n for (g, p), n in in_slots.items() if g[2:] != p[2:])
    return {
        "missed or invented": sum(confusions.values()) - sum(in_slots.values()),
        "wrong type": wrong_type,
        "boundary": sum(in_slots.values()) - wrong_type,
    }


def role_added(confusions: Counter, types: Sequence[str]) -> int:
    """How many wrongly tagged words of :func:`tag_confusions` have a gold type in
    ``types`` (ATIS's role-less ``city_name``, say) and were given that type with a
    role (``toloc.city_name``); a ``B-``/``I-`` swap of the same type is not counted."""
    return sum(
        n
        for (g, p), n in confusions.items()
        if g[2:] in types and p[2:].endswith(g[2:]) and p[2:] != g[2:]
    )


def slot_roles(tags: Sequence[Sequence[str]], slot_type: str) -> Counter:
    """The roles the spans of ``slot_type`` have in tagged sentences: the part of the
    span type before the first ``.`` (``fromloc`` in ``B-fromloc.city_name``), or
    ``"no role"``; counted over the ``B-`` tags whose type ends in ``slot_type``."""
    return Counter(
        t[2:].split(".")[0] if "." in t else "no role"
        for row in tags
        for t in row
        if t.startswith("B-") and t.endswith(slot_type)
    )


def distinct_ngram_share(text: str, n: int = 4) -> float:
    """The share of distinct strings among the ``len(text) - n + 1`` strings of ``n``
    characters in ``text``: 1 when none repeats, low for a text that loops (chapter 14)."""
    grams = [text[i : i + n] for i in range(len(text) - n + 1)]
    return len(set(grams)) / len(grams)


def mean_distinct_share(texts: Sequence[str], n: int = 4) -> float:
    """:func:`distinct_ngram_share` of each text, averaged over the texts: how much
    samples repeat themselves, each sample judged on its own (chapter 14)."""
    if not texts:
        raise ValueError("texts must hold at least one text, got none")
    return statistics.mean(distinct_ngram_share(t, n) for t in texts)


def known_word_share(texts: Sequence[str], known: Container[str]) -> float:
    """The share of the whitespace-separated words of ``texts`` found in ``known`` (the
    training text's words, say), pooled over all texts (chapter 14)."""
    words = [w for t in texts for w in t.split()]
    return sum(w in known for w in words) / len(words)


def unknown_words_removed(
    base: Sequence[str],
    cut: Sequence[str],
    known: Container[str],
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The share of ``base``'s unknown words (not in ``known``) that ``cut`` no longer
    writes, ``1 - unknown(cut) / unknown(base)`` with each share pooled over its texts
    (:func:`known_word_share`), and a 90 % bootstrap interval for it: both lists'
    texts drawn again with replacement, ``resamples`` times (chapter 14: what top-p
    removes of the words sampling at τ = 1 invents, from a few samples each).
    Returns: (share, low, high)."""
    if not base or not cut:
        raise ValueError(f"need texts on both sides, got {len(base)} and {len(cut)}")

    def removed(b: Sequence[str], c: Sequence[str]) -> float | None:
        unknown = 1 - known_word_share(b, known)  # None: nothing to remove
        return None if unknown == 0 else 1 - (1 - known_word_share(c, known)) / unknown

    share = removed(base, cut)
    if share is None:
        raise ValueError("base writes no unknown word: there is nothing to remove")
    rng = random.Random(seed)
    draws = (
        removed(rng.choices(base, k=len(base)), rng.choices(cut, k=len(cut)))
        for _ in range(resamples)
    )
    shares = sorted(d for d in draws if d is not None)
    n = len(shares)
    return share, shares[int(0.05 * n)], shares[max(int(0.95 * n) - 1, 0)]


def auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The area under the ROC curve of a score: the chance that a random ``positive``
    item scores above a random ``negative`` one, ties counting half (the Mann-Whitney
    statistic divided by the number of pairs). 0.5: the score does not tell them apart,
    at any threshold."""
    if not positive or not negative:
        raise ValueError(
            f"positive and negative need one score each at least, got {len(positive)} "
            f"and {len(negative)}"
        )
    ranked = sorted([(s, 1) for s in positive] + [(s, 0) for s in negative])
    rank_sum, i = 0.0, 0
    while i < len(ranked):  # ties share the mean of their ranks (1-based)
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        rank_sum += (i + j + 1) / 2 * sum(label for _, label in ranked[i:j])
        i = j
    n_pos, n_neg = len(positive), len(negative)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
