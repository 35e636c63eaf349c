"""wordpiece_learning: the merges WordPiece.train learns (checked against a brute-force
recount under every rule), the likelihood rule's exact gain, the unit counts the first
merge sees, and what a vocabulary costs a corpus in pieces and bits per word."""

import math
from collections import Counter

import pytest

from transformer_book import basic_tokenizer, data, wordpiece_learning
from transformer_book.tokenizer import SPECIAL_TOKENS, WordPiece


def xlogx(x):
    return x * math.log(x) if x > 0 else 0.0


def score(rule, p, pair, unit, N):
    """The merge rules, written out again from their definitions."""
    k, ca, cb = pair[p], unit[p[0]], unit[p[1]]
    if rule == "frequency":
        return k
    if rule == "ratio":
        return k / (ca * cb)
    if p[0] == p[1]:
        units = xlogx(max(ca - 2 * k, 0)) - xlogx(ca)
    else:
        units = xlogx(ca - k) - xlogx(ca) + xlogx(cb - k) - xlogx(cb)
    return units + xlogx(k) - xlogx(N - k) + xlogx(N)


def brute_force_merges(texts, n, rule):
    """Recount every pair from scratch before each merge: slow, obviously right."""
    words = Counter(w for t in texts for w in basic_tokenizer.basic_tokenize(t))
    splits = {w: [w[0], *("##" + c for c in w[1:])] for w in words}
    merges = []
    for _ in range(n):
        unit, pair = Counter(), Counter()
        for w, s in splits.items():
            for u in s:
                unit[u] += words[w]
            for p in zip(s, s[1:]):
                pair[p] += words[w]
        if not pair:
            break
        N = sum(unit.values())
        keys = {p: (-score(rule, p, pair, unit, N), -pair[p], p) for p in pair}
        best = min(pair, key=keys.get)
        new = best[0] + best[1][2:]
        merges.append(new)
        for w, s in splits.items():
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and (s[j], s[j + 1]) == best:
                    out.append(new)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            splits[w] = out
    return merges


@pytest.mark.parametrize("rule", wordpiece_learning.MERGE_RULES)
def test_training_merges_equal_a_brute_force_recount(rule):
    texts = data.load_rt_polarity()[0][:150] + ["aaaa aaa banana bananas"]
    tok = WordPiece.train(texts, 10_000, rule=rule)  # until no pair is left...
    chars = {u for t in texts for w in basic_tokenizer.basic_tokenize(t) for u in w}
    learned = tok.itos[len(SPECIAL_TOKENS) :]
    n_alphabet = len({t for t in learned if len(t.removeprefix("##")) == 1})
    merges = learned[n_alphabet:]
    assert len(chars) <= n_alphabet
    assert merges[:60] == brute_force_merges(texts, 60, rule)


def test_likelihood_gain_is_k_times_log_lift_minus_one():
    """The gain of a merge, for k much smaller than c_a and c_b, is about
    k [log(k N / (c_a c_b)) - 1]: it changes sign where the pair occurs e times as
    often as chance (c_a c_b / N) predicts, not where it occurs as often."""
    ca, cb, N = 10_000, 20_000, 10_000_000
    chance = ca * cb / N  # 20 pairs expected if units were placed independently
    for lift in (0.5, 2.0, 2.5, 3.0, 10.0, 50.0):
        k = round(lift * chance)
        exact = wordpiece_learning._merge_score("likelihood", k, ca, cb, N, same=False)
        approx = k * (math.log(k * N / (ca * cb)) - 1)
        assert exact == pytest.approx(approx, abs=0.1 * k)
        assert (exact > 0) == (lift > math.e)


def test_trained_vocabulary_covers_its_corpus():
    texts = data.load_rt_polarity()[0][:500]
    tok = WordPiece.train(texts, 600)
    assert len(tok) == 600 and tok.itos[:5] == list(SPECIAL_TOKENS)
    pieces = [p for t in texts for p in tok.tokenize(t)]
    assert "[UNK]" not in pieces
    assert {"the", "and", "of"} <= set(tok.itos)  # frequent words become tokens
    words = sum(len(basic_tokenizer.basic_tokenize(t)) for t in texts)
    assert len(pieces) / words < 2.0


def test_merge_gain_is_the_exact_change_of_log_likelihood():
    """merge_gain against log L = sum_u c_u log(c_u / N) computed before and after a
    merge of 'a' and 'b' in a small text of units (chapter 11's formula)."""

    def log_l(counts):
        n = sum(counts.values())
        return sum(c * math.log(c / n) for c in counts.values() if c)

    before = Counter({"a": 7, "b": 5, "c": 9})
    k = 3  # "a b" side by side 3 times
    after = Counter({"a": 7 - k, "b": 5 - k, "c": 9, "ab": k})
    gain = wordpiece_learning.merge_gain(k, 7, 5, 21)
    assert gain == pytest.approx(log_l(after) - log_l(before), abs=1e-9)


def test_unit_counts_count_characters_and_adjacent_pairs():
    texts = data.load_rt_polarity()[0][:200]
    words = [w for t in texts for w in basic_tokenizer.basic_tokenize(t)]
    units, pairs = wordpiece_learning.unit_counts(texts)
    assert sum(units.values()) == sum(len(w) for w in words)  # one unit a character
    assert sum(pairs.values()) == sum(len(w) - 1 for w in words)  # within words only
    assert units["t"] == sum(w.startswith("t") for w in words)  # first letters bare
    assert units["##t"] == sum(w[1:].count("t") for w in words)
    assert wordpiece_learning.unit_counts(["Tea, tea."]) == (
        Counter({"t": 2, "##e": 2, "##a": 2, ",": 1, ".": 1}),
        Counter({("t", "##e"): 2, ("##e", "##a"): 2}),
    )


def test_pieces_and_bits_per_word():
    tok = WordPiece([*SPECIAL_TOKENS, "a", "b", "##b", "ab"])
    # words: "ab" -> [ab], "bb" -> [b, ##b], "a" -> [a]: 4 pieces for 3 words
    assert wordpiece_learning.corpus_pieces(tok, ["ab bb", "a"]) == (
        ["ab", "b", "##b", "a"],
        3,
    )
    assert wordpiece_learning.pieces_per_word(tok, ["ab bb", "a"]) == pytest.approx(
        4 / 3
    )
    # trained on "ab ab": counts ab 2, others 0; add-one over 9 tokens: total 2 + 9
    bits = -(math.log2(3 / 11) + math.log2(1 / 11))  # "ab a": 2 words
    assert wordpiece_learning.bits_per_word(tok, ["ab ab"], ["ab a"]) == pytest.approx(
        bits / 2
    )
    texts = data.load_rt_polarity()[0][:300]
    small = WordPiece.train(texts[:200], 300)
    pieces = [  # chapter 11's former inline definition
        p
        for t in texts[200:]
        for w in basic_tokenizer.basic_tokenize(t)
        for p in small.word_pieces(w)
    ]
    words = sum(len(basic_tokenizer.basic_tokenize(t)) for t in texts[200:])
    assert wordpiece_learning.pieces_per_word(small, texts[200:]) == len(pieces) / words
