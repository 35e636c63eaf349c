"""What the three families cost (chapter 10, sections 3 and 4), as tables and figures:
the share of each model's parameters in its embeddings, and the memory a model needs
before a single activation is stored (fp16 weights, Adam's mixed-precision training
state, one sequence's KV cache). The counts come from :mod:`params`, the cache's bytes
from :func:`kv_cache.kv_cache_bytes`; this module only puts them side by side."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from . import params, plotting

__all__ = ["GIB", "memory_gib", "memory_table", "plot_shares", "plot_memory"]

GIB = 2**30
MEMORY = ("fp16 weights", "Adam training state", "KV cache, one sequence")


def memory_gib(
    counts: dict[str, int], kv_bytes: dict[str, int]
) -> dict[str, tuple[float, float, float]]:
    """Per model of ``counts`` (name -> parameters): its fp16 weights (2 bytes a
    parameter), its training state with Adam in mixed precision
    (:func:`params.adam_memory_bytes`, 16 bytes a parameter) and its KV cache of one
    sequence (``kv_bytes``, NaN for a model not in it), all in GiB."""
    if not counts:
        raise ValueError("counts must name at least one model, got none")
    return {
        name: (2 * n / GIB, sum(params.adam_memory_bytes(n).values()) / GIB,
               kv_bytes.get(name, math.nan) / GIB)
        for name, n in counts.items()
    }  # fmt: skip


def memory_table(memory: dict[str, tuple[float, float, float]]) -> str:
    """:func:`memory_gib`'s rows as a table to print, "(none)" for no KV cache."""
    lines = [f"{'':12} {'fp16 weights':>13} {'Adam training':>14} "
             f"{'KV cache/seq':>13}   (GiB)"]  # fmt: skip
    for name, (weights, adam, cache) in memory.items():
        cache = f"{'(none)':>13}" if math.isnan(cache) else f"{cache:13.3f}"
        lines.append(f"{name:12} {weights:13.2f} {adam:14.1f} {cache}")
    return "\n".join(lines)


def plot_shares(shares: dict[str, float], totals: dict[str, int]) -> Figure:
    """One horizontal bar per model, split into its embeddings' share of the
    parameters (``shares``, fractions) and the rest, its size (``totals``) written at
    the right."""
    if set(shares) != set(totals):
        raise ValueError(
            f"shares and totals must name the same models, got {sorted(shares)} "
            f"and {sorted(totals)}"
        )
    fig, ax = plt.subplots(figsize=plotting.SINGLE)
    left = [100 * s for s in shares.values()]
    ax.barh(list(shares), left, label="embeddings")
    blocks = [100 - x for x in left]
    ax.barh(list(shares), blocks, left=left, label="blocks (and pooler, norms)")
    for i, n in enumerate(shares):
        total = totals[n]
        size = f"{total / 1e9:.1f} B" if total > 1e9 else f"{total / 1e6:.0f} M"
        ax.text(101, i, size, va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set(xlabel="share of the parameters (%)", xlim=(0, 116),
           title="Embeddings matter in small models, vanish in large ones")  # fmt: skip
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=9)
    return fig


def plot_memory(
    memory: dict[str, tuple[float, float, float]], accelerator_gib: float = 80
) -> Figure:
    """:func:`memory_gib`'s three amounts per model as grouped bars on a log axis, with
    one accelerator's memory (``accelerator_gib``) as a dotted line."""
    fig, ax = plt.subplots(figsize=plotting.SINGLE)
    xs = torch.arange(len(memory)).float()
    for i, label in enumerate(MEMORY):
        ax.bar(xs + 0.27 * (i - 1), [m[i] for m in memory.values()], 0.27, label=label)
    ax.axhline(accelerator_gib, color="k", ls=":",
               label=f"{accelerator_gib:g} GiB (one large accelerator)")  # fmt: skip
    ax.set_xticks(xs, list(memory))
    ax.set(yscale="log", ylabel="GiB")
    ax.set_title("Memory before activations: weights, optimizer, cache")
    ax.legend(fontsize=8, loc="upper left")
    return fig
