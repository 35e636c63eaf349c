"""Normalisation layers (chapters 03 and 06): LayerNorm and RMSNorm.

LayerNorm standardises each token's feature vector on its own (Ba et al., 2016):

    μ = mean(x),  σ² = mean((x − μ)²)           over the last (feature) axis
    y = γ ⊙ (x − μ) / sqrt(σ² + ε) + β

The variance is the *biased* one (divide by d_model, not d_model − 1), as in the paper and
in ``torch.nn.LayerNorm``. Unlike BatchNorm (Ioffe & Szegedy, 2015), nothing is averaged
over the batch, so a token's output never depends on the other sequences in the batch
and training and evaluation compute the same thing.

RMSNorm (Zhang & Sennrich, 2019) keeps only the rescaling: no mean is subtracted and
there is no β,

    y = γ ⊙ x / sqrt(mean(x²) + ε)

which is cheaper and, in practice, trains as well (T5, Llama and Mistral use it).
Whether it is faster depends on the kernels: :func:`time_pairs` times forward plus
backward of (LayerNorm, RMSNorm) pairs in rounds, :func:`ratio_words` reads the
ratio round by round, and :func:`time_table` prints both (chapter 06).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import benchmark

__all__ = [
    "NORMS",
    "LayerNorm",
    "RMSNorm",
    "make_norm",
    "time_pairs",
    "ratio_words",
    "time_table",
]

NORMS = ("layer", "rms")


class LayerNorm(nn.Module):
    """Layer normalisation over the last (feature) axis with learnable γ (weight) and β (bias).

    Shapes: x (..., d_model) -> (..., d_model). Computed by PyTorch's fused
    ``F.layer_norm`` (one kernel, forward and backward; the notebooks write the formula
    out). The statistics are computed in at least float32 (then cast back), so
    half-precision inputs do not lose the variance.
    ``bias=False`` drops β (as ``torch.nn.LayerNorm(bias=False)``). Ba, Kiros & Hinton (2016).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, bias: bool = True) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(
                f"d_model must be a positive number of features, got {d_model}"
            )
        if not eps > 0:
            raise ValueError(
                "eps must be positive (it keeps the division finite for constant "
                f"inputs), got {eps}"
            )
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))  # γ, starts as "no rescaling"
        self.bias = (
            nn.Parameter(torch.zeros(d_model)) if bias else None
        )  # β, starts as "no shift"

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"LayerNorm expects input of shape (..., d_model={self.d_model}), "
                f"got shape {tuple(x.shape)}"
            )
        if x.dtype == self.weight.dtype and x.dtype in (torch.float32, torch.float64):
            # one fused kernel, forward and backward: the formula above, with γ and β
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        # half precision (or mixed dtypes): the statistics in float32, then cast back
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        y = F.layer_norm(xf, (self.d_model,), eps=self.eps).to(x.dtype)  # (..., d)
        y = y * self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last axis, with a learnable γ only.

    Shapes: x (..., d_model) -> (..., d_model). The mean square is computed in at least
    float32 and the result cast back to the input's dtype before γ is applied, as in
    Llama's reference code. Zhang & Sennrich (2019).
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(
                f"d_model must be a positive number of features, got {d_model}"
            )
        if not eps > 0:
            raise ValueError(
                "eps must be positive (it keeps the division finite for an all-zero "
                f"input), got {eps}"
            )
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))  # γ

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"RMSNorm expects input of shape (..., d_model={self.d_model}), "
                f"got shape {tuple(x.shape)}"
            )
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        ms = xf.pow(2).mean(dim=-1, keepdim=True)  # (..., 1): mean square per token
        return (xf * torch.rsqrt(ms + self.eps)).to(x.dtype) * self.weight

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """``"layer"`` -> :class:`LayerNorm`, ``"rms"`` -> :class:`RMSNorm` (blocks take
    the choice as ``norm=``)."""
    if kind == "layer":
        return LayerNorm(d_model, eps=eps)
    if kind == "rms":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")


Norm = Callable[[Tensor], Tensor]


def time_pairs(
    pairs: dict[str, tuple[Norm, Norm]],
    shape: Sequence[int],
    device: torch.device | str = "cpu",
    rounds: int = 11,
) -> dict[str, tuple[list[float], list[float]]]:
    """Seconds of forward + backward of each (LayerNorm version, RMSNorm version) pair,
    in rounds: every function gets its own fixed random input of ``shape`` and
    gradient from above, is called once untimed, then once per round, the rounds one
    after the other, so that a load that comes and goes hits both members of a pair
    alike. CPU seconds of this process on a CPU, synchronised wall-clock seconds on
    a GPU (:func:`transformer_book.benchmark.median_time` with ``clock="auto"``).
    Modules are moved to ``device``.

    Shapes: each function (*shape) -> (*shape). Returns name -> (LayerNorm's seconds,
    RMSNorm's seconds), one per round."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")

    def forward_backward(fn: Norm) -> Callable[[], None]:
        fn = fn.to(device) if isinstance(fn, nn.Module) else fn
        x = torch.randn(*shape, device=device, requires_grad=True)
        g = torch.randn(*shape, device=device)  # the gradient arriving from above

        def step() -> None:
            x.grad = None
            fn(x).backward(g)

        return step

    calls = {
        (n, i): forward_backward(f) for n, fs in pairs.items() for i, f in enumerate(fs)
    }
    for call in calls.values():
        call()  # a first call of each, untimed
    times: dict[tuple[str, int], list[float]] = {key: [] for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            times[key].append(benchmark.median_time(call, 1, 0, device, "auto"))
    return {name: (times[name, 0], times[name, 1]) for name in pairs}


def ratio_words(ratios: Sequence[float]) -> dict[str, str]:
    """RMSNorm's time over LayerNorm's, one ratio per round, in words that the rounds
    support: "ratio" (the median), "middle" (the quartiles, the middle half of the
    rounds) and "words" (less time, more time, or about as long)."""
    if len(ratios) < 2:
        raise ValueError(f"ratios must hold at least two rounds, got {len(ratios)}")
    q1, q3 = statistics.quantiles(ratios, n=4)[::2]
    if q3 < 1:
        words = "less time than LayerNorm in at least three rounds out of four"
    elif q1 > 1:
        words = "more time than LayerNorm in at least three rounds out of four"
    else:
        words = "about as long as LayerNorm: the middle half of the rounds straddles 1"
    median = statistics.median(ratios)
    return {"ratio": f"{median:.2f}", "middle": f"{q1:.2f}–{q3:.2f}", "words": words}


def time_table(
    times: dict[str, tuple[list[float], list[float]]], label: str = ""
) -> list[str]:
    """Lines of :func:`time_pairs`' ``times``: per pair, the median milliseconds of
    LayerNorm and of RMSNorm, and their ratio round by round (:func:`ratio_words`'
    median and middle half); ``label`` (the device) heads the names' column."""
    lines = [
        f"{label:>15} {'LayerNorm':>10} {'RMSNorm':>10} {'ratio':>6} {'middle half':>12}"
    ]
    for name, (ln, rms) in times.items():
        said = ratio_words([b / a for a, b in zip(ln, rms)])  # RMSNorm / LayerNorm
        ln_ms, rms_ms = 1e3 * statistics.median(ln), 1e3 * statistics.median(rms)
        lines.append(f"{name:>15} {ln_ms:>7.2f} ms {rms_ms:>7.2f} ms "
                     f"{said['ratio']:>6} {said['middle']:>12}")  # fmt: skip
    return lines
