"""Normalisation layers (chapters 03 and 06).

LayerNorm standardises each token's feature vector on its own (Ba et al., 2016):

    μ = mean(x),  σ² = mean((x − μ)²)           over the last (feature) axis
    y = γ ⊙ (x − μ) / sqrt(σ² + ε) + β

The variance is the *biased* one (divide by d_model, not d_model − 1), as in the paper and
in ``torch.nn.LayerNorm``. Unlike BatchNorm (Ioffe & Szegedy, 2015), nothing is averaged
over the batch, so a token's output never depends on the other sequences in the batch
and training and evaluation compute the same thing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LayerNorm"]


class LayerNorm(nn.Module):
    """Layer normalisation over the last (feature) axis with learnable γ (weight) and β (bias).

    Shapes: x (..., d_model) -> (..., d_model). The statistics are computed in at least
    float32 (then cast back), so half-precision inputs do not lose the variance.
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
        xf = x.to(torch.promote_types(x.dtype, torch.float32))
        mean = xf.mean(dim=-1, keepdim=True)  # (..., 1)
        var = xf.var(
            dim=-1, unbiased=False, keepdim=True
        )  # (..., 1), biased as in the paper
        y = ((xf - mean) * torch.rsqrt(var + self.eps)).to(x.dtype)  # (..., d_model)
        y = y * self.weight
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}, bias={self.bias is not None}"
