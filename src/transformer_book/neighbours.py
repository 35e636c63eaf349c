"""The neighbour-lookup task: heads that learn where to look (chapter 2).

At every position of a sequence of ``n_tokens`` token types, name the token ``offset``
places away, for two offsets at once (wrapping around at the ends): by default the
token before and the token after. Attention has no positions yet, so every input
vector is a one-hot token concatenated with a one-hot position (:func:`one_hot_inputs`).
:class:`NeighbourModel` is one :class:`transformer_book.attention.MultiHeadAttention`
layer with one linear read-out per target; :func:`train_neighbours` trains it with
:func:`transformer_book.training.train` and :func:`weight_at` measures where each
head looks.

Floor 3 (a model): it builds on ``attention`` and ``training``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import attention, training

__all__ = [
    "N_TOKENS",
    "LENGTH",
    "one_hot_inputs",
    "make_batch",
    "NeighbourModel",
    "loss_fn",
    "train_neighbours",
    "weight_at",
]

N_TOKENS, LENGTH = 8, 8  # token types; positions per sequence
D_MODEL = N_TOKENS + LENGTH  # one-hot token | one-hot position

Batch = tuple[Tensor, list[Tensor]]


def one_hot_inputs(tokens: Tensor) -> Tensor:
    """Shapes: tokens (B, T) -> (B, T, n_tokens + T), one-hot token | one-hot position."""
    if tokens.dim() != 2 or tokens.shape[1] != LENGTH:
        raise ValueError(
            f"tokens must have shape (B, {LENGTH}), got {tuple(tokens.shape)}"
        )
    positions = torch.arange(LENGTH).expand_as(tokens)  # (B, T)
    parts = [F.one_hot(tokens, N_TOKENS), F.one_hot(positions, LENGTH)]
    return torch.cat(parts, dim=-1).float()


def make_batch(
    batch_size: int, gen: torch.Generator, offsets: Sequence[int] = (-1, +1)
) -> Batch:
    """Inputs and one target per offset at every position: the token at position
    (i + offset) mod T. Shapes: -> x (B, T, d_model), targets [(B, T), ...]."""
    tokens = torch.randint(N_TOKENS, (batch_size, LENGTH), generator=gen)  # (B, T)
    # roll(s) moves entries s places right: position i gets the token at i - s
    return one_hot_inputs(tokens), [tokens.roll(-o, dims=1) for o in offsets]


class NeighbourModel(nn.Module):
    """A two-head attention layer and one linear classifier per target.

    Shapes: x (B, T, d_model) -> ([logits (B, T, n_tokens)] * n_targets,
    weights (B, 2, T, T))."""

    def __init__(self, n_targets: int = 2) -> None:
        super().__init__()
        self.attn = attention.MultiHeadAttention(D_MODEL, n_heads=2)
        readouts = (nn.Linear(D_MODEL, N_TOKENS) for _ in range(n_targets))
        self.readouts = nn.ModuleList(readouts)

    def forward(self, x: Tensor) -> tuple[list[Tensor], Tensor]:
        h, w = self.attn(x, need_weights=True)  # (B, T, d_model), (B, 2, T, T)
        return [readout(h) for readout in self.readouts], w


def loss_fn(model: NeighbourModel, batch: Batch) -> Tensor:
    """Summed cross-entropy of every target."""
    x, targets = batch
    logits, _ = model(x)
    pairs = zip(logits, targets)
    return sum(F.cross_entropy(lg.flatten(0, 1), t.flatten()) for lg, t in pairs)


def train_neighbours(
    make_batch: Callable[[int, torch.Generator], Batch], seed: int, steps: int
) -> tuple[NeighbourModel, list[float], list[float], Tensor]:
    """Train a NeighbourModel from ``seed`` on 50 batches of 64 from ``make_batch``
    (cycled for ``steps`` AdamW steps at 1e-2); return it, the loss history, the
    held-out accuracy per target and the held-out attention weights (1000, 2, T, T)."""
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # the model's initial weights
    model = NeighbourModel()
    batches = [make_batch(64, gen) for _ in range(50)]
    history = training.train(model, batches, loss_fn, steps=steps, lr=1e-2)
    x, targets = make_batch(1000, gen)  # held out
    with torch.no_grad():
        logits, w = model(x)
    accuracy = [
        (lg.argmax(-1) == t).float().mean().item() for lg, t in zip(logits, targets)
    ]
    return model, history, accuracy, w


def weight_at(w: Tensor, offset: int) -> Tensor:
    """Mean weight of each head on position (i + offset) mod T.
    Shapes: w (B, H, T, T) -> (H,)."""
    T = w.shape[-1]
    i = torch.arange(T)
    return w[:, :, i, (i + offset) % T].mean(dim=(0, 2))
