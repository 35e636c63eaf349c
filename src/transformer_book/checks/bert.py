"""Checks for the exercises of chapter 11 (BERT): greedy longest-match WordPiece,
segment ids of a sentence pair, and BERT's 80/10/10 masking."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..tokenizer import SPECIAL_TOKENS, WordPiece
from ._core import ExerciseError, call, passed

__all__ = ["check_word_pieces", "check_segment_ids", "check_mask_tokens"]

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


_MASK_V, _MASK_SPECIALS, _MASK_ID = 1000, 5, 4  # vocabulary, specials 0-4, [MASK]


def _mask_case(seed: int = 0) -> tuple[Tensor, Tensor]:
    """A padded batch of ids (vocabulary of 1,000, ids 0-4 special): [CLS] first,
    [SEP] last, [PAD] after it; and the special-token mask (True = never select)."""
    gen = torch.Generator().manual_seed(seed)
    B, T = 200, 200
    ids = torch.randint(_MASK_SPECIALS, _MASK_V, (B, T), generator=gen)  # (B, T)
    lengths = torch.randint(T // 2, T + 1, (B,), generator=gen)
    pos = torch.arange(T)
    ids[pos >= lengths[:, None]] = 0  # [PAD]
    ids[:, 0] = 2  # [CLS]
    ids[torch.arange(B), lengths - 1] = 3  # [SEP]
    return ids, ids < _MASK_SPECIALS


def check_mask_tokens(fn: Callable[..., tuple[Tensor, Tensor]]) -> str:
    """``fn(ids, mask_id, vocab_size, special_mask, p, generator)``: BERT's masking.
    Each non-special token is selected with probability p; a selected token becomes
    [MASK] 80 % of the time, a random token (uniform over the vocabulary) 10 % and
    stays itself 10 %; returns (inputs, labels), labels the original id at the selected
    positions and -100 elsewhere. Checked statistically on 200 sequences of 100 to 200
    positions (the random ids for their range and variety, not their uniformity)."""
    ids, special = _mask_case()
    original = ids.clone()

    def run(p: float, seed: int = 0) -> tuple[Tensor, Tensor]:
        gen = torch.Generator().manual_seed(seed)
        out = call(fn, ids, _MASK_ID, _MASK_V, special.clone(), p, gen)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ExerciseError("return a pair (inputs, labels) of tensors")
        inputs, labels = out
        for name, t in (("inputs", inputs), ("labels", labels)):
            if not isinstance(t, Tensor) or t.shape != ids.shape:
                raise ExerciseError(
                    f"{name}: expected a tensor of shape {tuple(ids.shape)}, got "
                    f"{getattr(t, 'shape', type(t).__name__)}"
                )
        if not torch.equal(ids, original):
            raise ExerciseError(
                "ids changed in place: work on a copy (ids.clone()), the caller's "
                "batch must stay as it was."
            )
        return inputs.long(), labels.long()

    inputs, labels = run(0.15)
    selected = labels != -100
    changed = inputs != ids
    if (selected & special).any() or (changed & special).any():
        raise ExerciseError(
            "A special token ([CLS], [SEP] or [PAD]) was selected or changed: select "
            "only where special_mask is False."
        )
    masked = selected & (inputs == _MASK_ID)
    if (
        torch.equal(selected, (inputs == _MASK_ID) & ~special)
        and (changed & ~selected).any()
    ):
        raise ExerciseError(
            "Labels are set only where the input became [MASK]. The tokens replaced "
            "by a random one and those left unchanged were selected too: the model is "
            "asked to predict them as well, so they keep their label."
        )
    if (changed & ~selected).any():
        share = (changed & ~selected).sum().item() / (~selected & ~special).sum().item()
        raise ExerciseError(
            f"{share:.0%} of the tokens that were NOT selected were changed anyway. "
            "80/10/10 decides what happens to a *selected* token only (the 15 %); "
            "every other token passes unchanged, and its label is -100."
        )
    if not torch.equal(labels[selected], ids[selected]):
        raise ExerciseError(
            "At a selected position the label must be the original token id (what the "
            "model has to recover), not the input it sees."
        )
    rate = selected.sum().item() / (~special).sum().item()
    if abs(rate - 0.15) > 0.01:
        raise ExerciseError(
            f"{rate:.1%} of the non-special tokens were selected, expected 15 % "
            "(p=0.15): select each one with probability p."
        )
    n_sel = selected.sum().item()
    frac = {
        "[MASK]": masked.sum().item() / n_sel,
        "random": (selected & changed & (inputs != _MASK_ID)).sum().item() / n_sel,
        "unchanged": (selected & ~changed).sum().item() / n_sel,
    }
    words = ", ".join(f"{k} {v:.1%}" for k, v in frac.items())
    if abs(frac["[MASK]"] - 0.8) > 0.03 or abs(frac["random"] - 0.1) > 0.03:
        hint = (
            " The three outcomes must exclude each other: draw ONE number per "
            "selected token and cut [0, 1) at 0.8 and 0.9 (two independent draws let a "
            "random token overwrite a [MASK], or leave too many tokens unchanged)."
            if frac["unchanged"] > 0.13 or frac["[MASK]"] < 0.77
            else ""
        )
        raise ExerciseError(
            f"Of the selected tokens: {words}; expected 80 %, 10 %, 10 %.{hint}"
        )
    swapped = inputs[selected & changed & (inputs != _MASK_ID)]
    if swapped.numel() and (swapped.min() < 0 or swapped.max() >= _MASK_V):
        raise ExerciseError(
            f"A random token is outside the vocabulary [0, {_MASK_V}): draw it with "
            "torch.randint(vocab_size, ...)."
        )
    if swapped.unique().numel() < swapped.numel() // 4:
        raise ExerciseError(
            f"{swapped.numel()} random replacements use only "
            f"{swapped.unique().numel()} different tokens: draw one random token per "
            "position (a tensor of the shape of ids), not one for the whole batch."
        )
    again = run(0.15)
    if not (torch.equal(again[0], inputs) and torch.equal(again[1], labels)):
        raise ExerciseError(
            "Two calls with generators seeded alike gave different masks: pass "
            "generator= to every random draw (torch.rand, torch.randint)."
        )
    rate_half = (run(0.5)[1] != -100).sum().item() / (~special).sum().item()
    if abs(rate_half - 0.5) > 0.02:
        raise ExerciseError(
            f"With p=0.5, {rate_half:.1%} of the tokens were selected: use the "
            "argument p, not a fixed 0.15."
        )
    return passed(
        "15 % of the non-special tokens selected, then 80 % [MASK], 10 % random, 10 % "
        "unchanged; specials never touched; every selected token labelled, the rest "
        "-100."
    )
