"""Checks for the exercises of chapter 07: the right shift of teacher forcing, the
source's padding mask in cross-attention, and which outputs a changed token can reach.
Each names the typical mistake and what it does to a model."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..decoder import shift_right
from ..seq2seq import Seq2Seq, Seq2SeqConfig
from ._core import ExerciseError, call, passed

__all__ = ["check_shift_right", "check_source_mask", "check_changed_positions"]

_PAD, _BOS, _EOS, _V = 0, 1, 2, 20


def check_shift_right(fn: Callable[[Tensor, int], Tensor]) -> str:
    """``fn(tgt, bos_id)``: the decoder's input for teacher forcing, ``<bos>`` followed
    by the targets without their last token. Shapes: (B, T) -> (B, T)."""
    tgt = torch.tensor([[5, 6, 7, _EOS], [8, 9, _EOS, _PAD]])  # (B, T), right-padded
    given = tgt.clone()
    got = call(fn, given, _BOS)
    if not torch.equal(given, tgt):
        raise ExerciseError(
            "Your function changed `tgt` in place: the loss compares the model's "
            "predictions with these very targets. Build a new tensor (torch.cat)."
        )
    if not isinstance(got, Tensor):
        raise ExerciseError(f"Return a tensor of token ids, got {type(got).__name__}.")
    bos = torch.full_like(tgt[:, :1], _BOS)  # (B, 1)
    mistakes = [
        (
            torch.cat([bos, tgt[:, 1:]], dim=1),
            "<bos> replaced the *first* target: from position 1 on, position t reads "
            "y_{t+1}, the very token it must predict (y_0 = <bos>). The causal mask "
            "lets a position attend to itself, so the answer is in view, as it was "
            "without the mask in section 8, where the training loss fell faster and "
            "greedy decoding wrote no usable frame. Drop the *last* token instead: "
            "tgt[:, :-1].",
        ),
        (
            tgt,
            "The input equals the target: position t reads the token it must "
            "predict, and copies it. Shift right by one: <bos> first.",
        ),
        (
            torch.cat([tgt[:, 1:], bos], dim=1),
            "You shifted left: position t reads y_{t+2}, and with y_{t+1}, the token "
            "it must predict, one position earlier in view, the model never has to "
            "predict anything. Shift right: <bos> first, then tgt[:, :-1].",
        ),
        (
            tgt.roll(1, dims=1),
            "torch.roll wraps around: position 0 holds the last target (<eos> or "
            "<pad>) instead of <bos>. Put <bos> there.",
        ),
    ]
    if got.shape == (tgt.shape[0], tgt.shape[1] + 1):
        raise ExerciseError(
            f"Shape {tuple(got.shape)}: one position too many. The input pairs up "
            "with the target position by position, so it has T tokens: <bos> and the "
            "first T - 1 targets (the last one, <eos> or padding, is never read)."
        )
    for wrong, message in mistakes:
        if got.shape == wrong.shape and torch.equal(got, wrong):
            raise ExerciseError(message)
    if got.shape == tgt.shape and torch.equal(got[1:], tgt[:-1]):
        raise ExerciseError(
            "You shifted along the batch axis (dim 0): sequence b now reads the "
            "targets of sequence b - 1. Shift along the positions, dim 1."
        )
    expected = shift_right(tgt, _BOS)
    if got.shape != expected.shape or not torch.equal(got, expected):
        raise ExerciseError(
            f"For tgt = {tgt.tolist()} expected {expected.tolist()}, got "
            f"{got.tolist()}: <bos>, then every target but the last."
        )
    big = torch.randint(3, _V, (4, 9))
    if not torch.equal(call(fn, big.clone(), _BOS), shift_right(big, _BOS)):
        raise ExerciseError(
            "Right on the small example, wrong on a (4, 9) batch: use the shapes of "
            "`tgt`, not fixed numbers."
        )
    return passed(
        "position t reads y_t (y_0 = <bos>) and predicts y_{t+1}, which only "
        "position t + 1 holds: the one leak the causal mask has to stop."
    )


def _tiny_model(causal: bool = True) -> Seq2Seq:
    """A small random encoder-decoder, the same weights on every call."""
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(
        _V, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=2,
        dropout=0.0, max_len=16, causal=causal,
    )  # fmt: skip
    return Seq2Seq(cfg).eval()


def check_source_mask(fn: Callable[[Seq2Seq, Tensor, Tensor], Tensor]) -> str:
    """``fn(model, src, tgt_in)``: the logits of a :class:`~transformer_book.seq2seq.
    Seq2Seq` from ``model.encode`` and ``model.decode``, which must not depend on how
    much padding the sources carry. Shapes: (B, S), (B, T) -> (B, T, vocab)."""
    model = _tiny_model()
    src = torch.tensor([[5, 6, 7, 8, 9], [4, 11, 12, _PAD, _PAD]])  # (B, S)
    tgt_in = torch.tensor([[_BOS, 7, 8, 3], [_BOS, 10, _EOS, _PAD]])  # (B, T)
    more = torch.cat([src, torch.full((2, 3), _PAD)], dim=1)  # (B, S + 3)
    with torch.no_grad():
        expected = model(src, tgt_in)  # (B, T, V)
        try:
            got, got_more = call(fn, model, src, tgt_in), call(fn, model, more, tgt_in)
        except (RuntimeError, ValueError) as err:
            raise ExerciseError(
                f"Your function raised {type(err).__name__}: {err}. The memory mask "
                "is the source's padding mask, shape (B, 1, 1, S): the second thing "
                "model.encode returns."
            ) from None
    if not isinstance(got, Tensor) or got.shape != expected.shape:
        shape = tuple(got.shape) if isinstance(got, Tensor) else type(got).__name__
        raise ExerciseError(f"Return the logits, shape (B, T, vocab); got {shape}.")
    with torch.no_grad():
        memory, memory_mask = model.encode(src)
        inverted = model.decode(tgt_in, memory, ~memory_mask)
    if torch.allclose(got, inverted, atol=1e-5):
        raise ExerciseError(
            "You inverted the mask: then cross-attention reads *only* the padding. In "
            "this book True means *may attend* (nn.MultiheadAttention uses the "
            "opposite); pass the mask that model.encode returns as it is."
        )
    if not torch.allclose(got, got_more, atol=1e-5):
        moved = (got - got_more).abs().amax(dim=(1, 2))  # (B,)
        raise ExerciseError(
            "Three more <pad> at the end of the sources changed the logits (largest "
            f"change per sequence: {[round(x, 4) for x in moved.tolist()]}), even "
            "those of the unpadded sequence 0: cross-attention reads the memory at "
            "the padded positions. Pass the source's padding mask as memory_mask."
        )
    if not torch.allclose(got, expected, atol=1e-5):
        raise ExerciseError(
            "The logits do not depend on the padding, but they differ from "
            "model(src, tgt_in): run model.encode(src) once and hand both of its "
            "outputs to model.decode."
        )
    return passed(
        "the padded source positions get weight exactly 0 in cross-attention, so a "
        "query's frame does not depend on the longest query in its batch."
    )


def _expected_positions(logits_fn: Callable[[Tensor], Tensor], ids: Tensor, t: int):
    """Reference: the output positions that change when ids[0, t] goes up by one."""
    changed = ids.clone()
    changed[0, t] = 3 + (changed[0, t] - 2) % (_V - 3)  # another ordinary token
    with torch.no_grad():
        moved = (logits_fn(changed) - logits_fn(ids)).abs().amax(-1)[0]  # (T,)
    return (moved > 1e-5).nonzero().flatten().tolist()


def check_changed_positions(
    fn: Callable[[Callable[[Tensor], Tensor], Tensor, int], list[int]],
) -> str:
    """``fn(logits_fn, ids, t)``: replace token ``t`` of ``ids`` (shape (1, L)) by
    another ordinary token and return the sorted output positions whose logits
    ``logits_fn(ids)`` (shape (1, T, vocab)) change by more than 1e-5."""
    causal, no_mask = _tiny_model(), _tiny_model(causal=False)
    src = torch.tensor([[5, 6, 7, 8, 9]])  # (1, S = 5)
    tgt_in = torch.tensor([[_BOS, 7, 8, 3, 12, 14]])  # (1, T = 6)
    cases = [
        ("a target token, causal decoder", lambda x: causal(src, x), tgt_in, 2),
        ("a source token, causal decoder", lambda s: causal(s, tgt_in), src, 3),
        ("a target token, no causal mask", lambda x: no_mask(src, x), tgt_in, 2),
    ]
    for what, logits_fn, ids, t in cases:
        given = ids.clone()
        got = call(fn, logits_fn, given, t)
        expected = _expected_positions(logits_fn, ids, t)
        if not torch.equal(given, ids):
            raise ExerciseError(
                f"{what}: your function changed the caller's `ids` in place (and "
                "perhaps compared the changed input with itself). Change a clone."
            )
        if not isinstance(got, list | tuple):
            raise ExerciseError(
                f"Return a list of positions, got {type(got).__name__}."
            )
        got = sorted(int(p) for p in got)
        if got == expected:
            continue
        where = f"{what} (token {t} changed): got {got}, expected {expected}."
        if got == [p for p in expected if p != t]:
            raise ExerciseError(
                f"{where} Position t itself changes too: it *reads* the changed "
                "token (j <= i includes j = i)."
            )
        if got and expected and max(got) < t <= min(expected):
            raise ExerciseError(
                f"{where} The causal mask hides the *future*: a change at t reaches "
                "t and every later position, never an earlier one."
            )
        if ids.shape[1] != tgt_in.shape[1] and got == list(range(ids.shape[1])):
            raise ExerciseError(
                f"{where} The logits have one row per *target* position: return "
                "those, not source positions."
            )
        if set(got) < set(expected):
            raise ExerciseError(
                f"{where} Some changes were missed: compare the logits with a "
                "tolerance (|difference| > 1e-5), not the argmax; a logit can move "
                "without changing the best token."
            )
        raise ExerciseError(
            f"{where} Compute logits_fn for the original and for the changed ids "
            "and keep the positions whose largest |logit difference| exceeds 1e-5."
        )
    return passed(
        "a target token reaches its own position and every later one, never an "
        "earlier one; a source token reaches every target position (cross-attention "
        "is not causal); without the mask a target token reaches all of them."
    )
