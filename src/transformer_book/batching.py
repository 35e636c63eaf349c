"""Batches of sequences of similar length, so that padding wastes little work.

A batch of variable-length sequences is padded to its longest member. Drawn at random,
a batch of ATIS queries is mostly padding; grouped by length, hardly any. Chapters 05,
06, 07 and 12 batch this way: :class:`LengthBatches` draws the index batches,
:class:`PaddedBatches` turns them into (inputs, targets) tensors cut to each batch's
longest row, :func:`sorted_batches` serves evaluation in a fixed order with the indices
to put predictions back in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor

__all__ = [
    "LengthBatches",
    "PaddedBatches",
    "sorted_batches",
    "padding_share",
    "pad_sequences",
]


class LengthBatches:
    """Index batches of items of similar length, in random order, one epoch per iteration.

    Each epoch shuffles the items, sorts them by length (stably, so equal lengths stay
    in random order), cuts the sorted list into batches of ``batch_size`` and yields the
    batches in random order. Shapes: lengths (N,) -> each batch a (b,) index tensor,
    b <= batch_size. With ``shuffle=False`` the order is fixed (for evaluation).
    """

    def __init__(
        self, lengths: Tensor, batch_size: int, seed: int = 0, shuffle: bool = True
    ) -> None:
        lengths = torch.as_tensor(lengths)
        if lengths.dim() != 1 or lengths.dtype.is_floating_point or len(lengths) == 0:
            raise ValueError(
                "lengths must be a non-empty 1-D integer tensor, got shape "
                f"{tuple(lengths.shape)} dtype {lengths.dtype}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lengths, self.batch_size, self.shuffle = lengths, batch_size, shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self) -> Iterator[Tensor]:
        n = len(self.lengths)
        if not self.shuffle:
            order = self.lengths.argsort(stable=True)
            yield from order.split(self.batch_size)
            return
        order = torch.randperm(n, generator=self.generator)
        order = order[self.lengths[order].argsort(stable=True)]  # by length
        chunks = order.split(self.batch_size)
        for j in torch.randperm(len(chunks), generator=self.generator).tolist():
            yield chunks[j]


def _check_rows(ids: Tensor, lengths: Tensor) -> None:
    if ids.dim() != 2 or lengths.shape != (ids.shape[0],):
        raise ValueError(
            "ids must be (N, T_max) and lengths (N,), got "
            f"{tuple(ids.shape)} and {tuple(lengths.shape)}"
        )


class PaddedBatches:
    """Training batches (x, y) of right-padded rows of similar length, each cut to its
    longest row; one shuffled epoch per iteration (``training.train`` cycles it).

    ``targets`` holds one label per token, (N, T_max), cut like ``ids``, or one per row,
    (N,). ``augment(x, generator)`` changes every input batch (word dropout, say) with
    a generator seeded from ``seed`` that runs on across epochs. Batches are CPU tensors;
    the training loop moves them. Shapes: ids (N, T_max), lengths (N,) -> x (b, T),
    y (b, T) or (b,), b <= batch_size, T = the longest length in the batch.
    """

    def __init__(
        self,
        ids: Tensor,
        lengths: Tensor,
        targets: Tensor,
        batch_size: int,
        seed: int = 0,
        shuffle: bool = True,
        augment: Callable[[Tensor, torch.Generator], Tensor] | None = None,
    ) -> None:
        _check_rows(ids, lengths)
        if targets.shape[0] != ids.shape[0] or targets.dim() not in (1, 2):
            raise ValueError(
                f"targets must be ({ids.shape[0]},) or ({ids.shape[0]}, T_max), got "
                f"{tuple(targets.shape)}"
            )
        self.ids, self.lengths, self.targets, self.augment = (
            ids,
            lengths,
            targets,
            augment,
        )
        self.order = LengthBatches(lengths, batch_size, seed=seed, shuffle=shuffle)
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        for idx in self.order:  # (b,)
            T = int(self.lengths[idx].max())  # pad only to this batch's longest row
            x = self.ids[idx, :T]  # (b, T)
            if self.augment is not None:
                x = self.augment(x, self.generator)
            y = self.targets[idx, :T] if self.targets.dim() == 2 else self.targets[idx]
            yield x, y


def sorted_batches(
    ids: Tensor, lengths: Tensor, batch_size: int
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Evaluation batches in a fixed order, rows of similar length together, each cut to
    its longest row, with the rows' indices (to put predictions back in place).

    Shapes: ids (N, T_max), lengths (N,) -> (idx (b,), x (b, T), lengths (b,)).
    """
    _check_rows(ids, lengths)
    for idx in LengthBatches(lengths, batch_size, shuffle=False):
        yield idx, ids[idx, : int(lengths[idx].max())], lengths[idx]


def padding_share(lengths: Tensor, index_batches: Sequence[Tensor]) -> float:
    """The fraction of the positions of the padded batches that are padding.

    Shapes: lengths (N,), each index batch (b,).
    """
    real = sum(int(lengths[idx].sum()) for idx in index_batches)
    padded = sum(len(idx) * int(lengths[idx].max()) for idx in index_batches)
    if padded == 0:
        raise ValueError("index_batches is empty: no positions to share out")
    return 1 - real / padded


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Stack lists of ids into one tensor padded with ``pad_id`` on the right.

    Shapes: N sequences -> ids (N, T_max), lengths (N,).
    """
    if len(seqs) == 0:
        raise ValueError("pad_sequences needs at least one sequence")
    lengths = torch.tensor([len(s) for s in seqs])
    out = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(list(s), dtype=torch.long)
    return out, lengths
