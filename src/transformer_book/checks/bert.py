"""Checks for the exercises of chapter 11 (BERT): greedy longest-match WordPiece,
segment ids of a sentence pair, and the likelihood gain of a WordPiece merge."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .. import tokenizer
from ..tokenizer import SPECIAL_TOKENS, WordPiece
from ._core import ExerciseError, call, passed

__all__ = ["check_word_pieces", "check_segment_ids", "check_merge_gain"]

_VOCAB = {
    *SPECIAL_TOKENS,
    "un", "##aff", "##able", "a", "##ff", "##a",
    "play", "##ing", "ing", "p", "##lay", "##s", "s",
}  # fmt: skip


def check_word_pieces(fn: Callable[[str, set[str]], list[str]]) -> str:
    """``fn(word, vocab)``: greedy longest-match-first WordPiece of one word, "##" on
    continuation pieces, ["[UNK]"] when some part of the word matches nothing."""
    ref = WordPiece(sorted(_VOCAB))
    cases = {
        "playing": "A continuation piece is looked up with its '##' prefix: 'ing' in the "
        "middle of a word is '##ing', not the word-initial 'ing'.",
        "unaffable": "Take the longest piece that matches at each step.",
        "ing": "At the start of a word the piece has no '##'.",
        "plays": "Start with the longest candidate and shorten it: 'play' before 'p'.",
        "playx": "When some part of the word matches nothing, the whole word becomes "
        "['[UNK]'], not the pieces found so far plus '[UNK]'.",
        "aff": "Greedy, not optimal: 'aff' is not a word-initial piece, so 'a' + '##ff'.",
        "xyz": "A word whose first letters match nothing is ['[UNK]'].",
    }
    for word, hint in cases.items():
        got = call(fn, word, set(_VOCAB))
        expected = ref.word_pieces(word)
        if got != expected:
            raise ExerciseError(
                f"word_pieces({word!r}) gave {got!r}, expected {expected!r}. {hint}"
            )
    return passed(
        "greedy longest match first, '##' inside words, and one [UNK] for a word "
        "that cannot be cut."
    )


def check_segment_ids(fn: Callable[[Tensor, int, int], Tensor]) -> str:
    """``fn(ids, sep_id, pad_id)`` with ids (B, T): segment ids 0 up to and including
    the first [SEP], 1 after it, 0 on padding."""
    tok = WordPiece(sorted(_VOCAB))
    batch = tok.encode_batch(
        [("play", "un aff able"), "playing", ("a", "s"), ("p", "p p")]
    )
    ids, expected = batch["ids"], batch["token_type_ids"]  # (B, T) each
    sep_id, pad_id = tok.sep_id, tok.pad_id
    got = call(fn, ids.clone(), sep_id, pad_id)
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        raise ExerciseError(
            f"expected a tensor of shape {tuple(expected.shape)}, got "
            f"{getattr(got, 'shape', type(got).__name__)}"
        )
    got = got.long()
    if torch.equal(got, expected):
        return passed(
            "segment A runs through the first [SEP]; segment B follows; padding is 0."
        )
    is_sep = ids == sep_id
    after_or_at = (is_sep.long().cumsum(dim=1) > 0).long()
    if torch.equal(got, after_or_at * (ids != pad_id)):
        raise ExerciseError(
            "The first [SEP] got segment 1: it closes segment A, so it belongs to A. "
            "Count only the [SEP]s strictly before each position."
        )
    if torch.equal(got * (ids != pad_id), expected):
        raise ExerciseError(
            "Padding got segment 1: [PAD] positions take segment 0 (their vectors are "
            "never attended to, but the convention is 0, as the tokenizer pads)."
        )
    raise ExerciseError(
        f"wrong segment ids for ids\n{ids}\ngot\n{got}\nexpected\n{expected}"
    )


def check_merge_gain(fn: Callable[[int, int, int, int], float]) -> str:
    """``fn(k, c_a, c_b, n)``: change of the corpus log-likelihood (natural log) under
    a unigram model of the units when two different units a, b that occur k times
    side by side are merged, in a corpus of n units."""
    cases = [(20_000, 50_000, 30_000, 500_000), (3, 3, 4, 1000), (50, 900, 60, 10_000)]
    for k, ca, cb, n in cases:
        expected = tokenizer._merge_score("likelihood", k, ca, cb, n, same=False)
        got = call(fn, k, ca, cb, n)
        try:
            got = float(got)
        except (TypeError, ValueError):
            raise ExerciseError(
                f"expected a number, got {type(got).__name__}"
            ) from None
        if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6):
            continue
        if math.isclose(got, k / (ca * cb), rel_tol=1e-6):
            raise ExerciseError(
                "That is the ratio count(ab) / (count(a) count(b)), not the change of "
                "log L = sum_u c_u log(c_u / N). Write log L before and after the merge."
            )
        if math.isclose(got, expected / math.log(2), rel_tol=1e-6):
            raise ExerciseError(
                "Right formula in base 2: use the natural log (math.log)."
            )
        x = lambda v: v * math.log(v) if v > 0 else 0.0  # noqa: E731
        units = x(ca - k) - x(ca) + x(cb - k) - x(cb) + x(k)
        if math.isclose(got, units, rel_tol=1e-6, abs_tol=1e-6):
            raise ExerciseError(
                "You left out the total: the corpus has k units fewer after the merge, "
                "so the -N log N term changes too."
            )
        raise ExerciseError(
            f"merge_gain{(k, ca, cb, n)} = {got:.6g}, expected {expected:.6g}. "
            "After the merge: c_a - k, c_b - k, k new units ab, n - k units in all."
        )
    return passed(
        "the gain is about k log(k n / (c_a c_b)): frequent pairs whose parts rarely "
        "occur apart win."
    )
