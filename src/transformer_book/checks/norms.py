"""Checks for the exercises of chapter 06 (normalisation: LayerNorm as a centred RMSNorm,
RMSNorm in half precision, a pre-norm stack without its final norm)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import blocks, classifiers
from ._core import ExerciseError, call, expect_close, passed

__all__ = [
    "check_layer_norm_via_rms",
    "check_rms_norm_half",
    "check_logit_growth",
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


def _logit_rms(model: nn.Module, ids: Tensor, keep: Tensor) -> float:
    with torch.no_grad():
        return model(ids)[keep].pow(2).mean().sqrt().item()


def _growth(model: nn.Module, ids: Tensor, change: Callable[[nn.Module], None],
            keep: Tensor) -> float:  # fmt: skip
    """RMS of the logits over ``keep`` after ``change`` (on a copy) / before it."""
    broken = copy.deepcopy(model)
    change(broken)
    return _logit_rms(broken, ids, keep) / _logit_rms(model, ids, keep)


def _drop_final(m: nn.Module) -> None:
    m.body.encoder.final_norm = nn.Identity()


def _drop_every_norm(m: nn.Module) -> None:
    _drop_final(m)
    for block in m.body.encoder.layers:
        block.norm1, block.norm2 = nn.Identity(), nn.Identity()


def _drop_last_block_norm(m: nn.Module) -> None:
    m.body.encoder.layers[-1].norm2 = nn.Identity()


def _stream_rms(model: nn.Module, ids: Tensor, keep: Tensor) -> float:
    """RMS, over the real tokens, of the stream that enters the final norm."""
    seen: list[Tensor] = []
    hook = model.body.encoder.final_norm.register_forward_hook(
        lambda module, args, out: seen.append(args[0])
    )
    try:
        with torch.no_grad():
            model(ids)
    finally:
        hook.remove()
    return seen[0][keep].pow(2).mean().sqrt().item()


def _pre_norm_tagger(n_layers: int, d_model: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    cfg = classifiers.ClassifierConfig(
        30, 5, max_len=16, d_model=d_model, n_heads=2, d_ff=2 * d_model, n_layers=1,
        dropout=0.0, pad_id=0,
    )  # fmt: skip
    model = classifiers.WordTagger(cfg)
    model.body.encoder = blocks.Encoder(n_layers, d_model, 2, 2 * d_model,
                                        norm_first=True)  # fmt: skip
    return model.eval()


def _same_weights(a: dict[str, Tensor], b: dict[str, Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def check_logit_growth(
    fn: Callable[[nn.Module, Tensor], float],
    predicted: float | None,
    model: nn.Module,
    ids: Tensor,
) -> str:
    """``fn(model, ids)``: for a pre-norm :class:`~transformer_book.classifiers.WordTagger`,
    the RMS of its logits over the real tokens of ``ids`` (``ids != model.cfg.pad_id``)
    with ``model.body.encoder.final_norm`` replaced by ``nn.Identity()``, divided by
    the same RMS with it; measured on a copy, ``model`` itself unchanged.
    ``predicted``: the reader's guess of that ratio for ``model`` and ``ids``, written
    before measuring; it must fall within 25 % of the measurement."""
    if isinstance(predicted, bool) or not isinstance(predicted, (int, float)):
        raise ExerciseError(
            "Write your prediction first, as a number: predicted_growth = ... (how "
            "many times larger the logits get without the final norm)."
        )
    # 1. the measurement, on small taggers with padded queries
    ids_small = torch.randint(1, 30, (4, 7), generator=torch.Generator().manual_seed(0))
    ids_small[1, 5:], ids_small[2, 3:], ids_small[3, 1:] = 0, 0, 0  # padding
    keep = ids_small != 0
    for n_layers in (2, 8):
        tagger = _pre_norm_tagger(n_layers, 8, seed=n_layers)
        before = {k: v.clone() for k, v in tagger.state_dict().items()}
        got = call(fn, tagger, ids_small.clone())
        if isinstance(tagger.body.encoder.final_norm, nn.Identity) or not _same_weights(
            before, tagger.state_dict()
        ):
            raise ExerciseError(
                "You changed the model you were given: its final norm is gone for "
                "whoever uses it next. Measure on a copy: broken = "
                "copy.deepcopy(model), then replace broken.body.encoder.final_norm."
            )
        if isinstance(got, Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            raise ExerciseError(
                f"return the ratio as a number, got {type(got).__name__}."
            )
        want = _growth(tagger, ids_small, _drop_final, keep)
        if math.isclose(got, want, rel_tol=1e-4):
            continue
        where = f"(a {n_layers}-block pre-norm tagger)"
        everywhere = torch.ones_like(keep)
        mistakes = [
            (1 / want, "You divided the other way round: RMS without the final norm "
                       "over RMS with it."),
            (_growth(tagger, ids_small, _drop_final, everywhere),
             "You counted the padding positions. Average over the real tokens only: "
             "keep = ids != model.cfg.pad_id, then logits[keep]."),
            (_growth(tagger, ids_small, _drop_every_norm, keep),
             "You removed the blocks' norms too (norm1, norm2). Only the stack's last "
             "norm goes: model.body.encoder.final_norm."),
            (_growth(tagger, ids_small, _drop_last_block_norm, keep),
             "You removed the last block's norm2, which normalises what enters its "
             "feed-forward sublayer. The stack's own last norm is "
             "model.body.encoder.final_norm."),
        ]  # fmt: skip
        for wrong, message in mistakes:
            if math.isclose(got, wrong, rel_tol=1e-4):
                raise ExerciseError(f"{where}: {message}")
        raise ExerciseError(
            f"{where}: you returned {got:.4f}, expected {want:.4f}: the RMS of the "
            "logits over the real tokens, without the final norm / with it."
        )
    # 2. the prediction, against the measurement on the reader's model
    keep = ids != model.cfg.pad_id
    measured = _growth(model, ids, _drop_final, keep)
    stream = _stream_rms(model, ids, keep)
    why = (
        f"The stream that enters the final norm has RMS {stream:.2f} here: inside a "
        "pre-norm block the norms rescale only what enters each sublayer, never the "
        "stream. The final norm hands the head vectors of RMS 1 (γ = 1, β = 0 at "
        "initialisation), and the head is linear, so the logits grow by about the "
        "stream's RMS (a little less: the head's bias does not grow)."
    )
    if abs(predicted - measured) > 0.25 * measured:
        raise ExerciseError(
            f"You predicted {predicted:.2f}; measured: {measured:.2f}. {why}"
        )
    return passed(
        f"measured {measured:.2f}, predicted {predicted:.2f}; the stream entering the "
        f"final norm has RMS {stream:.2f}. Without the final norm, a deeper pre-norm "
        "stack hands its head ever larger vectors."
    )
