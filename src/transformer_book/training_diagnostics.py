"""What a training run did to the weights and their gradients: the total gradient norm
of every update before clipping (:class:`GradNorms`, given to
:func:`transformer_book.training.train` as ``on_step``), how one backward pass's
gradient is spread along the layers of a stack (:func:`layer_gradient_norms`, chapter
06; :func:`quarter_means` sums it up by the first and the last quarter,
:func:`quarter_table` prints that over initialisations), and how far
training moved the weights from where they started (:func:`weight_drift`, chapter 12).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import Tensor, nn

from .training import to_device

__all__ = [
    "GradNorms",
    "layer_gradient_norms",
    "quarter_means",
    "quarter_table",
    "weight_drift",
]


class GradNorms:
    """Records the total gradient norm ``||g||`` of every update *before* clipping:
    hooks note each gradient's squared norm inside ``backward`` (the loop clips
    after it), and :meth:`on_step`, given to :func:`train` as ``on_step``, adds them
    up. Use as a context manager around the training run."""

    def __init__(self, model: nn.Module) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.norms: list[float] = []
        self._sq: dict[int, Tensor] = {}
        self._handles: list = []

    def on_step(self, step: int, loss: float) -> None:
        if not self._sq:
            raise ValueError(
                "no gradient was recorded for this step: use GradNorms as a context "
                "manager around the training run, on a model with trainable parameters"
            )
        self.norms.append(torch.stack(list(self._sq.values())).sum().sqrt().item())
        self._sq = {}

    def __enter__(self) -> GradNorms:
        def hook(i: int):
            def note(grad: Tensor) -> None:
                self._sq[i] = grad.detach().float().pow(2).sum()

            return note

        self._handles = [p.register_hook(hook(i)) for i, p in enumerate(self.params)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()


def layer_gradient_norms(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, object], Tensor],
    batch: object,
    layers: Iterable[nn.Module],
) -> Tensor:
    """``||∂loss/∂θ_l||`` for every module l of ``layers`` (the blocks of a stack),
    from one backward pass of ``loss_fn(model, batch)``, the batch moved to the
    model's device: how the gradient is spread along a freshly built stack (chapter
    06). The model's gradients are reset first and hold this batch's afterwards.

    Shapes: returns (n_layers,), on the CPU."""
    layers = list(layers)
    if not layers or any(not list(layer.parameters()) for layer in layers):
        raise ValueError("layers must be a non-empty list of modules with parameters")
    model.zero_grad(set_to_none=True)
    device = next(model.parameters()).device
    loss_fn(model, to_device(batch, device)).backward()
    norms = []
    for layer in layers:
        grads = [p.grad.flatten() for p in layer.parameters() if p.grad is not None]
        if not grads:
            raise ValueError("layers holds a module the loss does not depend on")
        norms.append(torch.cat(grads).norm())
    return torch.stack(norms).cpu()


def quarter_means(norms: Tensor) -> tuple[Tensor, Tensor]:
    """The mean of per-layer gradient norms (:func:`layer_gradient_norms`, one row per
    initialisation) over the first quarter of the layers, nearest the input, and over
    the last quarter, nearest the output; a quarter is ``L // 4`` layers.

    Shapes: norms (S, L), L >= 4 -> first (S,), last (S,)."""
    if norms.dim() != 2 or norms.shape[1] < 4:
        raise ValueError(
            f"norms must be (S, L) with L >= 4 layers, got {tuple(norms.shape)}"
        )
    q = norms.shape[1] // 4  # layers per quarter
    return norms[:, :q].mean(1), norms[:, -q:].mean(1)


def quarter_table(quarters: dict[tuple[bool, int], tuple[Tensor, Tensor]]) -> list[str]:
    """Lines of the gradient per block's first and last quarter, per (norm_first,
    depth) of ``quarters`` (:func:`quarter_means`, each (S,)): both means over the
    initialisations, the ratio of those means, and the range of the ratio over the
    initialisations taken one by one."""
    lines = ["placement, blocks: first quarter, last quarter, last/first (min–max)"]
    for (first, L), (low, high) in quarters.items():  # (S,) each
        r = high / low  # per initialisation
        lines.append(
            f"{'pre' if first else 'post'}-norm, {L:>2}: {low.mean():.3f}, "
            f"{high.mean():.3f}, {high.mean() / low.mean():.2f} "
            f"({r.min():.2f}–{r.max():.2f})"
        )
    return lines


@torch.no_grad()
def weight_drift(model: nn.Module, reference: nn.Module) -> float:
    """How far training moved the weights: ``||θ - θ₀|| / ||θ₀||`` over the
    parameters the two modules share by name and shape."""
    ref = dict(reference.named_parameters())
    num = den = 0.0
    for name, p in model.named_parameters():
        if name in ref and ref[name].shape == p.shape:
            r = ref[name].to(p.device)
            num += (p - r).pow(2).sum().item()
            den += r.pow(2).sum().item()
    if den == 0.0:
        raise ValueError("model and reference share no parameter by name and shape")
    return (num / den) ** 0.5
