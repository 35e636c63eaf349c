"""Checks for the exercises of chapter 10 (the three families and what they cost)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import params
from ._core import ExerciseError, call, passed

__all__ = [
    "check_llama_params",
    "check_utf8_length",
    "check_noise_span_mask",
]


def _llama_params(
    vocab_size: int,
    d_model: int,
    n_layers: int,
    d_ff: int,
    n_heads: int,
    n_kv_heads: int,
) -> int:
    """The reference answer: a Llama-style decoder (Touvron et al., 2023). No biases;
    RMSNorm (γ only) before attention, before the feed-forward and at the end; keys and
    values with n_kv_heads heads (grouped-query); a gated SiLU feed-forward with three
    matrices; rotary positions (no weights); an output layer NOT tied to the embedding."""
    attn = params.mha_params(d_model, n_heads, n_kv_heads, bias=False)
    ff = 3 * d_model * d_ff  # gate, up, down
    block = attn + ff + 2 * d_model  # + two RMSNorms
    return 2 * vocab_size * d_model + n_layers * block + d_model  # + final RMSNorm


_LLAMAS = {  # name: (vocab, d_model, n_layers, d_ff, n_heads, n_kv_heads)
    "Llama-2-7B": (32000, 4096, 32, 11008, 32, 32),
    "Mistral-7B": (32000, 4096, 32, 14336, 32, 8),
    "a small one": (1000, 64, 3, 96, 8, 2),
}


def check_llama_params(fn: Callable[..., int]) -> None:
    """``fn(vocab_size, d_model, n_layers, d_ff, n_heads, n_kv_heads)``: the parameter
    count of a Llama-style decoder."""
    for name, cfg in _LLAMAS.items():
        V, d, L, ff, H, kv = cfg
        expected = _llama_params(*cfg)
        got = call(fn, *cfg)
        if isinstance(got, Tensor):
            got = got.item()
        if got == expected:
            continue
        args = f"{name} {cfg}"
        kv_dim = kv * (d // H)
        diagnoses = {
            expected - V * d: "the output layer is not tied in Llama: it is a second "
            "vocab_size × d_model matrix.",
            expected
            - L * d * ff: "the feed-forward is gated, SiLU(x W_gate) ⊙ (x W_up), "
            "then W_down: three matrices, not two.",
            expected + 2 * L * d * (d - kv_dim): "keys and values have only n_kv_heads "
            "heads: W_K and W_V map d_model to n_kv_heads · d_model/n_heads.",
            expected + L * (3 * d + 2 * kv_dim + 2 * ff): "Llama's linear layers have "
            "no biases.",
            expected + (2 * L + 1) * d: "RMSNorm has a γ only: d_model per norm, not "
            "2 · d_model.",
            expected - d: "count the final RMSNorm after the last block.",
            expected - 2 * L * d: "each block has two RMSNorms (before attention and "
            "before the feed-forward), d_model each.",
        }
        if got in diagnoses:
            raise ExerciseError(f"For {args} you return {got:,}: {diagnoses[got]}")
        raise ExerciseError(
            f"For {args} you return {got!r}, expected {expected:,}. Count, per block, "
            "the attention (W_Q, W_O: d_model²; W_K, W_V: d_model · n_kv_heads · "
            "head_dim), the three feed-forward matrices and two RMSNorms; then the "
            "embedding, the untied output layer and the final norm."
        )
    return passed(
        f"Llama-2-7B has {_llama_params(*_LLAMAS['Llama-2-7B']):,} parameters; Mistral-7B "
        f"{_llama_params(*_LLAMAS['Mistral-7B']):,}: a wider feed-forward, paid for "
        "partly by 4 times smaller W_K and W_V."
    )


_CHARS = "a~\x7f\x80éß߿ࠀ€日\uffff𐀀🙂\U0010ffff"


def check_utf8_length(fn: Callable[[str], int]) -> None:
    """``fn(char)``: how many bytes UTF-8 spends on one character, from its code point."""
    answers = {ch: call(fn, ch) for ch in _CHARS}
    if all(got == 1 for got in answers.values()):
        raise ExerciseError(
            "You say 1 byte for every character: len(char) counts characters, not "
            "bytes. One byte holds only code points below 0x80; 'é' (U+00E9) needs two."
        )
    for ch, got in answers.items():
        expected = len(ch.encode("utf-8"))
        if got == expected:
            continue
        cp = f"U+{ord(ch):04X}"
        if ord(ch) in (0x80, 0x800, 0x10000) and got == expected - 1:
            raise ExerciseError(
                f"{cp} takes {expected} bytes, you say {got}: off by one at a boundary. "
                f"{expected - 1} byte(s) reach only up to U+{ord(ch) - 1:04X}."
            )
        if got == len(ch.encode("utf-16-le")):
            raise ExerciseError(
                f"{cp} ({ch!r}): you count UTF-16 ({got} bytes); UTF-8 needs {expected}."
            )
        raise ExerciseError(
            f"{cp} ({ch!r}) takes {expected} UTF-8 bytes, you say {got!r}. The ranges: "
            "below 0x80 one byte, below 0x800 two, below 0x10000 three, else four."
        )
    return passed(
        "1 byte for ASCII, 2 for é and most European and Cyrillic letters, 3 for € and "
        "most CJK characters, 4 for emoji: a ByT5 sequence is as long as its UTF-8."
    )


def check_noise_span_mask(fn: Callable[..., Tensor]) -> None:
    """``fn(length, noise_density, mean_span_length, generator)``: a bool mask with
    round(length · density) corrupted tokens in round(noise / mean_span) spans."""
    masks = []
    for length, density, span in [(100, 0.15, 3.0), (512, 0.15, 3.0), (40, 0.5, 4.0),
                                  (37, 0.2, 2.5), (64, 0.15, 3.0)] * 3:  # fmt: skip
        gen = torch.Generator().manual_seed(len(masks))
        got = call(fn, length, density, span, gen)
        what = f"length={length}, noise_density={density}, mean_span_length={span}"
        if not isinstance(got, Tensor) or got.dtype != torch.bool:
            raise ExerciseError(
                f"For {what} return a torch.bool tensor, got "
                f"{getattr(got, 'dtype', type(got).__name__)}."
            )
        if got.shape != (length,):
            raise ExerciseError(f"For {what} the mask has shape {tuple(got.shape)}, "
                                f"expected ({length},).")  # fmt: skip
        n_noise = max(round(length * density), 1)
        n_spans = max(round(n_noise / span), 1)
        if int(got.sum()) != n_noise:
            raise ExerciseError(
                f"For {what} you corrupt {int(got.sum())} tokens, expected exactly "
                f"{n_noise} = round({length} · {density}). Drawing each token with "
                "probability noise_density gives that many only on average."
            )
        starts = got & ~torch.cat((got.new_zeros(1), got[:-1]))
        if int(starts.sum()) != n_spans:
            hint = ("two of your spans touch and merge into one: keep at least one "
                    "token between spans" if starts.sum() < n_spans else
                    "split the noise tokens into exactly that many runs")  # fmt: skip
            raise ExerciseError(
                f"For {what} your mask has {int(starts.sum())} corrupted spans, expected "
                f"{n_spans} = round({n_noise} / {span}): {hint}."
            )
        masks.append(got)
    if all(torch.equal(masks[0], m) for m in masks[5::5]):
        raise ExerciseError(
            "Every call with length 100 gives the same mask: draw the span boundaries at "
            "random, with the generator you are given."
        )
    return passed(
        "the counts are exact, as in T5: 512 tokens always give 77 corrupted tokens in 26 "
        "spans, so every batch has inputs and targets of one length."
    )
