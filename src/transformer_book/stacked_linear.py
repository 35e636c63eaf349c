"""Several linear layers that read the same input, stored as one matrix (chapter 14).

The query, key and value projections of self-attention multiply the same input by
three matrices. Stacked row-wise into one matrix, as nanoGPT's ``c_attn`` and torch's
``in_proj_weight`` hold them, the three products are one, forward and backward, and an
optimiser or a gradient clip handles one tensor instead of three:

    [W_1; W_2; W_3] x = [W_1 x; W_2 x; W_3 x]

:func:`stack` builds that layer from the three (their weights moved, not drawn again),
:class:`RowBlock` lets a block of its rows go on acting as a layer of its own,
:func:`stack_state_dict` reads a state dict written before the stacking, and
:func:`stacked_product` makes the one product from layers still stored apart.
:meth:`transformer_book.attention.MultiHeadAttention.stack_projections` uses them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["RowBlock", "stack", "stack_state_dict", "stacked_product"]


class RowBlock:
    """Rows ``start … stop - 1`` of a linear layer, used as a layer of its own: the
    query, key or value projection inside a stacked matrix
    (:meth:`transformer_book.attention.MultiHeadAttention.stack_projections`).
    ``weight`` and ``bias`` are views of the stacked layer's parameters, so writing
    into them (under ``torch.no_grad``) writes into it.
    Shapes: x (..., in_features) -> (..., stop - start)."""

    def __init__(self, linear: nn.Linear, start: int, stop: int) -> None:
        self.linear, self.start, self.stop = linear, start, stop

    @property
    def weight(self) -> Tensor:
        return self.linear.weight[self.start : self.stop]  # (stop - start, in), a view

    @property
    def bias(self) -> Tensor | None:
        bias = self.linear.bias
        return None if bias is None else bias[self.start : self.stop]  # a view

    @property
    def in_features(self) -> int:
        return self.linear.in_features

    @property
    def out_features(self) -> int:
        return self.stop - self.start

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)  # (..., stop - start)

    def __repr__(self) -> str:
        return f"RowBlock(rows {self.start}:{self.stop} of {self.linear})"


@torch.no_grad()
def stack(parts: Sequence[nn.Module], names: Sequence[str]) -> nn.Linear:
    """One ``nn.Linear`` whose weight is the ``parts``' weights stacked row-wise,
    (sum of out_features, in_features), and whose bias is theirs stacked (or None). The
    parameters are new tensors holding the old values; they are trainable if the parts'
    parameters were. ``names`` name the parts in errors: every part must be a plain
    ``nn.Linear`` (a wrapped one, LoRA's say, has no single weight to move), and their
    weights and biases must be all trainable or all frozen (one matrix has one
    ``requires_grad``)."""
    if not all(type(p) is nn.Linear for p in parts):
        raise TypeError(
            "stack_projections stacks plain nn.Linear projections; got "
            + ", ".join(type(p).__name__ for p in parts)
        )
    flags = [{t.requires_grad for t in p.parameters()} for p in parts]
    trainable = set().union(*flags)
    if len(trainable) > 1:
        raise ValueError(
            f"{', '.join(names[:-1])} and {names[-1]} (weights and biases) must all be "
            "trainable or all frozen to share one matrix; got requires_grad "
            + ", ".join(f"{n}={sorted(f)}" for n, f in zip(names, flags))
        )
    has_bias = parts[0].bias is not None
    total = sum(p.out_features for p in parts)
    stacked = nn.Linear(parts[0].in_features, total, bias=has_bias, device="meta")
    stacked.weight = nn.Parameter(torch.cat([p.weight for p in parts]))  # (total, in)
    if has_bias:
        stacked.bias = nn.Parameter(torch.cat([p.bias for p in parts]))  # (total,)
    for param in stacked.parameters():  # trainable as the parts were
        param.requires_grad_(trainable == {True})
    return stacked


def stack_state_dict(
    state_dict: dict[str, Tensor], prefix: str, names: Sequence[str], into: str
) -> None:
    """Rewrite, in place, a state dict written before the stacking: where all of
    ``prefix + name + ".weight"`` (and ``.bias``) are present for ``names``, they are
    replaced by ``prefix + into + ".weight"`` (``.bias``), their rows stacked in the
    order of ``names``. Keys already stacked are left as they are."""
    for kind in ("weight", "bias"):
        keys = [f"{prefix}{name}.{kind}" for name in names]
        if all(k in state_dict for k in keys):
            stacked = torch.cat([state_dict.pop(k) for k in keys])  # (total, …)
            state_dict[f"{prefix}{into}.{kind}"] = stacked


def stacked_product(x: Tensor, parts: Sequence[nn.Linear]) -> Tensor:
    """``[p(x) for p in parts]`` side by side as one product: the weights stacked at
    this call, (sum of out_features, in_features), so the forward pass and the input's
    gradient take one matrix product instead of one per part, and the parts stay the
    parameters. Shapes: x (..., in_features) -> (..., sum of out_features)."""
    weight = torch.cat([p.weight for p in parts])  # (total, in)
    bias = None
    if parts[0].bias is not None:
        bias = torch.cat([p.bias for p in parts])  # (total,)
    return F.linear(x, weight, bias)  # (..., total)
