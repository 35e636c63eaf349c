"""Checks for the exercises of chapter 07 (decoder masks, teacher forcing, greedy
decoding)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import masks
from ._core import ExerciseError, call, expect_close, passed

__all__ = ["check_decoder_self_mask", "check_teacher_forcing", "check_greedy"]


def check_decoder_self_mask(fn: Callable[[Tensor, int], Tensor]) -> str:
    """``fn(lengths, T)``: the self-attention mask of a batch of right-padded targets,
    (B, 1, T, T) bool, True where query i may attend key j: j <= i and j is not padding.
    """
    lengths, T = torch.tensor([5, 3, 1]), 5
    got = call(fn, lengths.clone(), T)
    causal = masks.causal_mask(T)  # (T, T)
    keys = masks.padding_mask(lengths, T)  # (B, 1, 1, T)
    expected = causal & keys  # (B, 1, T, T)
    rows = keys.transpose(-1, -2)  # (B, 1, T, 1): padding as *queries*
    mistakes = [
        (
            causal | keys,
            "You combined the masks with `|` (or): then a key is allowed when *either* "
            "mask allows it, so real tokens see the future. Use `&`: both must allow it.",
        ),
        (
            torch.ones(T, T, dtype=torch.bool).triu() & keys,
            "Your causal part lets position i see the positions *after* it (upper "
            "triangle). Query i may attend key j when j <= i: the lower triangle, "
            "torch.tril.",
        ),
        (
            torch.ones(T, T, dtype=torch.bool).tril(-1) & keys,
            "Your causal part excludes the diagonal: a position may attend to itself "
            "(j <= i, not j < i), or position 0 would see nothing at all.",
        ),
        (
            causal & rows,
            "You masked padding *queries* (rows) instead of padding *keys* (columns): "
            "the mask has to stop real tokens from reading the padding, so it is the "
            "key axis (the last one) that depends on the lengths.",
        ),
        (
            causal.expand(3, 1, T, T),
            "The padding is missing: key j of sequence b is padding when "
            "j >= lengths[b], and no query may attend to it.",
        ),
    ]
    if isinstance(got, Tensor) and got.dtype == torch.bool:
        if got.shape == (3, T, T):
            raise ExerciseError(
                "Shape (B, T, T): add a heads axis, (B, 1, T, T), so the mask "
                "broadcasts over the H heads of the scores (B, H, T, T)."
            )
        for wrong, message in mistakes:
            if got.shape == wrong.shape and torch.equal(got, wrong):
                raise ExerciseError(message)
    if isinstance(got, Tensor) and got.dtype != torch.bool:
        raise ExerciseError(
            f"Return a bool tensor (True = may attend), got dtype {got.dtype}."
        )
    expect_close(
        got,
        expected,
        "mask",
        "causal (j <= i) and not padding (j < lengths[b]), shape (B, 1, T, T).",
    )
    return passed(
        "query i reads keys j <= i that are real tokens; right padding is in every "
        "real token's future, so for real queries the causal part alone already hides it."
    )


def check_teacher_forcing(
    fn: Callable[[list[int], int, int], tuple[list[int], list[int]]],
) -> str:
    """``fn(ids, bos_id, eos_id)`` -> ``(decoder_input, target)`` for one target sequence:
    ``[bos] + ids`` and ``ids + [eos]``, so that position t reads ``ids[:t]`` and must
    predict ``ids[t]`` (or ``<eos>`` at the end)."""
    bos, eos = 1, 2
    for ids in ([7, 8, 9], [5], []):
        got = call(fn, list(ids), bos, eos)
        if not (isinstance(got, tuple | list) and len(got) == 2):
            raise ExerciseError(
                f"Return a pair (decoder_input, target), got {type(got).__name__}."
            )
        inp, tgt = (list(x) for x in got)
        expected = ([bos, *ids], [*ids, eos])
        where = f"for ids={ids}"
        if (inp, tgt) == expected:
            continue
        if (tgt, inp) == expected:
            raise ExerciseError(
                f"{where}: input and target are swapped. The decoder *reads* "
                "<bos> + ids and is *trained to write* ids + <eos>."
            )
        if inp == tgt:
            raise ExerciseError(
                f"{where}: input and target are the same sequence, so position t "
                "would be asked to copy the token it already reads. Shift the input "
                "right by one: <bos> first."
            )
        if len(inp) != len(tgt):
            raise ExerciseError(
                f"{where}: input has {len(inp)} tokens, target {len(tgt)}. They pair up "
                "position by position, so both have len(ids) + 1."
            )
        if tgt == list(ids) + [bos] or inp == [eos, *ids]:
            raise ExerciseError(
                f"{where}: <bos> and <eos> are mixed up: the input starts with <bos>, "
                "the target ends with <eos>."
            )
        raise ExerciseError(
            f"{where}: got input {inp} and target {tgt}, expected {expected[0]} and "
            f"{expected[1]}."
        )
    return passed(
        "the input is the target shifted right by one; the target ends in <eos>, so "
        "the model learns when to stop."
    )


def _scripted(table: dict[tuple[int, ...], int], vocab: int) -> Callable:
    """A 'model' that returns logits favouring table[prefix] (the next token)."""

    def next_token_logits(prefix: list[int]) -> Tensor:
        if not isinstance(prefix, list | tuple):
            prefix = list(prefix)
        logits = torch.zeros(vocab)
        logits[table.get(tuple(int(t) for t in prefix), 3)] = 5.0
        return logits

    return next_token_logits


def check_greedy(fn: Callable[[Callable, int, int, int], list[int]]) -> str:
    """``fn(next_token_logits, bos_id, eos_id, max_new_tokens)``: greedy decoding of one
    sequence. ``next_token_logits(prefix)`` takes the list of tokens so far (``<bos>``
    first) and returns a 1-D tensor of logits; return the tokens written before ``<eos>``
    (neither ``<bos>`` nor ``<eos>`` included), at most ``max_new_tokens`` of them."""
    bos, eos, V = 1, 2, 10
    # the next token depends on the whole prefix, not only on the last token
    table = {(bos,): 5, (bos, 5): 7, (bos, 5, 7): 5, (bos, 5, 7, 5): eos}
    after_eos = {(bos, 5, 7, 5, eos): 8, (bos, 5, 7, 5, eos, 8): 9}
    model = _scripted({**table, **after_eos}, V)
    got = call(fn, model, bos, eos, 10)
    if not isinstance(got, list | tuple):
        raise ExerciseError(f"Return a list of token ids, got {type(got).__name__}.")
    got = [int(t) for t in got]
    expected = [5, 7, 5]
    if got != expected:
        if got[:1] == [bos]:
            raise ExerciseError(
                f"Got {got}: leave <bos> out; it is the start signal, not output."
            )
        if got[: len(expected) + 1] == [*expected, eos]:
            raise ExerciseError(
                f"Got {got}: stop at <eos>, and leave it out of the result "
                "(the tokens *before* <eos>)."
            )
        if got[:1] == [5] and len(set(got)) == 1:
            raise ExerciseError(
                f"Got {got}: every step fed the model the same prefix. Append each "
                "chosen token to the prefix before asking for the next one."
            )
        raise ExerciseError(
            f"Got {got}, expected {expected}: at every step take the argmax of "
            "next_token_logits(prefix), append it, and stop when it is <eos>."
        )
    # a model that never writes <eos>: the limit must hold exactly
    endless = _scripted({}, V)  # always token 3
    got = call(fn, endless, bos, eos, 4)
    if [int(t) for t in got] != [3, 3, 3, 3]:
        raise ExerciseError(
            f"With a model that never writes <eos> and max_new_tokens=4, got {got}; "
            "expected [3, 3, 3, 3]: stop after max_new_tokens steps."
        )
    return passed(
        "argmax, append, repeat until <eos> or the limit: what Seq2Seq.greedy_decode "
        "does for a whole batch at once."
    )
