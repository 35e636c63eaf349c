"""The neighbour-lookup task: heads that learn where to look (chapter 2).

At every position of a sequence of ``n_tokens`` token types, name the token ``offset``
places away, for two offsets at once (wrapping around at the ends): by default the
token before and the token after. Attention has no positions yet, so every input
vector is a one-hot token concatenated with a one-hot position (:func:`one_hot_inputs`).
:class:`NeighbourModel` is one :class:`transformer_book.attention.MultiHeadAttention`
layer with one linear read-out per target; :func:`train_neighbours` trains it with
:func:`transformer_book.training.train` and :func:`weight_at` measures where each
head looks (:func:`seed_table` over seeds, :func:`offset_lines` over offsets).

Chapter 08 asks the same of a stack of layers whose attention is windowed or global:
:func:`input_gradient` measures which input positions a
:class:`transformer_book.blocks.WindowedStack` lets reach an output
(:func:`gradient_by_distance`: by distance, over depths and seeds), :func:`copy_batch`
names the token ``offset`` places *back* (no wrapping), one target per offset, and
:func:`train_copy` trains a :class:`CopyModel` (embedding, a ``WindowedStack``, one
read-out per target) on it.

Floor 3 (a model): it builds on ``attention``, ``blocks`` and ``training``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_book import attention, blocks, training

__all__ = [
    "N_TOKENS",
    "LENGTH",
    "one_hot_inputs",
    "make_batch",
    "NeighbourModel",
    "loss_fn",
    "train_neighbours",
    "weight_at",
    "seed_table",
    "offset_lines",
    "input_gradient",
    "gradient_by_distance",
    "IGNORE",
    "copy_batch",
    "CopyModel",
    "copy_loss",
    "copy_accuracy",
    "train_copy",
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


def seed_table(
    runs: Sequence[tuple[NeighbourModel, list[float], list[float], Tensor]],
) -> tuple[Tensor, list[tuple[int, int]], list[str]]:
    """Read :func:`train_neighbours`' runs back, one per seed (for the default task,
    the token before and after): per seed the held-out accuracy of the two targets,
    the head that puts the most weight on i-1 and on i+1, and that weight.

    Returns ``best`` (seeds, 4): accuracy before, accuracy after, weight on i-1, weight
    on i+1; ``heads``: (head of i-1, head of i+1) per seed; and the table's lines."""
    if not runs:
        raise ValueError("runs must hold at least one run of train_neighbours")
    lines = ["seed | loss: first -> last | accuracy prev, next | weight on i-1, i+1 "
             "| heads"]  # fmt: skip
    best, heads = [], []
    for seed, (_, history, acc, w) in enumerate(runs):
        prev_w, next_w = weight_at(w, -1), weight_at(w, +1)  # (H,) each
        h_prev, h_next = prev_w.argmax().item(), next_w.argmax().item()
        best.append((acc[0], acc[1], prev_w[h_prev].item(), next_w[h_next].item()))
        heads.append((h_prev, h_next))
        lines.append(
            f"{seed:4d} | {history[0]:6.2f} -> {history[-1]:6.3f} | {acc[0]:8.1%} "
            f"{acc[1]:7.1%} | {best[-1][2]:12.2f} {best[-1][3]:5.2f} | {h_prev}, {h_next}"
        )
    return torch.tensor(best), heads, lines


def offset_lines(w: Tensor, offsets: Sequence[int]) -> list[str]:
    """One line per offset: each head's :func:`weight_at` that offset, to 2 decimals.
    Shapes: w (B, H, T, T)."""
    if w.dim() != 4:
        raise ValueError(f"w must have shape (B, H, T, T), got {tuple(w.shape)}")
    return [
        f"weight on i{offset:+d}, per head: {weight_at(w, offset).numpy().round(2)}"
        for offset in offsets
    ]


def input_gradient(
    windows: Sequence[int | None],
    T: int = 48,
    seed: int = 0,
    d_model: int = 16,
    n_heads: int = 2,
) -> Tensor:
    """|∂ output[T-1] / ∂ input[s]| for every input position s of a randomly
    initialised (``seed``) :class:`blocks.WindowedStack` of the pattern ``windows``,
    in float64 on random inputs: non-zero exactly where the last output can see.

    Shapes: -> (T,)."""
    torch.manual_seed(seed)  # the random weights and inputs
    stack = blocks.WindowedStack(windows, d_model=d_model, n_heads=n_heads).double()
    x = torch.randn(1, T, d_model, dtype=torch.float64, requires_grad=True)
    stack(x)[0, -1].sum().backward()
    return x.grad[0].norm(dim=-1)  # (T,)


def gradient_by_distance(
    window: int, depths: Sequence[int], seeds: Sequence[int], T: int = 48
) -> tuple[dict[tuple[int, int], Tensor], dict[int, list[float]]]:
    """:func:`input_gradient` of stacks of L windowed layers (``window`` keys each),
    for every L of ``depths`` and seed of ``seeds``, read by distance back from the
    last output: ``(L, seed) -> g`` with ``g[d]`` the gradient reaching input
    ``T - 1 - d``; and per L, the far edge's share of each seed, ``g[L (w - 1)] /
    g[0]`` (the field's farthest input against the output's own). Shapes: each g (T,).
    """
    if window < 2 or max(depths) * (window - 1) >= T:
        raise ValueError(
            f"window must be >= 2 and every field L(w-1)+1 within T={T}, got "
            f"window={window}, depths={list(depths)}"
        )
    back, edge = {}, {}
    for L in depths:
        for seed in seeds:
            g = input_gradient([window] * L, T, seed).flip(0)  # g[d]: d positions back
            back[L, seed] = g
            edge.setdefault(L, []).append((g[L * (window - 1)] / g[0]).item())
    return back, edge


IGNORE = -100  # the target of a position with nothing ``offset`` places back


def copy_batch(
    n: int,
    gen: torch.Generator,
    vocab_size: int,
    seq_len: int,
    offsets: Sequence[int] = (4, 16),
) -> tuple[Tensor, ...]:
    """Random token ids and, per offset, the token ``offset`` places back at every
    position (:data:`IGNORE` in the first ``offset`` positions, which have none).

    Shapes: -> ids (n, seq_len), then one target (n, seq_len) per offset."""
    ids = torch.randint(0, vocab_size, (n, seq_len), generator=gen)  # (n, T)
    targets = []
    for offset in offsets:
        y = torch.full_like(ids, IGNORE)
        y[:, offset:] = ids[:, :-offset]  # the token `offset` places back
        targets.append(y)
    return ids, *targets


class CopyModel(nn.Module):
    """Token embedding, a :class:`blocks.WindowedStack` of the pattern ``windows``
    (an int: a window of that many keys; ``None``: full causal attention), a LayerNorm
    and one linear read-out per target.

    Shapes: ids (B, T) -> logits (B, T, n_targets, vocab_size)."""

    def __init__(
        self,
        windows: Sequence[int | None],
        vocab_size: int,
        d_model: int,
        n_heads: int,
        n_targets: int = 2,
    ) -> None:
        super().__init__()
        self.vocab_size, self.n_targets = vocab_size, n_targets
        self.embed = nn.Embedding(vocab_size, d_model)
        self.stack = blocks.WindowedStack(windows, d_model, n_heads)
        self.norm = nn.LayerNorm(d_model)
        self.read_out = nn.Linear(d_model, n_targets * vocab_size)

    def forward(self, ids: Tensor) -> Tensor:
        h = self.norm(self.stack(self.embed(ids)))  # (B, T, d_model)
        logits = self.read_out(h)  # (B, T, n_targets * V)
        return logits.unflatten(-1, (self.n_targets, self.vocab_size))


def copy_loss(model: CopyModel, batch: Sequence[Tensor]) -> Tensor:
    """The summed cross-entropy of every target of a :func:`copy_batch` batch,
    positions without an answer (:data:`IGNORE`) left out."""
    logits = model(batch[0])  # (B, T, n_targets, V)
    return sum(
        F.cross_entropy(
            logits[:, :, h].flatten(0, 1), batch[1 + h].flatten(), ignore_index=IGNORE
        )
        for h in range(len(batch) - 1)
    )


@torch.no_grad()
def copy_accuracy(model: CopyModel, batch: Sequence[Tensor]) -> tuple[float, ...]:
    """Per target, the share of the positions with an answer that the model's first
    guess gets right, on a :func:`copy_batch` batch."""
    guess = model(batch[0]).argmax(dim=-1)  # (B, T, n_targets)
    accs = []
    for h, target in enumerate(batch[1:]):
        keep = target != IGNORE
        accs.append((guess[..., h][keep] == target[keep]).float().mean().item())
    return tuple(accs)


def train_copy(
    windows: Sequence[int | None],
    seed: int,
    batches: Sequence[Sequence[Tensor]],
    steps: int,
    lr: float,
    vocab_size: int,
    d_model: int,
    n_heads: int,
) -> CopyModel:
    """A :class:`CopyModel` of the pattern ``windows``, initialised from ``seed`` on
    the device of the batches, trained with :func:`copy_loss` for ``steps`` AdamW
    steps on ``batches`` (warm-up over 20 steps, cosine decay from ``lr``)."""
    torch.manual_seed(seed)  # the initial weights
    model = CopyModel(windows, vocab_size, d_model, n_heads).to(batches[0][0].device)
    training.train(model, batches, copy_loss, steps, lr=lr, warmup=20, decay="cosine")
    return model
