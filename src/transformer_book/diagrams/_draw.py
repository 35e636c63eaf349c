"""Drawing primitives shared by every diagram: a blank canvas, boxes, arrows, tensors.

Coordinates are in abstract units on an equal-aspect canvas; a diagram lays itself out
in those units and the canvas scales it to the page.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from ..plotting import PALETTE

__all__ = ["FILL", "EDGE", "arrow", "box", "canvas", "grid", "text"]

# One colour per role, from the book's colour-blind-safe palette.
EDGE = {
    "input": PALETTE[0],
    "weight": PALETTE[1],
    "compute": PALETTE[2],
    "output": PALETTE[3],
    "neutral": "#555555",
}
FILL = {
    "input": "#D6E6F2",
    "weight": "#FBEBC9",
    "compute": "#CDEDE3",
    "output": "#F3DDEA",
    "neutral": "#F2F2F2",
}


def canvas(width: float, height: float, scale: float = 0.9) -> tuple[Figure, plt.Axes]:
    """A blank figure whose axes span ``[0, width] x [0, height]`` units, axes hidden."""
    fig, ax = plt.subplots(figsize=(width * scale, height * scale))
    fig.subplots_adjust(left=0, right=1, bottom=0, top=1)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(
    ax: plt.Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    label: str = "",
    role: str = "compute",
    fontsize: float = 11,
) -> tuple[float, float, float, float]:
    """A rounded box with lower-left corner (x, y), its label centred; returns (x, y, w, h)."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            linewidth=1.6,
            edgecolor=EDGE[role],
            facecolor=FILL[role],
        )
    )
    if label:
        ax.text(
            x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize
        )
    return x, y, w, h


def arrow(
    ax: plt.Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    label: str = "",
    color: str = "#333333",
    style: str = "-|>",
    connection: str = "arc3",
    fontsize: float = 10,
) -> None:
    """An arrow from ``start`` to ``end``, with an optional label at its middle."""
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=14,
            linewidth=1.4,
            color=color,
            connectionstyle=connection,
            shrinkA=2,
            shrinkB=2,
        )
    )
    if label:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(
            mx + 0.08, my, label, ha="left", va="center", fontsize=fontsize, color=color
        )


def grid(
    ax: plt.Axes,
    x: float,
    y: float,
    rows: int,
    cols: int,
    cell: float = 0.25,
    role: str = "input",
    label: str = "",
    shape: str = "",
    highlight: dict[tuple[int, int], str] | None = None,
) -> tuple[float, float, float, float]:
    """A tensor drawn as a ``rows x cols`` grid of cells (row 0 at the top), lower-left
    corner (x, y); ``label`` above it, ``shape`` (e.g. "(T, d_k)") below it.

    ``highlight`` maps (row, col) to a role whose edge colour fills that cell.
    Returns the grid's (x, y, w, h).
    """
    w, h = cols * cell, rows * cell
    for r in range(rows):
        for c in range(cols):
            color = FILL[role]
            if highlight and (r, c) in highlight:
                color = EDGE[highlight[(r, c)]]
            ax.add_patch(
                Rectangle(
                    (x + c * cell, y + h - (r + 1) * cell),
                    cell,
                    cell,
                    facecolor=color,
                    edgecolor=EDGE[role],
                    linewidth=0.8,
                )
            )
    if label:
        ax.text(x + w / 2, y + h + 0.12, label, ha="center", va="bottom", fontsize=12)
    if shape:
        ax.text(
            x + w / 2,
            y - 0.12,
            shape,
            ha="center",
            va="top",
            fontsize=9,
            color="#444444",
        )
    return x, y, w, h


def text(ax: plt.Axes, x: float, y: float, s: str, size: float = 11, **kwargs) -> None:
    """A label at (x, y), centred unless ``ha``/``va`` say otherwise."""
    kwargs.setdefault("ha", "center")
    kwargs.setdefault("va", "center")
    ax.text(x, y, s, fontsize=size, **kwargs)
