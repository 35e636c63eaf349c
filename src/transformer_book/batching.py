"""Batches of sequences of similar length, so that padding wastes little work.

A batch of variable-length sequences is padded to its longest member. Drawn at random,
a batch of ATIS queries is mostly padding; grouped by length, hardly any. Chapters 05,
07 and 12 batch this way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

__all__ = ["LengthBatches", "pad_sequences"]


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
