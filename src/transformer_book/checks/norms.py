"""Checks for the exercises of chapter 06 (normalisation: LayerNorm as a centred RMSNorm,
RMSNorm in half precision, counting the norms' parameters)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import blocks
from ._core import ExerciseError, call, expect_close, passed

__all__ = [
    "check_layer_norm_via_rms",
    "check_rms_norm_half",
    "check_norm_param_count",
]


def _randn(*shape: int, seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _same(got: object, ref: Tensor, atol: float = 1e-4) -> bool:
    return (
        isinstance(got, Tensor)
        and got.shape == ref.shape
        and bool(torch.allclose(got.float(), ref.float(), atol=atol, rtol=1e-3))
    )


def _rms(x: Tensor, eps: float) -> Tensor:
    """Plain RMS normalisation over the last axis, no γ."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def check_layer_norm_via_rms(
    fn: Callable[[Tensor, Tensor, Tensor, float], Tensor],
) -> str:
    """``fn(x, gamma, beta, eps)``: LayerNorm written as an RMS normalisation of the
    centred input, ``gamma * rms_norm(x - mean(x), eps) + beta``; it must equal
    ``F.layer_norm`` exactly (same ε)."""
    D = 6
    x = _randn(3, 4, D, seed=0) * 2.0 + _randn(3, 4, 1, seed=1) * 5.0  # offset tokens
    gamma, beta = 1.0 + 0.5 * _randn(D, seed=2), _randn(D, seed=3)
    eps = 0.05  # large on purpose, so that where ε goes shows in the result
    got = call(fn, x.clone(), gamma.clone(), beta.clone(), eps)
    expected = F.layer_norm(x, (D,), gamma, beta, eps)
    mu = x.mean(-1, keepdim=True)
    mistakes = [
        (
            gamma * _rms(x, eps) + beta,
            "You did not centre x: that is RMSNorm (plus β). Subtract each token's "
            "mean over its features first: x - x.mean(dim=-1, keepdim=True).",
        ),
        (
            gamma * _rms(x - x.mean(0, keepdim=True), eps) + beta,
            "You centred over the batch axis. LayerNorm centres each token over its "
            "own features: mean(dim=-1, keepdim=True).",
        ),
        (
            gamma * _rms(x - mu, eps),
            "β is missing: RMSNorm has only γ, but LayerNorm adds β after the scaling.",
        ),
        (
            gamma
            * (x - mu)
            / (torch.sqrt((x - mu).pow(2).mean(-1, keepdim=True)) + eps)
            + beta,
            "Put ε inside the square root: (x - μ) / sqrt(mean((x - μ)²) + ε).",
        ),
    ]
    for wrong, message in mistakes:
        if not _same(got, expected) and _same(got, wrong):
            raise ExerciseError(message)
    expect_close(
        got,
        expected,
        "LayerNorm via RMS",
        "gamma * rms_norm(x - mean(x), eps) + beta, statistics over the last axis.",
    )
    return passed(
        "LayerNorm is RMSNorm applied to the centred vector, plus β: the mean square "
        "of x - μ is the (biased) variance."
    )


def check_rms_norm_half(fn: Callable[[Tensor, Tensor, float], Tensor]) -> str:
    """``fn(x, weight, eps)``: RMSNorm that keeps the input's dtype but computes the
    mean square in float32, so large float16 activations do not overflow."""
    D = 64
    weight = (1.0 + 0.1 * _randn(D, seed=4)).half()
    eps = 1e-6

    def reference(x: Tensor) -> Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return y.to(x.dtype) * weight.to(x.dtype)

    # 1. float32, ordinary values: the formula itself
    x32 = _randn(3, 5, D, seed=5) * 3.0 + 1.0
    got = call(fn, x32.clone(), weight.float(), eps)
    expected = reference(x32)
    if _same(got, x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps) * weight):
        raise ExerciseError(
            "You divided by the root of the *sum* of squares: RMS is the root of the "
            "*mean* square, mean(x², dim=-1)."
        )
    xc = x32 - x32.mean(-1, keepdim=True)
    if _same(got, _rms(xc, eps) * weight.float()):
        raise ExerciseError(
            "You subtracted the mean: that is LayerNorm's centring. RMSNorm only "
            "rescales, x / sqrt(mean(x²) + eps)."
        )
    expect_close(
        got, expected, "RMSNorm in float32", "x / sqrt(mean(x²) + eps) * weight"
    )
    # 2. float16 with large activations: x² overflows float16 (max 65504)
    x16 = (_randn(4, D, seed=6) * 600.0).half()
    got = call(fn, x16.clone(), weight.clone(), eps)
    if not isinstance(got, Tensor):
        raise ExerciseError(f"expected a torch.Tensor, got {type(got).__name__}.")
    if got.dtype != torch.float16:
        raise ExerciseError(
            f"The output has dtype {got.dtype}; a float16 input must give a float16 "
            "output. Compute in float32, then cast back: y.to(x.dtype) * weight."
        )
    if not bool(torch.isfinite(got).all()) or got.abs().max() < 1e-3:
        raise ExerciseError(
            "With float16 activations around 600, x² reaches 360,000, beyond "
            "float16's largest number (65,504): the mean square overflows to inf and "
            "the output collapses to 0 (or NaN). Compute the statistics in float32: "
            "xf = x.float()."
        )
    expect_close(got, reference(x16), "RMSNorm in float16", atol=2e-2, rtol=1e-2)
    # 3. an all-zero token: ε keeps it finite
    zero = call(fn, torch.zeros(2, D), weight.float(), eps)
    if not isinstance(zero, Tensor) or not bool(torch.isfinite(zero).all()):
        raise ExerciseError(
            "An all-zero token gives NaN (0 / 0): add eps inside the square root."
        )
    return passed(
        "float32 statistics, output in the input's dtype: no overflow in float16, and "
        "ε keeps an all-zero token finite."
    )


def check_norm_param_count(fn: Callable[[int, int, str, bool], int]) -> str:
    """``fn(n_layers, d_model, norm, norm_first)``: how many parameters the
    normalisation layers of ``blocks.Encoder(n_layers, d_model, ..., norm=norm,
    norm_first=norm_first)`` hold (``norm`` is "layer" or "rms")."""

    def truth(n_layers: int, d_model: int, norm: str, norm_first: bool) -> int:
        enc = blocks.Encoder(n_layers, d_model, 2, 8, norm_first=norm_first, norm=norm)
        return sum(p.numel() for n, p in enc.named_parameters() if "norm" in n)

    cases = [
        (L, d, norm, first)
        for L, d in ((1, 4), (3, 6), (12, 16))
        for norm in ("layer", "rms")
        for first in (False, True)
    ]
    for L, d, norm, first in cases:
        got = call(fn, L, d, norm, first)
        want = truth(L, d, norm, first)
        if not isinstance(got, int) or isinstance(got, bool):
            raise ExerciseError(f"return a Python int, got {type(got).__name__}.")
        if got == want:
            continue
        k = 2 if norm == "layer" else 1  # vectors per norm: γ and β, or γ alone
        where = f"(n_layers={L}, d_model={d}, norm={norm!r}, norm_first={first})"
        if norm == "rms" and got == 2 * want:
            raise ExerciseError(
                f"{where}: you counted β for RMSNorm. RMSNorm has only γ: d_model "
                "parameters per norm; LayerNorm has 2 · d_model."
            )
        if first and got == want - k * d:
            raise ExerciseError(
                f"{where}: one norm short. A pre-norm stack ends with one more "
                "norm after its last block (its stream is otherwise unnormalised)."
            )
        if not first and got == want + k * d:
            raise ExerciseError(
                f"{where}: one norm too many. Only the pre-norm stack adds a final "
                "norm; a post-norm block already ends with one."
            )
        if got * 2 == want or got * 2 == want - k * d:
            raise ExerciseError(
                f"{where}: every block has two norms, one per sublayer (attention "
                "and feed-forward)."
            )
        raise ExerciseError(f"{where}: got {got}, expected {want}.")
    return passed(
        "two norms per block, one more at the end of a pre-norm stack; 2·d_model "
        "parameters per LayerNorm, d_model per RMSNorm."
    )
