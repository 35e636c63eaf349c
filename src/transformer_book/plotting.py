"""The book's look and the plots it draws again and again: attention maps and curves.

:func:`use_book_style` is the one place the book's figures get their look: a
colour-blind-safe palette (Okabe and Ito's eight colours), font sizes that read at
the page's width, and three figure sizes (``SINGLE``, ``WIDE``, ``SQUARE``).
:func:`transformer_book.runtime.setup` applies it, so every chapter looks the same.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor

__all__ = [
    "PALETTE",
    "SINGLE",
    "SQUARE",
    "WIDE",
    "attention_map",
    "attention_maps",
    "book_style",
    "curves",
    "heatmap",
    "kept_distributions",
    "pretraining_curves",
    "seed_bands",
    "seed_dots",
    "spread_bars",
    "trailing_mean",
    "training_curve",
    "use_book_style",
]

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common
# colour-vision deficiency. Black comes last: it is for reference lines.
PALETTE = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
SINGLE = (6.0, 3.6)  # one plot across the text column
WIDE = (10.0, 3.6)  # two or three panels side by side
SQUARE = (4.8, 4.2)  # one heatmap


def book_style() -> dict:
    """The matplotlib rc settings of every figure in the book."""
    from cycler import cycler

    return {
        "axes.prop_cycle": cycler(color=PALETTE),
        "figure.figsize": SINGLE,
        "figure.dpi": 100,
        "savefig.dpi": 100,
        "font.size": 11,
        "axes.titlesize": 12,
        "axes.labelsize": 11,
        "xtick.labelsize": 10,
        "ytick.labelsize": 10,
        "legend.fontsize": 10,
        "legend.frameon": False,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "lines.linewidth": 2.0,
        "lines.markersize": 6,
        "image.cmap": "viridis",
    }


def use_book_style() -> None:
    """Apply :func:`book_style` to matplotlib (globally, for the rest of the session)."""
    plt.rcParams.update(book_style())


def attention_map(
    weights: Tensor,
    tokens: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    ax: plt.Axes | None = None,
    title: str = "attention weights",
) -> plt.Axes:
    """Heatmap of one (Tq, Tk) weight matrix: row i shows where query i looks."""
    if weights.dim() != 2:
        raise ValueError(
            f"weights must have shape (Tq, Tk), got {tuple(weights.shape)}"
        )
    ax = ax or plt.gca()
    im = ax.imshow(weights.detach().float().cpu(), cmap="viridis", vmin=0.0)
    ax.grid(False)  # the book style draws grid lines; not over a heatmap
    keys = tokens if keys is None else keys
    if tokens is not None:
        ax.set_yticks(range(len(tokens)), tokens)
    if keys is not None:
        ax.set_xticks(range(len(keys)), keys, rotation=60, ha="right")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    plt.colorbar(im, ax=ax, fraction=0.046)
    return ax


def attention_maps(
    weights: Tensor, tokens: Sequence[str] | None = None, title: str = "head"
) -> plt.Figure:
    """One heatmap per head of an (H, Tq, Tk) weight tensor, side by side."""
    if weights.dim() != 3:
        raise ValueError(
            f"weights must have shape (H, Tq, Tk), got {tuple(weights.shape)}"
        )
    n = weights.shape[0]
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.2), squeeze=False)
    for h, ax in enumerate(axes[0]):
        attention_map(weights[h], tokens, ax=ax, title=f"{title} {h}")
        if h:
            ax.set_ylabel("")
    fig.tight_layout()
    return fig


def curves(
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    *,
    styles: Sequence[str] = ("o-", "s-", "^-", "D-", "v-", "x-"),
    xscale: str = "linear",
    yscale: str = "linear",
    xticks: Sequence[float] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    legend: bool = True,
) -> plt.Axes:
    """One line per entry of ``ys`` (label -> values at ``x``), in ``styles`` order.

    On a log x axis the ticks sit at ``xticks`` (default: every ``x``), labelled with
    their values and without minor ticks: measured lengths and widths read as numbers.
    """
    if not ys:
        raise ValueError("ys must hold at least one curve, got an empty mapping")
    for label, y in ys.items():
        if len(y) != len(x):
            raise ValueError(
                f"curve {label!r} has {len(y)} values for {len(x)} x positions"
            )
    ax = ax or plt.gca()
    for (label, y), style in zip(ys.items(), list(styles) * len(ys)):
        ax.plot(x, y, style, label=label)
    ax.set(xscale=xscale, yscale=yscale, xlabel=xlabel, ylabel=ylabel, title=title)
    if xscale == "log":
        ticks = list(x if xticks is None else xticks)
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    if legend:
        ax.legend()
    return ax


def heatmap(
    values: Tensor,
    ax: plt.Axes | None = None,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    **imshow: object,
) -> plt.Axes:
    """A (rows, columns) matrix as an image with a colour bar, without grid lines;
    ``imshow`` goes to matplotlib's ``imshow`` (``cmap``, ``vmin``, ``aspect``, ...)."""
    if values.dim() != 2:
        raise ValueError(
            f"values must have shape (rows, columns), got {tuple(values.shape)}"
        )
    ax = ax or plt.gca()
    im = ax.imshow(values.detach().float().cpu(), **imshow)
    ax.grid(False)  # the book style draws grid lines; not over a heatmap
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    plt.colorbar(im, ax=ax)
    return ax


def spread_bars(
    names: Sequence[str],
    series: Mapping[str, Sequence[tuple[float, float, float] | None]],
    ax: plt.Axes | None = None,
    *,
    missing: str = "n/a",
    title: str = "",
) -> plt.Axes:
    """Grouped bars: per name, one bar per series (label -> (mean, min, max) per name)
    with a min–max error bar; ``None`` (nothing measured) is written as ``missing``."""
    for label, values in series.items():
        if len(values) != len(names):
            raise ValueError(
                f"series {label!r} has {len(values)} values for {len(names)} names"
            )
    ax = ax or plt.gca()
    width = 0.8 / len(series)
    for j, (label, values) in enumerate(series.items()):
        legend = label  # on the first bar drawn
        for i, s in enumerate(values):
            x = i + (j - (len(series) - 1) / 2) * width
            if s is None:
                kw = dict(rotation=90, ha="center", va="bottom", color="#444444")
                ax.text(x, 0.3, missing, fontsize=10, **kw)
                continue
            ax.bar(x, s[0], width, color=PALETTE[j], label=legend)
            legend = None
            err = [[s[0] - s[1]], [s[2] - s[0]]]
            ax.errorbar(x, s[0], err, color="black", capsize=3, lw=1)
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right")
    ax.set_title(title)
    return ax


def seed_bands(
    x: Sequence[float],
    runs: Mapping[str, Tensor],
    ax: plt.Axes | None = None,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
) -> plt.Axes:
    """One line per entry of ``runs`` (label -> values of shape (seeds, len(x))): the
    mean over the seeds, in a band from their minimum to their maximum."""
    for label, v in runs.items():
        if v.dim() != 2 or v.shape[1] != len(x):
            raise ValueError(
                f"runs[{label!r}] must be (seeds, {len(x)}), got {tuple(v.shape)}"
            )
    ax = ax or plt.gca()
    for colour, (label, v) in zip(PALETTE, runs.items()):
        ax.plot(x, v.mean(0), "o-", ms=3, color=colour, label=label)
        ax.fill_between(x, v.amin(0), v.amax(0), color=colour, alpha=0.2)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend()
    return ax


def seed_dots(
    names: Sequence[str],
    series: Mapping[str, Sequence[Sequence[float]]],
    ax: plt.Axes | None = None,
    *,
    failed_at: float = 0.0,
    ylabel: str = "",
    title: str = "",
) -> plt.Axes:
    """Per name, one column of dots per series (label -> one list of runs per name,
    a value per seed) with a bar at their mean; runs that are not finite (diverged)
    are not drawn but counted as ``k†`` at height ``failed_at``."""
    for label, groups in series.items():
        if len(groups) != len(names):
            raise ValueError(
                f"series {label!r} has {len(groups)} groups for {len(names)} names"
            )
    ax = ax or plt.gca()
    for j, (colour, (label, groups)) in enumerate(zip(PALETTE, series.items())):
        dx = (j - (len(series) - 1) / 2) * 0.3
        for i, runs in enumerate(groups):
            done = [v for v in runs if math.isfinite(v)]
            legend = f"{label} (one dot per seed; bar: mean)" if i == 0 else None
            ax.plot([i + dx] * len(done), done, "o", color=colour, alpha=0.8,
                    label=legend)  # fmt: skip
            if done:
                mean = statistics.mean(done)
                ax.plot([i + dx - 0.1, i + dx + 0.1], [mean] * 2, color=colour)
            if len(done) < len(runs):
                ax.annotate(f"{len(runs) - len(done)}†", (i + dx, failed_at),
                            ha="center")  # fmt: skip
    ax.set_xticks(range(len(names)), names)
    ax.set(xlim=(-0.5, len(names) - 0.5), ylabel=ylabel, title=title)
    return ax


def trailing_mean(values: Sequence[float], window: int = 20) -> tuple[range, Tensor]:
    """A smoothed training curve: the mean of every full window of ``window`` steps,
    placed at the window's last step (steps count from 1).

    Shapes: values (n,) -> (range of n - window + 1 steps, (n - window + 1,) means)."""
    if not 1 <= window <= len(values):
        raise ValueError(f"window must be in 1..{len(values)}, got {window}")
    means = torch.tensor(values).unfold(0, window, 1).mean(dim=1)
    return range(window, len(values) + 1), means


def pretraining_curves(
    mlm: Sequence[float],
    nsp: Sequence[float],
    unigram_loss: float,
    window: int,
    title: str,
) -> plt.Figure:
    """The MLM and NSP training losses per step (means over ``window`` steps,
    :func:`trailing_mean`) beside their baselines: the unigram model's
    held-out MLM loss, and ln 2 (chance) for NSP."""
    fig, axes = plt.subplots(1, 2, figsize=WIDE)
    axes[0].plot(*trailing_mean(mlm, window), label="MLM loss (training batches)")
    axes[0].axhline(unigram_loss, color="gray", ls=":", label="unigram (held-out)")
    axes[1].plot(*trailing_mean(nsp, window), label="NSP loss (training batches)")
    axes[1].axhline(math.log(2), color="gray", ls=":", label="chance, ln 2")
    for ax, name in zip(axes, ("MLM", "NSP")):
        ax.set(xlabel="step", ylabel=f"cross-entropy ({window}-step mean)", title=name)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


REFERENCE_STYLES = (("k", ":"), (PALETTE[3], "--"), (PALETTE[2], "-."))  # color, line


def training_curve(
    history: Sequence[float],
    lines: Mapping[str, float] | None = None,
    ax: plt.Axes | None = None,
    *,
    window: int = 50,
    ylabel: str = "loss",
    title: str = "",
) -> plt.Axes:
    """A training run's loss per step as its running mean of ``window`` steps
    (:func:`trailing_mean`; the whole run if shorter), with one horizontal reference
    line per entry of ``lines`` (label -> value: a held-out loss, baselines), drawn in
    :data:`REFERENCE_STYLES` order (black dotted first). Shapes: history (n,)."""
    if len(history) == 0:
        raise ValueError("history must hold at least one step's loss, got none")
    lines = lines or {}
    if len(lines) > len(REFERENCE_STYLES):
        raise ValueError(f"lines takes at most {len(REFERENCE_STYLES)} references, "
                         f"got {len(lines)}")  # fmt: skip
    ax = ax or plt.subplots(figsize=SINGLE)[1]
    w = min(window, len(history))
    ax.plot(*trailing_mean(history, w), label=f"training, mean of {w}")
    for (label, value), (color, ls) in zip(lines.items(), REFERENCE_STYLES):
        ax.axhline(value, color=color, ls=ls, label=label)
    ax.set(xlabel="step", ylabel=ylabel, title=title)
    ax.legend()
    return ax


def kept_distributions(
    dists: Mapping[str, Tensor], names: Sequence[str], top: int = 10,
    xlabel: str = "next token",
) -> plt.Figure:  # fmt: skip
    """One bar panel per distribution of ``dists`` (label -> probabilities (V,)) over
    the ``top`` tokens the first one ranks highest, each titled with how many of the V
    tokens it keeps (probability above 0). ``names`` (V,) name the tokens, shown as
    Python writes them inside quotes, a space as ␣."""
    first = next(iter(dists.values()), None)
    if first is None or len(names) != len(first):
        raise ValueError(f"dists must hold distributions over the {len(names)} names, "
                         f"got {None if first is None else len(first)} values")  # fmt: skip
    shown = first.topk(top).indices  # (top,)
    labels = [repr(names[i])[1:-1].replace(" ", "␣") for i in shown.tolist()]
    fig, axes = plt.subplots(1, len(dists), figsize=(2 * len(dists), 3.2),
                             sharey=True, layout="constrained", squeeze=False)  # fmt: skip
    for ax, (name, p) in zip(axes[0], dists.items()):
        ax.bar(range(top), p[shown].numpy(), color=PALETTE[0])
        ax.set_xticks(range(top), labels, fontsize=8)
        ax.set_title(f"{name}\n{int((p > 0).sum())} of {len(p)} kept", fontsize=9)
        ax.set_xlabel(xlabel)
    axes[0, 0].set_ylabel("probability")
    return fig
