"""Measuring speed and memory of a computation (chapters 01, 02, 08, 09).

Timings are medians over repeats after a warm-up. Two counts explain them (chapter 01):
:class:`CountTorchCalls`, the torch calls Python makes (each pays a fixed overhead), and
:func:`critical_path`, the longest chain of operations that must run one after another.
Memory comes in two measures: :func:`allocated_bytes`, the bytes a computation asks
for (on the CPU, every allocation summed, freed or not), and :func:`peak_bytes`, the
most tensor memory alive at any one moment, which is what decides whether a computation
fits (chapter 08: tiled attention allocates a tile per step, quadratic in total, but
holds only a few at once). Notebooks print and plot these numbers; tests never assert
wall-clock times. A benchmark too long for a chapter runs as a script in
``benchmarks/`` and commits its result; :func:`committed_result` reads it back.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

__all__ = [
    "median_time",
    "time_and_peak",
    "growth_exponents",
    "cost_table",
    "memory_device",
    "allocated_bytes",
    "peak_bytes",
    "CountTorchCalls",
    "critical_path",
    "committed_result",
    "machine",
    "provenance",
    "synchronize",
]

# where a committed result lives when no checkout holds it (Colab)
RESULTS_URL = (
    "https://raw.githubusercontent.com/transformers-step-by-step/"
    "transformers-step-by-step/main/benchmarks/results"
)


def synchronize(device: torch.device | str) -> None:
    """Wait for the device's queued kernels (GPU calls return before they finish);
    nothing to wait for on the CPU. Time GPU work between two of these."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


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
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = now()
        fn()
        synchronize(device)
        times.append(now() - start)
    return statistics.median(times)


def time_and_peak(
    fns: Mapping[str, Callable[..., object]],
    make_inputs: Callable[[Any], Sequence[object]],
    keys: Iterable[Any],
    device: torch.device | str = "cpu",
    repeats: int = 3,
    clock: str = "auto",
) -> dict[tuple[str, Any], tuple[float, int]]:
    """For every key (a sequence length, say) and every named function, without
    gradients: the median seconds (:func:`median_time`) and the peak bytes
    (:func:`peak_bytes`) of ``fn(*make_inputs(key))``; the inputs are built once
    per key. Returns ``{(name, key): (seconds, peak bytes)}``.

    The peak is measured on :func:`memory_device` (``device``), with the inputs'
    tensors copied there: on MPS, that is the CPU."""
    if not fns:
        raise ValueError("fns must name at least one function, got an empty mapping")
    device, on = torch.device(device), memory_device(device)
    cost: dict[tuple[str, Any], tuple[float, int]] = {}
    with torch.no_grad():
        for key in keys:
            inputs = make_inputs(key)
            there = inputs if on == device else [_to(x, on) for x in inputs]
            for name, fn in fns.items():
                run_it = lambda fn=fn, inputs=inputs: fn(*inputs)  # noqa: E731
                seconds = median_time(run_it, repeats, device=device, clock=clock)
                peak = peak_bytes(lambda fn=fn, there=there: fn(*there), on)
                cost[name, key] = (seconds, peak)
    return cost


def growth_exponents(
    cost: Mapping[tuple[str, Any], tuple[float, int]], n1: float, n2: float
) -> dict[str, tuple[float, float]]:
    """How each function's seconds and peak bytes in ``cost`` (as :func:`time_and_peak`
    returns it) grew from size ``n1`` to ``n2``, as the exponents x of n^x:
    name -> (x of the time, x of the peak)."""
    names = list(dict.fromkeys(name for name, _ in cost))
    missing = [(n, k) for n in names for k in (n1, n2) if (n, k) not in cost]
    if missing or n1 == n2 or min(n1, n2) <= 0:
        raise ValueError(
            f"n1 and n2 must be two different sizes measured for every function, "
            f"got {n1} and {n2} (missing: {missing})"
        )
    per_doubling = math.log2(n2 / n1)
    return {
        name: tuple(
            math.log2(cost[name, n2][i] / cost[name, n1][i]) / per_doubling
            for i in (0, 1)
        )
        for name in names
    }


def cost_table(
    cost: Mapping[tuple[str, Any], tuple[float, int]],
    keys: Sequence[Any],
    which: str = "peak",
    where: str = "",
) -> list[str]:
    """Lines of :func:`time_and_peak`'s ``cost``: one row per key (a length, say), one
    column per function, in milliseconds (``which="time"``) or MiB of peak memory
    (``which="peak"``); ``where`` (the device measured on) goes into the header."""
    if which not in ("time", "peak"):
        raise ValueError(f"which must be 'time' or 'peak', got {which!r}")
    i, scale, unit = (0, 1e3, "ms") if which == "time" else (1, 2**-20, "MiB")
    names = list(dict.fromkeys(name for name, _ in cost))
    header = " | ".join(f"{n:>17s}" for n in names)
    lines = [f"{'T':>6s} | {header}   ({which}, {unit}{', ' + where if where else ''})"]
    for key in keys:
        row = " | ".join(f"{cost[n, key][i] * scale:17.2f}" for n in names)
        lines.append(f"{key!s:>6s} | {row}")
    return lines


def memory_device(device: torch.device | str) -> torch.device:
    """Where :func:`peak_bytes` can measure a computation meant for ``device``: the
    device itself (CPU, CUDA), or the CPU for Apple's MPS, which keeps no peak counter.
    A chapter that measures memory says which device it measured on."""
    device = torch.device(device)
    return torch.device("cpu") if device.type == "mps" else device


def _to(x: object, device: torch.device) -> object:
    return x.to(device) if isinstance(x, torch.Tensor) else x


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


def _no_mps(device: torch.device) -> None:
    if device.type == "mps":  # the CPU profiler would count nothing, silently
        raise ValueError(
            "memory on Apple's MPS device cannot be measured here (torch.mps keeps no "
            "peak counter): measure the same computation on device='cpu' or 'cuda'"
        )


def allocated_bytes(
    fn: Callable[[], object], device: torch.device | str = "cpu"
) -> int:
    """Bytes of tensor memory ``fn()`` allocates while it runs.

    CPU: the sum of every allocation torch's profiler records (what the computation asks
    the allocator for, freed or not). CUDA: peak allocated memory above the starting level.
    """
    device = torch.device(device)
    _no_mps(device)
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
    _no_mps(device)
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


class CountTorchCalls(TorchFunctionMode):
    """Counts every torch function and tensor method called inside the ``with`` block
    (in ``calls``): each is one trip from Python into torch, with its fixed cost."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def critical_path(t: torch.Tensor) -> int:
    """Operations on the longest chain of autograd's graph that produced ``t``: the
    ones that must run one after another, whatever the hardware."""
    if t.grad_fn is None:
        raise ValueError(
            "t must come from operations autograd recorded (an input with "
            "requires_grad=True), got a tensor without grad_fn"
        )
    longest, todo = {}, [t.grad_fn]
    while todo:
        fn = todo[-1]
        inputs = [f for f, _ in fn.next_functions if f is not None]
        missing = [f for f in inputs if f not in longest]
        if missing:
            todo.extend(missing)
            continue
        todo.pop()
        longest[fn] = 1 + max((longest[f] for f in inputs), default=0)
    return longest[t.grad_fn]


def committed_result(name: str, start: str | Path | None = None) -> dict:
    """A benchmark result committed in the book's repository, ``benchmarks/results/``
    in ``start`` (default: the working directory) or a folder above it; fetched from
    the repository on GitHub where no checkout holds it (on Colab)."""
    if Path(name).name != name or not name.endswith(".json"):
        raise ValueError(f"name must be a file name ending in .json, got {name!r}")
    here = Path.cwd() if start is None else Path(start)
    for folder in (here, *here.parents):
        path = folder / "benchmarks" / "results" / name
        if path.is_file():
            return json.loads(path.read_text())
    with urllib.request.urlopen(f"{RESULTS_URL}/{name}") as f:  # noqa: S310
        return json.load(f)


# settings that send torch, MKL and oneDNN down another CPU code path on the same chip
CPU_PATH_SETTINGS = (
    "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA",
)  # fmt: skip


def machine() -> dict:
    """What a committed result says about the machine that measured it: the CPU's
    model name, its cores, the platform, the load average (None where unknown), the
    vector instructions torch's own kernels use (``cpu_capability``: "AVX512",
    "AVX2", "DEFAULT", ...) and which of ``CPU_PATH_SETTINGS`` were set, and to what
    (``cpu_path_settings``)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_path_settings": {
            k: os.environ[k] for k in CPU_PATH_SETTINGS if k in os.environ
        },
    }


def provenance(command: str) -> dict:
    """What a committed result records beside its numbers: the ``command`` that wrote
    it, the date (UTC), torch's version and :func:`machine`."""
    return {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "torch": torch.__version__,
        "machine": machine(),
    }
