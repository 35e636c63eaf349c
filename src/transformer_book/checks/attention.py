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
    "check_outweigh_self",
    "check_batched_self_attention",
    "check_same_sentence_mask",
    "check_cosine_attention",
    "check_masked_attention",
    "check_split_heads",
    "check_saturation_width",
    "check_shift_targets",
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


def check_outweigh_self(fn: Callable[[Tensor], Tensor]) -> None:
    """``fn(x)`` with x (d,) must return y (d,) such that in softmax(X Xᵀ) for the
    two-word sentence X = [x; y], the row of x puts more weight on y than on x."""
    gen = torch.Generator().manual_seed(11)
    xs = [torch.randn(d, generator=gen) for d in (4, 4, 8, 8, 16)]
    xs.append(10 * torch.randn(4, generator=gen))  # a long word
    for n, x in enumerate(xs, start=1):
        y = call(fn, x.clone())
        if not isinstance(y, Tensor):
            raise ExerciseError(f"expected a torch.Tensor, got {type(y).__name__}.")
        if y.shape != x.shape:
            raise ExerciseError(
                f"x has shape {tuple(x.shape)}, your y {tuple(y.shape)}: return one "
                "word vector of the same width as x."
            )
        x64, y64 = x.double(), y.detach().double()
        if not torch.isfinite(y64).all():
            raise ExerciseError("y holds inf or NaN: return a finite vector.")
        W = (torch.stack([x64, y64]) @ torch.stack([x64, y64]).T).softmax(dim=-1)
        if W[0, 1] > W[0, 0]:
            continue
        self_score, cross = (x64 @ x64).item(), (x64 @ y64).item()
        norm_x, norm_y = x64.norm().item(), y64.norm().item()
        where = f"test word {n} (d={x.numel()})"
        if torch.allclose(x64, y64):
            raise ExerciseError(
                f"{where}: a copy of x ties with x: both of its scores are x·x, so the "
                "row of x splits its weight 50/50. y must score *higher* than x·x "
                "against x."
            )
        if norm_y <= norm_x:
            raise ExerciseError(
                f"{where}: ‖y‖ = {norm_y:.2f} is not larger than ‖x‖ = {norm_x:.2f}. "
                "Since x·y = ‖x‖‖y‖cos θ ≤ ‖x‖‖y‖, a vector no longer than x can never "
                "score above x·x = ‖x‖²: make y longer."
            )
        cos = cross / (norm_x * norm_y)
        raise ExerciseError(
            f"{where}: y is longer than x but points too far from it (cos θ = "
            f"{cos:.2f}): x·y = {cross:.2f} stays below x·x = {self_score:.2f}. A y "
            "that works for every x must be built from x itself: point it along x."
        )
    return passed(
        "the row of x prefers y exactly when x·y > x·x = ‖x‖², which by Cauchy–Schwarz "
        "needs ‖y‖ > ‖x‖. In parameter-free attention, a long vector takes weight from "
        "every word it roughly points along. Exercise 3 takes length out of the scores; "
        "chapter 2's projections let the layer learn what to match."
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


def check_same_sentence_mask(fn: Callable[[int, int], Tensor]) -> None:
    """``fn(B, T)`` must return the (B·T, B·T) boolean mask that lets each row of a
    flattened batch X.reshape(B·T, d) attend only to rows of its own sentence."""
    for B, T in ((3, 4), (2, 5), (1, 3)):
        got = call(fn, B, T)
        # row k of the flat batch belongs to sentence k // T
        sentence = torch.arange(B * T) // T
        expected = sentence[:, None] == sentence[None, :]  # (B·T, B·T), block diagonal
        if isinstance(got, Tensor) and got.shape == expected.shape:
            if got.dtype != torch.bool:
                raise ExerciseError(
                    f"B={B}, T={T}: the mask has dtype {got.dtype}; masks in this book "
                    "are boolean (True = may attend). Build it from a comparison such "
                    "as a == b, or call .bool()."
                )
            if B > 1 and torch.equal(got, ~expected):
                raise ExerciseError(
                    f"B={B}, T={T}: True and False are swapped. True means *may "
                    "attend*: words of the same sentence must be True."
                )
            if torch.equal(got, torch.eye(B * T, dtype=torch.bool)) and T > 1:
                raise ExerciseError(
                    f"B={B}, T={T}: only the diagonal is True, so every word sees only "
                    "itself. A word may attend to every word of its own sentence."
                )
            wrong = torch.arange(B * T) % B
            if B > 1 and torch.equal(got, wrong[:, None] == wrong[None, :]):
                raise ExerciseError(
                    f"B={B}, T={T}: you grouped rows by k % B. reshape(B·T, d) keeps "
                    "each sentence's T rows together: row k is word k % T of sentence "
                    "k // T."
                )
        expect_close(
            got,
            expected,
            f"mask for B={B}, T={T}",
            "Row k of the flattened batch belongs to sentence k // T; True where the "
            "query's and the key's sentences are equal.",
        )
    X = _inputs(3, 4, 5, seed=8)  # (B, T, d)
    flat = X.reshape(12, 5)  # (B·T, d)
    masked = attention.scaled_dot_product_attention(
        flat, flat, flat, mask=call(fn, 3, 4), scale=1.0
    )[0]
    per_sentence = (X @ X.transpose(-2, -1)).softmax(dim=-1) @ X  # (B, T, d)
    expect_close(masked.reshape(3, 4, 5), per_sentence, "masked flat attention")
    return passed(
        "with this block-diagonal mask, attention over the flattened batch equals "
        "attention sentence by sentence. Training code uses the same trick to pack "
        "several short sequences into one long row."
    )


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
        "similarities now ignore vector length, so a long vector no longer dominates "
        "the weights. The values are still the rows of X: a row that gives a long "
        "vector weight still gets a long contribution from it."
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


_WIDTHS = [2**i for i in range(9)]  # the widths d_k = 1, 2, 4, …, 256 of the search


def _mean_largest_weight(d_k: int, n_keys: int, trials: int = 2000) -> float:
    """Mean over random q, k ~ N(0, I) of the largest weight of softmax(q·k), unscaled."""
    gen = torch.Generator().manual_seed(d_k * 1000 + n_keys)
    q = torch.randn(trials, 1, d_k, generator=gen)
    k = torch.randn(trials, n_keys, d_k, generator=gen)
    w = (q @ k.transpose(-2, -1)).softmax(dim=-1)  # (trials, 1, n_keys)
    return w.max(dim=-1).values.mean().item()


def check_saturation_width(fn: Callable[[int, float], int | None]) -> None:
    """``fn(n_keys, threshold)`` must return the smallest d_k in 1, 2, 4, …, 256 at which
    the mean largest weight of softmax(q·k) over ``n_keys`` random keys, *unscaled*,
    exceeds ``threshold`` (None if no width does).

    Monte Carlo answers are noisy: next to the crossing, a width whose mean is within
    0.015 of the threshold is accepted too.
    """
    tol = 0.015
    found = {}
    for n_keys, threshold in ((16, 0.75), (4, 0.75), (64, 0.75)):
        got = call(fn, n_keys, threshold)
        curve = {}
        for d in _WIDTHS:
            curve[d] = _mean_largest_weight(d, n_keys)
            if curve[d] > threshold + tol:
                break
        expected = next(d for d, m in curve.items() if m > threshold)
        where = f"n_keys={n_keys}, threshold={threshold}"
        if got is None:
            raise ExerciseError(
                f"{where}: you found no width at which the mean largest weight passes "
                f"{threshold}, but the unscaled softmax does (the reference finds "
                f"d_k = {expected}). Use the raw scores q·k, not q·k/√d_k: the "
                "scaling is exactly what stops the saturation. Take the largest "
                "weight over the keys (dim=-1), then the mean over the trials."
            )
        if not isinstance(got, int) or got not in _WIDTHS:
            raise ExerciseError(
                f"{where}: return one of the widths 1, 2, 4, …, 256 (an int), got "
                f"{got!r}."
            )
        if got not in curve:
            raise ExerciseError(
                f"{where}: you said d_k = {got}, but already at d_k = {expected} the "
                f"mean largest weight is about {curve[expected]:.2f}: return the "
                "*smallest* width that passes."
            )
        smaller = curve.get(got // 2, 0.0) if got > 1 else 0.0
        if curve[got] > threshold - tol and smaller < threshold + tol:
            found[n_keys] = expected
            continue
        if got < expected:
            raise ExerciseError(
                f"{where}: at d_k = {got} the mean largest weight is only about "
                f"{curve[got]:.2f}, below {threshold}. Return the first width that "
                "passes the threshold, not the last one below it."
            )
        raise ExerciseError(
            f"{where}: you said d_k = {got}, but already at d_k = {expected} the mean "
            f"largest weight is about {curve[expected]:.2f}: return the *smallest* "
            "width that passes."
        )
    return passed(
        f"the mean largest weight passes 0.75 at d_k = {found[4]} with 4 keys, at "
        f"{found[16]} with 16 keys and at {found[64]} with 64 keys. The more keys "
        "compete, the wider the head must be before the softmax turns into an argmax."
    )


def check_shift_targets(fn: Callable[[Tensor, int], Tensor]) -> None:
    """``fn(tokens, offset)`` with tokens (B, T) must return, at every position i, the
    token at position (i + offset) mod T of the same sequence."""
    tokens = torch.arange(21).reshape(3, 7)  # (B, T): distinct tokens show the moves
    T = tokens.shape[1]
    for offset in (-2, 1, 3):
        got = call(fn, tokens.clone(), offset)
        source = (torch.arange(T) + offset) % T  # position each target comes from
        expected = tokens[:, source]  # (B, T)
        if (
            isinstance(got, Tensor)
            and got.shape == expected.shape
            and not torch.equal(got, expected)
        ):
            if torch.equal(got, tokens[:, (torch.arange(T) - offset) % T]):
                raise ExerciseError(
                    f"offset={offset}: you returned the token at i − offset, the "
                    "opposite direction. torch.roll(t, s, dims=1) moves every entry s "
                    "places to the right, so position i receives the token from i − s: "
                    "to read position i + offset, roll by −offset."
                )
            if torch.equal(got, tokens):
                raise ExerciseError(
                    f"offset={offset}: you returned the tokens unchanged; position i "
                    "must hold the token at i + offset."
                )
            if torch.equal(got, tokens.roll(-offset, dims=0)) or torch.equal(
                got, tokens.roll(offset, dims=0)
            ):
                raise ExerciseError(
                    f"offset={offset}: you moved whole sequences across the batch. "
                    "Roll along the positions, dims=1."
                )
            inside = (torch.arange(T) + offset >= 0) & (torch.arange(T) + offset < T)
            if torch.equal(got[:, inside], expected[:, inside]):
                raise ExerciseError(
                    f"offset={offset}: right inside the sequence, wrong at the ends. "
                    "The task wraps around: looking 2 back from position 0 reads "
                    "position T − 2 (torch.roll wraps for you)."
                )
        expect_close(
            got,
            expected,
            f"targets for offset={offset}",
            "Position i must hold the token at (i + offset) mod T.",
        )
    return passed(
        "position i now holds the token at i + offset, wrapping at the ends; "
        "torch.roll(tokens, -offset, dims=1) does it in one call."
    )


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
