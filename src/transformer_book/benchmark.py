"""Measuring speed and memory of a computation (chapters 01, 02, 08, 09).

Timings are medians over repeats after a warm-up; memory is the number of bytes the
computation allocates (on the CPU, from torch's profiler; on a GPU, the peak of
torch's allocator). Notebooks print and plot these numbers; tests never assert
wall-clock times.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile

__all__ = ["median_time", "allocated_bytes"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(
    fn: Callable[[], object],
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str = "cpu",
) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeats`` runs, after ``warmup`` runs."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence file descriptor 2 (the profiler's C++ start/stop log lines) for the duration."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def allocated_bytes(
    fn: Callable[[], object], device: torch.device | str = "cpu"
) -> int:
    """Bytes of tensor memory ``fn()`` allocates while it runs.

    CPU: the sum of every allocation torch's profiler records (what the computation asks
    the allocator for, freed or not). CUDA: peak allocated memory above the starting level.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - start
    with (
        _quiet_stderr(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        fn()
    return sum(
        e.self_cpu_memory_usage for e in prof.events() if e.self_cpu_memory_usage > 0
    )
