"""How fast a decoder with a KV cache runs (chapter 09): the decoding steps timed one by
one, with the cache and without; one cached step after a given number of cached
positions; one call of a small operation with torch's oneDNN kernels and with its
own; ``benchmarks/kv_cache_speed.py``'s committed result read back by name; and
what a step's rate of reading its weights says about where its time goes.

The cache itself, and its size in bytes, is :mod:`transformer_book.kv_cache`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from . import benchmark
from .kv_cache import new_cache

__all__ = [
    "decode_step_times",
    "cached_step_seconds",
    "onednn_call_seconds",
    "SpeedSummary",
    "speed_benchmark_summary",
    "weights_rate_reading",
]


def decode_step_times(model, n_new: int, use_cache: bool, batch: int = 1) -> Tensor:
    """Seconds of each of ``n_new`` steps of greedy decoding by a
    :class:`transformer_book.gpt.GPT` from a one-token prompt (token 0), for ``batch``
    sequences, with a cache or re-reading every token. On a CPU the clock is this
    process's CPU time; on a GPU the wall clock, after waiting for the kernels.
    Returns: (n_new,) seconds.
    """
    device = model.lm_head.weight.device
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
    cache = new_cache(model.config.n_layers, n_new) if use_cache else None
    times = []
    with torch.no_grad():
        for _ in range(n_new):
            benchmark.synchronize(device)
            start = clock()
            step_in = ids[:, -1:] if use_cache and ids.shape[1] > 1 else ids
            logits = model(step_in, cache=cache)
            ids = torch.cat((ids, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
            benchmark.synchronize(device)
            times.append(clock() - start)
    return torch.tensor(times)


def cached_step_seconds(
    model, batch: int, n_cached: int = 128, repeats: int = 9
) -> float:
    """Median seconds of one cached decoding step of a
    :class:`transformer_book.gpt.GPT` for ``batch`` sequences, after ``n_cached``
    positions of random keys and values (B, H, n_cached, Dh) in every layer: a
    step's time does not depend on their values. Each timed call appends one position;
    the clock is :func:`transformer_book.benchmark.median_time`'s ``"auto"``.
    """
    config = model.config
    device = model.lm_head.weight.device
    cache = new_cache(config.n_layers, max_len=2 * n_cached)  # room for the calls
    shape = (2, batch, config.n_heads, n_cached, config.d_model // config.n_heads)
    for layer in cache:
        layer.update(*torch.randn(shape, device=device).unbind(0))
    tokens = torch.zeros(batch, 1, dtype=torch.long, device=device)
    with torch.no_grad():
        step = lambda: model(tokens, cache=cache)  # noqa: E731 - +1 position per call
        return benchmark.median_time(step, repeats=repeats, device=device, clock="auto")


def onednn_call_seconds(
    fn: Callable[[], object],
    calls: int = 2000,
    repeats: int = 5,
    threads: int | None = None,
    sweep_bytes: int = 0,
) -> dict[str, float]:
    """Wall-clock seconds of one call of ``fn`` (an operation on CPU tensors) with
    torch's oneDNN kernels switched on, ``"oneDNN"``, and off, ``"torch"`` (as
    :func:`transformer_book.runtime.native_cpu_kernels` switches them off): the median
    call of ``repeats`` turns of ``calls`` calls each, every call timed on its own,
    after a warm-up turn. The two take turns, and who goes first alternates from turn
    to turn. ``sweep_bytes``: before every call, untimed, read a float32 buffer of that
    many bytes (its sum), as a decoding step streams a layer's weights between two
    calls of one operation. Reading the same buffer each time, it evicts what the
    core's own caches (L1 data, L2) held, and a shared L3 only where the buffer is
    larger than it; 0: the call finds its data where the last call left them.
    ``threads``: torch's CPU threads for the measurement (None: as they are). The
    switch and the threads are set back afterwards. Where torch has no oneDNN
    (``torch.backends.mkldnn.is_available()`` is False) or sends ``fn`` to none of
    its kernels, the two time the same kernel. The clock is the wall clock: with
    several threads the CPU time of a oneDNN call counts the others too (twice its
    wall-clock time for a one-token GELU on two threads).
    """
    if calls < 1 or repeats < 1:
        raise ValueError(f"calls and repeats must be >= 1, got {calls}, {repeats}")
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be >= 1 or None, got {threads}")
    if sweep_bytes < 0:
        raise ValueError(f"sweep_bytes must be >= 0, got {sweep_bytes}")
    sweep = torch.ones(sweep_bytes // 4) if sweep_bytes else None  # float32: 4 bytes
    before = torch.get_num_threads(), torch.backends.mkldnn.enabled
    times: dict[str, list[float]] = {"oneDNN": [], "torch": []}
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        for turn in range(repeats + 1):  # turn 0 warms both up
            order = ("oneDNN", "torch") if turn % 2 == 0 else ("torch", "oneDNN")
            for name in order:
                torch.backends.mkldnn.enabled = name == "oneDNN"
                for _ in range(calls):
                    if sweep is not None:
                        sweep.sum()  # the caches now hold the sweep's bytes
                    start = time.perf_counter()
                    fn()
                    if turn > 0:
                        times[name].append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(before[0])
        torch.backends.mkldnn.enabled = before[1]
    return {name: statistics.median(t) for name, t in times.items()}


class SpeedSummary(NamedTuple):
    """:func:`speed_benchmark_summary`'s numbers by name, their formats, their text."""

    values: dict[str, float]
    formats: dict[str, str]
    text: str


def speed_benchmark_summary(result: dict) -> SpeedSummary:
    """The numbers chapter 09 quotes of ``benchmarks/kv_cache_speed.py``'s result (as
    ``benchmark.committed_result`` reads it): medians over the rounds (wall clock) of
    the cache's speed-up (``bench_*``, with its range), the reference decoder's
    (``ref_*``), the floor (``floor_s``), uncached / floor (``ceiling``), cached / floor
    (``over_floor``, and its inverse ``floor_share``), the bare decoder's seconds and
    speed-up (``bare_s``, ``bare_speedup``) and the share of the cached run it does not
    need (``structure_share``, with its range over the rounds, ``structure_min`` and
    ``structure_max``), the cached run with oneDNN kept for one token (its speed-up
    ``onednn_speedup``, and the share of that run's time that torch's own kernels
    save, 1 - cached / oneDNN kept, ``onednn_saving``, with ``onednn_saving_min``
    and ``onednn_saving_max`` over the rounds), the load before; from the
    step-by-step pass, the last uncached step in ms and the sum of the cached
    ones."""
    needed = (
        "seconds", "speedup", "rounds", "step_seconds", "reference", "floor", "bare",
        "onednn",
    )  # fmt: skip
    missing = [k for k in (*needed, "load_average") if k not in result]
    if missing:
        raise ValueError(f"result lacks {missing}: not a kv_cache_speed.py result")
    secs, up = result["seconds"], result["speedup"]["wall"]
    ref, floor, bare = result["reference"], result["floor"], result["bare"]
    onednn = result["onednn"]
    ref_up = ref["speedup"]
    # (n_new,) per mode, in ms: the float32 arithmetic the chapter's plot reads
    steps_ms = {m: 1e3 * torch.tensor(result["step_seconds"][m]) for m in secs}
    values = {
        "bench_speedup": up["median"],
        "bench_min": up["min"],
        "bench_max": up["max"],
        "bench_load": result["load_average"]["before"][0],
        "last_plain_ms": steps_ms["uncached"][-1].item(),
        "all_cached_s": steps_ms["cached"].sum().item() / 1e3,
        "ref_speedup": ref_up["median"],
        "ref_cached": ref["seconds"]["cached"]["wall"]["median"],
        "bench_cached": secs["cached"]["wall"]["median"],
        "floor_s": floor["seconds"]["wall"]["median"],
        "ceiling": floor["ceiling"]["median"],
        "over_floor": floor["cached_over_floor"]["median"],
        "floor_share": 1 / floor["cached_over_floor"]["median"],
        "bare_s": bare["seconds"]["wall"]["median"],
        "bare_speedup": bare["speedup"]["median"],
        "structure_share": bare["structure_share"]["median"],
        "structure_min": bare["structure_share"]["min"],
        "structure_max": bare["structure_share"]["max"],
        "onednn_speedup": onednn["speedup"]["median"],
        "onednn_saving": onednn["saving"]["median"],
        "onednn_saving_min": onednn["saving"]["min"],
        "onednn_saving_max": onednn["saving"]["max"],
    }
    seconds = ("all_cached_s", "ref_cached", "bench_cached", "floor_s", "bare_s")
    formats = dict.fromkeys(values, "{:.1f}") | dict.fromkeys(seconds, "{:.2f}")
    formats.update(last_plain_ms="{:.0f}", floor_share="{:.0%}")
    formats.update(dict.fromkeys(("structure_share", "structure_min"), "{:.0%}"))
    formats.update(structure_max="{:.0%}")
    shares = ("onednn_saving", "onednn_saving_min", "onednn_saving_max")
    formats.update(dict.fromkeys(shares, "{:.0%}"))
    lines = []
    for mode in ("cached", "uncached"):
        s = secs[mode]["wall"]
        lines.append(
            f"{mode:>8}: {s['median']:5.2f} s (min {s['min']:.2f}, max {s['max']:.2f})"
        )
    rounds = len(result["rounds"]["speedup"]["wall"])
    load = result["load_average"]
    ref_s = {m: ref["seconds"][m]["wall"]["median"] for m in ("cached", "uncached")}
    lines += [
        f"speed-up over {rounds} rounds: median {up['median']:.1f}x "
        f"(min {up['min']:.1f}x, max {up['max']:.1f}x)",
        f"load average {load['before'][0]:.1f} before, {load['after'][0]:.1f} after",
        f"reference decoder (transformers {ref['transformers']} GPT-2, same shape): "
        f"cached {ref_s['cached']:.2f} s, uncached {ref_s['uncached']:.2f} s",
        f"its speed-up: median {ref_up['median']:.1f}x "
        f"(min {ref_up['min']:.1f}x, max {ref_up['max']:.1f}x)",
        f"the floor: {values['floor_s']:.2f} s for the same tokens; uncached / floor "
        f"{values['ceiling']:.1f}x, cached / floor {values['over_floor']:.2f}x",
        f"the same operations bare (no modules, checks or cache object): "
        f"{values['bare_s']:.2f} s, speed-up {values['bare_speedup']:.1f}x; the "
        f"package's structure is {values['structure_share']:.0%} of the cached run",
        f"oneDNN kept for one token: speed-up {values['onednn_speedup']:.1f}x; "
        f"torch's own kernels save {values['onednn_saving']:.0%} of that run's time",
    ]
    return SpeedSummary(values, formats, "\n".join(lines))


def weights_rate_reading(step_rate: float, read_rate: float) -> str:
    """What a decoding step's rate of reading its weights (``step_rate``, GB/s) says
    against one pass over a large tensor (``read_rate``): faster, they came from a
    cache; else the share of the step they fill at that rate, most (> 80 %) or part."""
    for name, rate in (("step_rate", step_rate), ("read_rate", read_rate)):
        if not rate > 0:
            raise ValueError(f"{name} must be a positive rate in GB/s, got {rate}")
    share = step_rate / read_rate  # of the step: its weights read at the pass's rate
    if share > 1:
        return (
            "the step read its weights faster than that pass, so they came from a cache"
        )
    waits = (
        "most of what this small model's step waits on"
        if share > 0.8
        else "part of what this small model's step waits on, the per-operation costs "
        "of section 5 the rest"
    )
    fill = f"reading the weights at that pass's rate would fill {share:.0%} of the step"
    return f"{fill}, so bytes are {waits}"
