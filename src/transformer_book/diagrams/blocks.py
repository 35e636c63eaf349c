"""Diagrams of transformer blocks: the encoder block, post-norm or pre-norm."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch

from ._draw import EDGE, FILL, arrow, box, canvas, text

__all__ = ["encoder_block"]

_CX, _W = 4.3, 3.0  # centre line and width of the boxes on the main path
_GAP = 0.42  # the vertical room of one arrow between two stages
_R = 0.22  # radius of the ⊕
_HEIGHTS = {"sublayer": 0.9, "Dropout": 0.42, "LayerNorm": 0.48}


def _half_height(norm_first: bool) -> float:
    """Height of one residual half: split point, its stages, the ⊕ (and Add & Norm)."""
    stages = _HEIGHTS["sublayer"] + _HEIGHTS["Dropout"] + _HEIGHTS["LayerNorm"]
    return 0.3 + 4 * _GAP + stages + 2 * _R


def _add(ax, y: float) -> None:
    """The ⊕ where a residual connection joins the main path, bottom at y."""
    ax.add_patch(
        Circle(
            (_CX, y + _R),
            _R,
            facecolor=FILL["neutral"],
            edgecolor=EDGE["neutral"],
            linewidth=1.6,
            zorder=3,
        )
    )
    text(ax, _CX, y + _R, "+", 15, color=EDGE["neutral"], zorder=4)


def _half(ax, bottom: float, label: str, norm_first: bool) -> float:
    """One sublayer with dropout, residual connection and LayerNorm; returns its top."""
    half = _W / 2
    split = bottom + 0.3  # where the skip path leaves the main path
    arrow(ax, (_CX, bottom), (_CX, split), style="-")
    ax.plot([_CX], [split], "o", color=EDGE["neutral"], markersize=5)
    stages = [(label, "compute", _HEIGHTS["sublayer"])]
    stages.append(("Dropout", "neutral", _HEIGHTS["Dropout"]))
    norm = ("LayerNorm", "output", _HEIGHTS["LayerNorm"])
    if norm_first:  # pre-norm: normalise the sublayer's input
        stages.insert(0, norm)
    prev, y = split, split + _GAP
    for name, role, h in stages:
        box(ax, _CX - half, y, _W, h, name, role)
        arrow(ax, (_CX, prev), (_CX, y))
        prev, y = y + h, y + h + _GAP
    add_y = y
    _add(ax, add_y)
    arrow(ax, (_CX, prev), (_CX, add_y))
    # the skip path: right from the split point, up, and into the ⊕ from the side
    skip_x = _CX + half + 0.8
    ax.plot(
        [_CX, skip_x, skip_x],
        [split, split, add_y + _R],
        color=EDGE["neutral"],
        linewidth=1.4,
    )
    arrow(ax, (skip_x, add_y + _R), (_CX + _R, add_y + _R))
    text(
        ax,
        skip_x + 0.15,
        (split + add_y) / 2,
        "residual",
        10,
        ha="left",
        rotation=90,
        color=EDGE["neutral"],
    )
    top = add_y + 2 * _R
    if not norm_first:  # post-norm: normalise the sum ("Add & Norm")
        y = top + _GAP
        box(ax, _CX - half, y, _W, norm[2], *norm[:2])
        arrow(ax, (_CX, top), (_CX, y))
        text(
            ax,
            _CX - half - 0.25,
            (add_y + y + norm[2]) / 2,
            "Add & Norm",
            10,
            ha="right",
            color=EDGE["output"],
        )
        top = y + norm[2]
    return top


def encoder_block(norm_first: bool = False) -> Figure:
    """The encoder block as a data flow, bottom to top: self-attention, then the
    feed-forward network, each with dropout on its output and a residual connection.

    ``norm_first=False``: post-norm, a LayerNorm after each addition ("Add & Norm"), as
    in Vaswani et al. (2017), figure 1. ``norm_first=True``: pre-norm, a LayerNorm at the
    input of each sublayer, so the skip path runs from block input to output untouched.
    The frame marks what repeats N times in a stack.
    """
    height = 0.3 + 0.6 + 0.4 + 2 * _half_height(norm_first) + 0.4 + 0.6 + 0.9
    fig, ax = canvas(8.0, height, scale=0.62)
    half = _W / 2
    io = _W + 0.6  # the input and output boxes are a little wider
    box(ax, _CX - io / 2, 0.3, io, 0.6, "x   (B, T, d_model)", "input")
    frame_bottom = 0.9 + 0.2
    top = 0.9 + 0.4
    arrow(ax, (_CX, 0.9), (_CX, top), style="-")
    top = _half(ax, top, "Multi-head\nself-attention", norm_first)
    top = _half(ax, top, "Feed-forward\nnetwork", norm_first)
    frame_top = top + 0.2
    ax.add_patch(
        FancyBboxPatch(
            (_CX - half - 1.9, frame_bottom),
            _W + 3.6,
            frame_top - frame_bottom,
            boxstyle="round,pad=0,rounding_size=0.25",
            facecolor="none",
            edgecolor="#999999",
            linewidth=1.2,
            linestyle=(0, (4, 3)),
        )
    )
    text(ax, _CX - half - 2.1, (frame_bottom + frame_top) / 2, "N ×", 13, ha="right")
    y = top + 0.4
    arrow(ax, (_CX, top), (_CX, y))
    box(ax, _CX - io / 2, y, io, 0.6, "output   (B, T, d_model)", "input")
    name = "Pre-norm" if norm_first else "Post-norm"
    text(ax, _CX, y + 0.95, f"{name} encoder block", 12, weight="bold")
    return fig
