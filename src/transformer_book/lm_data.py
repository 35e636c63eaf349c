"""Data for a language model: one long stream of token ids, cut into windows whose
targets are the inputs shifted by one (chapters 09 and 14).

Next-token prediction needs no labels. A window of T + 1 consecutive tokens gives T
examples at once: the first T tokens are the input, the last T the targets, so position
t learns to predict token t + 1 from tokens 1 … t (the causal mask hides the rest)::

    stream   F  i  r  s  t     C  i  t  i  z  e  n
    x        F  i  r  s  t     C  i  t  i  z  e
    y           i  r  s  t     C  i  t  i  z  e  n

Training draws windows at random places in the training part of the stream
(:class:`WindowBatches`, as nanoGPT's ``get_batch``); evaluation reads the held-out part
once, in consecutive windows (:func:`sequential_windows`), so its loss is exact rather
than an estimate. With several processes (distributed data parallel, chapter 14) every
rank reads its own share of each batch: the batch of ``world_size · batch_size`` windows
is drawn from one seeded generator and rank r keeps windows ``r·b … (r+1)·b − 1``, so N
processes see exactly the batches one process with N times the batch would.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .vocab import Vocab

__all__ = [
    "char_vocab",
    "split_stream",
    "windows_at",
    "random_windows",
    "WindowBatches",
    "sequential_windows",
    "next_token_loss",
    "mean_loss",
]


def char_vocab(text: str) -> Vocab:
    """Every distinct character of ``text``, in sorted order (nanoGPT's ``stoi``); no
    padding or unknown token."""
    if not text:
        raise ValueError("text must be a non-empty string")
    return Vocab(sorted(set(text)), pad_token=None, unk_token=None)


def _to(t: Tensor, device: torch.device | str | None) -> Tensor:
    return t if device is None else t.to(device)


def _check_stream(source: Tensor, context: int) -> None:
    if source.dim() != 1 or source.dtype.is_floating_point:
        raise ValueError(
            f"source must be a 1-D tensor of token ids, got shape {tuple(source.shape)} "
            f"dtype {source.dtype}"
        )
    if int(context) != context or context < 1:
        raise ValueError(f"context must be a positive integer, got {context!r}")
    if len(source) < context + 1:
        raise ValueError(
            f"source holds {len(source)} tokens: too few for one window of context "
            f"{context} plus its shifted target ({context + 1} tokens)"
        )


def split_stream(ids: Tensor, train_fraction: float = 0.9) -> tuple[Tensor, Tensor]:
    """The first ``train_fraction`` of the stream to train on, the rest held out
    (nanoGPT's ``prepare.py`` keeps the first 90 % and the last 10 %).

    Shapes: (N,) -> (N_train,), (N - N_train,), with N_train = int(train_fraction · N).
    """
    if ids.dim() != 1:
        raise ValueError(f"ids must be a 1-D stream, got shape {tuple(ids.shape)}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    n_train = int(train_fraction * len(ids))
    return ids[:n_train], ids[n_train:]


def windows_at(source: Tensor, starts: Tensor, context: int) -> tuple[Tensor, Tensor]:
    """The windows of ``context + 1`` tokens that begin at ``starts``: inputs and
    targets shifted by one.

    Shapes: source (N,), starts (n,) -> x (n, context), y (n, context).
    """
    _check_stream(source, context)
    rows = source[starts[:, None] + torch.arange(context + 1)]  # (n, context + 1)
    return rows[:, :-1], rows[:, 1:]


def random_windows(
    source: Tensor, n: int, context: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """``n`` windows at uniformly random places. Shapes: x (n, context), y (n, context)."""
    _check_stream(source, context)
    starts = torch.randint(len(source) - context, (n,), generator=generator)  # (n,)
    return windows_at(source, starts, context)


class WindowBatches:
    """An endless, seeded stream of training batches of random windows; iterating starts
    the stream afresh, so the same seed gives the same batches.

    ``rank`` and ``world_size``: the share of every batch this process reads when
    ``world_size`` processes train together (data parallelism). The generator draws the
    starts of all ``world_size · batch_size`` windows; this rank builds only its own
    ``batch_size``. Shapes: each item (x, y), both (batch_size, context), on ``device``.
    """

    def __init__(
        self,
        source: Tensor,
        batch_size: int,
        context: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | str | None = None,
    ) -> None:
        _check_stream(source, context)
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(
                f"batch_size must be a positive integer, got {batch_size!r}"
            )
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(
                f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}"
            )
        self.source, self.batch_size, self.context = source, batch_size, context
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.device = device

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        generator = torch.Generator().manual_seed(self.seed)
        n_starts = len(self.source) - self.context
        mine = slice(self.rank * self.batch_size, (self.rank + 1) * self.batch_size)
        while True:
            starts = torch.randint(
                n_starts, (self.world_size * self.batch_size,), generator=generator
            )  # the whole batch, all ranks
            x, y = windows_at(self.source, starts[mine], self.context)  # this rank's
            yield _to(x, self.device), _to(y, self.device)


def sequential_windows(
    source: Tensor,
    context: int,
    batch_size: int,
    device: torch.device | str | None = None,
) -> list[tuple[Tensor, Tensor]]:
    """The whole stream once, in consecutive windows of ``context`` (each with its
    shifted targets), grouped into batches: evaluation reads every held-out token once.

    The tokens after the last full window are left out (fewer than ``context``).
    Shapes: batches of (x, y), each (≤ batch_size, context).
    """
    _check_stream(source, context)
    n = (len(source) - 1) // context  # windows that fit, each with its next token
    starts = torch.arange(n) * context  # (n,)
    x, y = windows_at(source, starts, context)  # (n, context) each
    return [
        (_to(xb, device), _to(yb, device))
        for xb, yb in zip(x.split(batch_size), y.split(batch_size))
    ]


def next_token_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy of the model's next-token logits against the shifted targets.

    Shapes: batch (x, y), both (B, T); ``model(x)`` -> logits (B, T, V); returns a
    scalar, in nats per token.
    """
    x, y = batch
    logits = model(x)  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())  # mean over B·T tokens


@torch.no_grad()
def mean_loss(model: nn.Module, batches: Iterable[tuple[Tensor, Tensor]]) -> float:
    """Next-token cross-entropy over every token of ``batches`` (nats per token), with
    the model in eval mode (no dropout); the model's mode is restored afterwards. The
    batches may live anywhere: each is moved to the model's device."""
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    total, count = 0.0, 0
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        logits = model(x)  # (B, T, V)
        total += F.cross_entropy(
            logits.flatten(0, 1), y.flatten(), reduction="sum"
        ).item()
        count += y.numel()
    model.train(was_training)
    if count == 0:
        raise ValueError("batches is empty: nothing to evaluate")
    return total / count
