"""Training on several processes at once (chapter 14): where this process sits among
them, joining the group that ``torchrun`` starts, and the mean of a number over them.

``torchrun`` starts one process per GPU and tells each its place in the environment
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``); :func:`init_distributed` reads it and joins
the process group. :func:`transformer_book.training.train` then wraps the model in
PyTorch's ``DistributedDataParallel`` (Li et al., 2020) and records
:func:`mean_over_processes` of the loss. Without ``torchrun`` all of this is one
process: rank 0 of a world of 1. Every process draws its own batches from
:func:`process_seed` (the BERT and T5 pre-training recipes use it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = [
    "Distributed",
    "init_distributed",
    "world",
    "process_seed",
    "mean_over_processes",
]


@dataclass(frozen=True)
class Distributed:
    """Where this process sits among the processes training together."""

    rank: int  # 0 … world_size - 1, over all machines
    local_rank: int  # on this machine: which GPU to use
    world_size: int  # processes in all

    @property
    def is_main(self) -> bool:
        """Rank 0 logs and writes checkpoints."""
        return self.rank == 0


def init_distributed(backend: str | None = None) -> Distributed:
    """Join the process group that ``torchrun`` describes in the environment
    (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``).

    Without ``torchrun`` (no ``WORLD_SIZE``, or 1) this is a single process and nothing
    is initialised. ``backend``: ``"nccl"`` when CUDA is available, else ``"gloo"``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world_size > 1 and not dist.is_initialized():
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend)
    return Distributed(rank=rank, local_rank=local_rank, world_size=world_size)


def world() -> tuple[int, int]:
    """(rank, world size) of the process group, (0, 1) when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def process_seed(seed: int) -> int:
    """The seed of this process's batches: ``seed`` itself on one process (so a run
    under ``torchrun`` draws on rank 0 what a single process draws), ``seed + rank``
    on the others, so that no two processes train on the same batches."""
    return seed + world()[0]


def mean_over_processes(loss: Tensor, world_size: int) -> float:
    """The mean of ``loss`` over the ``world_size`` processes training together (each
    process's own loss when there is one), as a float."""
    loss = loss.detach()
    if world_size > 1:
        loss = loss.clone()
        dist.all_reduce(loss)  # sum over the processes (gloo has no AVG)
        loss /= world_size
    return loss.item()
