"""The book's look and the plots it draws again and again: attention maps and curves.

:func:`use_book_style` is the one place the book's figures get their look: a
colour-blind-safe palette (Okabe and Ito's eight colours), font sizes that read at
the page's width, and three figure sizes (``SINGLE``, ``WIDE``, ``SQUARE``).
:func:`transformer_book.runtime.setup` applies it, so every chapter looks the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from torch import Tensor

__all__ = [
    "PALETTE",
    "SINGLE",
    "SQUARE",
    "WIDE",
    "attention_map",
    "attention_maps",
    "book_style",
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
