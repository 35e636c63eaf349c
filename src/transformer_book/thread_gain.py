"""What more threads buy a layer (chapter 01): wall-clock timings with one thread and
with many, taken in turns round after round, and the verdict they support.

On a shared machine the load changes while a measurement runs, so
:func:`timing_rounds` times every function with every thread count in one round, then
the next round, and so on: a change of load hits all of them. The first function is
the probe: in a round where it took more than ``busy_factor`` times its one-thread
time with more threads, the cores are busy, and the other functions are left out of
that round (NaN), since a sequential layer whose every small step waits for every
thread could take many times longer. :func:`gains` turns the times into speed-ups
(time on one thread over time on many), :func:`verdict` into a sentence that says only
what the rounds support.

Floor 1 (a tool): it builds on ``benchmark``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor

from . import benchmark

__all__ = ["timing_rounds", "gains", "verdict"]


def timing_rounds(
    fns: Mapping[str, Callable[[], object]],
    threads: Sequence[int],
    rounds: int,
    device: torch.device | str = "cpu",
    busy_factor: float = 1.5,
) -> dict[tuple[str, int], Tensor]:
    """Wall-clock seconds of every function (a median of 3 runs after 1 warm-up,
    :func:`benchmark.median_time`) with every thread count, ``rounds`` times in turn.
    The first function of ``fns`` is the probe (see the module); the others get NaN in
    a round where it found the cores busy. torch is left on one thread.

    Returns ``{(name, threads): (rounds,) seconds}``."""
    if not threads or threads[0] != 1:
        raise ValueError(f"threads must start with 1, got {list(threads)}")
    names = list(fns)
    times: dict[tuple[str, int], list[float]] = {
        (k, n): [] for k in names for n in threads
    }

    def wall(fn: Callable[[], object]) -> float:
        return benchmark.median_time(fn, 3, 1, device, "wall")

    probe = names[0]
    for _ in range(rounds):  # the arms take turns: a change of load hits them all
        for n in threads:
            torch.set_num_threads(n)
            times[probe, n].append(wall(fns[probe]))
            busy = n > 1 and times[probe, n][-1] > busy_factor * times[probe, 1][-1]
            for k in names[1:]:  # busy cores: not timed in this round
                times[k, n].append(float("nan") if busy else wall(fns[k]))
    torch.set_num_threads(1)
    return {k: torch.tensor(v) for k, v in times.items()}


def gains(times: Mapping[tuple[str, int], Tensor], many: int) -> dict[str, Tensor]:
    """Per function, the speed-up of every round: its time on one thread over its time
    on ``many`` threads (NaN where a round left it out). Shapes: -> {name: (rounds,)}."""
    names = dict.fromkeys(k for k, _ in times)
    return {k: times[k, 1] / times[k, many] for k in names}


def verdict(gain: Mapping[str, Tensor], many: int) -> str:
    """What the rounds of :func:`gains` say, for a parallel layer (``"attention"``,
    the probe) and a sequential one (``"GRU"``): a gain within 10 % of 1 is no
    speed-up, and one layer gains more only if it did in every round that timed both."""
    if many == 1:
        return "This run had one thread only, so it could not compare."
    both = ~gain["GRU"].isnan()  # the rounds that timed both layers
    g = gain["attention"].median().item()
    att = (
        f"ran {g:.2f} times as fast as"
        if g >= 1
        else f"took {1 / g:.1f} times as long as"
    )
    if not both.any():  # the GRU was left out of every round
        return (
            f"With {many} threads, attention's forward pass {att} with one thread "
            "(median of the rounds). The machine was busy with other work "
            "(the load average is printed), so the threads waited for cores, and the "
            "cell left the GRU out, whose steps would each have waited. This comparison "
            "needs idle cores; run the cell on a quiet machine."
        )
    g_att, g_gru = gain["attention"][both], gain["GRU"][both]
    m_att, m_gru = g_att.median().item(), g_gru.median().item()
    wins = int((g_att > g_gru).sum())
    rounds_said = f"medians of {len(g_att)} rounds that timed both, which take turns"

    def sped(g: float) -> bool:  # a gain within 10 % of 1 is no speed-up
        return g > 1.1

    def said(g: float) -> str:
        return f"{g:.2f}×" + (" (slower)" if g < 0.95 else "")

    if not sped(m_att) and not sped(m_gru):
        return (
            f"Neither layer ran faster with {many} threads than with one "
            f"({rounds_said}): attention {said(m_att)}, the GRU {said(m_gru)}. "
            "This run shows no speed-up from threads"
            + (
                "; the extra threads cost the GRU's T small steps more than "
                "attention's products, in every round."
                if wins == len(g_att) and m_gru < m_att
                else "."
            )
        )
    if not sped(m_att):
        return (
            f"With {many} threads the GRU ran {said(m_gru)} as fast as with one "
            f"thread, attention {said(m_att)} ({rounds_said}): this run does not show "
            "attention gaining more from the extra threads."
        )
    return (
        f"With {many} threads, attention's forward pass ran {m_att:.2f} times as "
        f"fast as with one thread, the GRU's {said(m_gru)} ({rounds_said}): "
        + (
            "attention gained more from the extra threads in every round."
            if wins == len(g_att)
            else f"attention gained more in {wins} of those rounds, so this run "
            "does not separate them (a busy machine can hide the difference)."
        )
    )
