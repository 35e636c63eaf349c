"""Checks for the exercises of chapters 01 (self-attention) and 02 (queries, keys,
values, heads)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .. import attention
from ._core import ExerciseError, call, expect_close, passed

__all__ = [
    "check_self_attention_weights",
    "check_batched_self_attention",
    "check_cosine_attention",
    "check_masked_attention",
    "check_split_heads",
    "check_mha_parameter_count",
]


def _inputs(*shape: int, seed: int = 0) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_self_attention_weights(fn: Callable[[Tensor], Tensor]) -> None:
    """``fn(X)`` with X (T, D) must return the (T, T) weights softmax(X Xᵀ) of
    parameter-free self-attention."""
    X = _inputs(6, 4)
    got = call(fn, X.clone())
    expected = (X @ X.T).softmax(dim=-1)
    if isinstance(got, Tensor) and got.shape == expected.shape:
        if torch.allclose(got, X @ X.T, atol=1e-5):
            raise ExerciseError(
                "You returned the raw scores X Xᵀ: apply a softmax over each row."
            )
        if torch.allclose(got, (X @ X.T).softmax(dim=0), atol=1e-5):
            raise ExerciseError(
                "Your softmax runs down the columns: each *row* (one query) must sum "
                "to 1, use dim=-1."
            )
    expect_close(
        got, expected, "attention weights", "Row i should hold softmax_j(x_i · x_j)."
    )
    return passed(
        "each row is a probability distribution over the tokens, "
        "largest where x_i · x_j is largest."
    )


def check_batched_self_attention(fn: Callable[[Tensor], Tensor]) -> None:
    """``fn(X)`` with X (B, T, D) must return softmax(X Xᵀ) X for every batch item at once."""
    X = _inputs(3, 5, 4, seed=1)
    got = call(fn, X.clone())
    expected = (X @ X.transpose(-2, -1)).softmax(dim=-1) @ X
    hint = (
        "Transpose only the last two axes (X.transpose(-2, -1)); "
        "X.T would also swap the batch axis."
    )
    expect_close(got, expected, "batched self-attention", hint)
    return passed("one batched matrix product handles all sequences at once.")


def check_cosine_attention(fn: Callable[[Tensor, float], Tensor]) -> None:
    """``fn(X, tau)``: softmax(X̂ X̂ᵀ / tau) X with X̂ the rows of X scaled to unit length."""
    X = _inputs(2, 5, 4, seed=2) * torch.tensor([1.0, 10.0, 0.1, 3.0])
    tau = 0.5
    got = call(fn, X.clone(), tau)
    Xn = X / X.norm(dim=-1, keepdim=True)
    expected = (Xn @ Xn.transpose(-2, -1) / tau).softmax(dim=-1) @ X
    if isinstance(got, Tensor) and got.shape == expected.shape:
        wrong_v = (Xn @ Xn.transpose(-2, -1) / tau).softmax(dim=-1) @ Xn
        if torch.allclose(got, wrong_v, atol=1e-5):
            raise ExerciseError(
                "Normalise only for the similarities: "
                "the weighted average must mix the original rows X."
            )
    expect_close(
        got,
        expected,
        "cosine attention",
        "Normalise each row (dim=-1), divide the scores by tau, softmax per row.",
    )
    return passed(
        "similarities now ignore vector length, so a long vector no longer dominates."
    )


def check_masked_attention(
    fn: Callable[[Tensor, Tensor, Tensor, Tensor], tuple[Tensor, Tensor]],
) -> None:
    """``fn(q, k, v, mask)`` must return (output, weights) of scaled, masked dot-product
    attention."""
    q, k, v = (
        _inputs(2, 3, 5, 8, seed=3),
        _inputs(2, 3, 7, 8, seed=4),
        _inputs(2, 3, 7, 6, seed=5),
    )
    mask = _inputs(2, 1, 5, 7, seed=6) > -0.5
    mask[..., 0] = True  # every query may see at least one key
    result = call(fn, q, k, v, mask)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ExerciseError("Return a pair (output, weights).")
    out, w = result
    ref_out, ref_w = attention.scaled_dot_product_attention(q, k, v, mask=mask)
    if isinstance(w, Tensor) and w.shape == ref_w.shape:
        unscaled = attention.scaled_dot_product_attention(
            q, k, v, mask=mask, scale=1.0
        )[1]
        if torch.allclose(w, unscaled, atol=1e-5):
            raise ExerciseError(
                "The weights are unscaled: divide q kᵀ by √d_k before the softmax."
            )
        if (w[~mask.expand_as(w)].abs() > 1e-6).any():
            raise ExerciseError(
                "Some masked positions got weight: fill them with -inf *before* the softmax."
            )
    expect_close(w, ref_w, "weights")
    expect_close(out, ref_out, "output")
    return passed(
        "scaled scores, masked before the softmax, then a weighted average of the values."
    )


def check_split_heads(fn: Callable[[Tensor, int], Tensor]) -> None:
    """``fn(x, n_heads)`` must turn (B, T, D) into (B, H, T, D // H), head h holding
    features h·Dh … (h+1)·Dh - 1."""
    x = _inputs(2, 5, 12, seed=7)
    got = call(fn, x.clone(), 3)
    expected = attention.split_heads(x, 3)
    if (
        isinstance(got, Tensor)
        and got.shape == expected.shape
        and not torch.allclose(got, expected)
    ):
        if torch.allclose(got, x.reshape(2, 3, 5, 4)):
            raise ExerciseError(
                "Right shape, wrong numbers: reshaping straight to (B, H, T, Dh) "
                "mixes tokens into heads. "
                "View as (B, T, H, Dh) first, then swap the T and H axes."
            )
    expect_close(
        got, expected, "split heads", "View as (B, T, H, Dh), then transpose(1, 2)."
    )
    return passed("each head sees its own slice of every token's features.")


def check_mha_parameter_count(fn: Callable[[int, int], int]) -> None:
    """``fn(d_model, n_heads)`` must return the number of parameters of MultiHeadAttention
    (with biases)."""
    for d_model, n_heads in ((8, 2), (64, 4), (64, 16), (96, 3)):
        got = call(fn, d_model, n_heads)
        expected = sum(
            p.numel()
            for p in attention.MultiHeadAttention(d_model, n_heads).parameters()
        )
        if got != expected:
            raise ExerciseError(
                f"d_model={d_model}, n_heads={n_heads}: you said {got}, the module has {expected}. "
                "Four d_model x d_model matrices, each with a bias of d_model; does n_heads matter?"
            )
    return passed(
        "4·d_model² + 4·d_model, whatever the number of heads: "
        "heads split the width, they do not add to it."
    )
