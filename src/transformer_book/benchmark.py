"""Measuring speed and memory of a computation (chapters 01, 02, 08, 09).

Timings are medians over repeats after a warm-up. Memory comes in two measures:
:func:`allocated_bytes`, the bytes a computation asks for (on the CPU, every allocation
summed, freed or not), and :func:`peak_bytes`, the most tensor memory alive at any one
moment, which is what decides whether a computation fits (chapter 08: tiled attention
allocates a tile per step, quadratic in total, but holds only a few at once).
Notebooks print and plot these numbers; tests never assert wall-clock times.
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

__all__ = ["median_time", "allocated_bytes", "peak_bytes"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(
    fn: Callable[[], object],
    repeats: int = 5,
    warmup: int = 1,
    device: torch.device | str = "cpu",
    clock: str = "wall",
) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs, after ``warmup`` runs.

    ``clock="wall"`` times wall-clock seconds; ``"cpu"`` the CPU seconds of this process
    (all its threads together), which a busy machine inflates far less; ``"auto"`` is
    CPU time on a CPU device and wall-clock time on a GPU (whose work is not the
    process's CPU time). With one torch thread, CPU time equals the wall-clock time of
    an idle machine.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if clock not in ("wall", "cpu", "auto"):
        raise ValueError(f"clock must be 'wall', 'cpu' or 'auto', got {clock!r}")
    device = torch.device(device)
    if clock == "auto":
        clock = "cpu" if device.type == "cpu" else "wall"
    now = time.process_time if clock == "cpu" else time.perf_counter
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = now()
        fn()
        _sync(device)
        times.append(now() - start)
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


def peak_bytes(fn: Callable[[], object], device: torch.device | str = "cpu") -> int:
    """The peak of the tensor memory that ``fn()`` allocates and holds at one moment.

    CPU: torch's profiler records every allocation made while ``fn`` runs (+bytes) and
    every free of those allocations (-bytes) as a memory event; the running sum of the
    events in time order is the memory ``fn`` holds, and its maximum is the peak. (Frees
    of tensors that existed before ``fn`` do not lower the count below zero.) CUDA:
    ``torch.cuda.max_memory_allocated`` above the level at the start. The value ``fn``
    returns is alive at the end, so it is part of the peak.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        del result
        return max(0, torch.cuda.max_memory_allocated(device) - start)
    with (
        _quiet_stderr(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        result = fn()
    del result
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type().name == "CPU"
    )  # (time, +allocated or -freed bytes)
    alive = peak = 0
    for _, nbytes in events:
        # The profiler sometimes reports the free of a block allocated before fn ran
        # (when an earlier profiling session saw that address): with nothing of fn's
        # alive such a free cannot be fn's, so the count does not go below zero.
        alive = max(0, alive + nbytes)
        peak = max(peak, alive)
    return peak
