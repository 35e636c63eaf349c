"""Diagrams of normalisation placement: the post-norm and the pre-norm block side by side."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Circle

from ._draw import EDGE, arrow, box, canvas, text

__all__ = ["post_vs_pre_norm"]

_STREAM = EDGE["input"]  # the residual stream: the block's input carried upwards
_SUBLAYERS = ("multi-head\nattention", "feed-forward")


def _plus(ax, x: float, y: float, r: float = 0.22) -> None:
    """The residual addition: a circle with a plus sign, on the stream."""
    ax.add_patch(
        Circle((x, y), r, facecolor="white", edgecolor=_STREAM, linewidth=2.0, zorder=3)
    )
    text(ax, x, y, "+", 15, color=_STREAM, zorder=4)


def _line(ax, points: list[tuple[float, float]], color: str, width: float) -> None:
    xs, ys = zip(*points)
    ax.plot(xs, ys, color=color, linewidth=width, solid_capstyle="round", zorder=1)


def _panel(ax, sx: float, pre: bool, base: float) -> None:
    """One block: the stream at x = sx, the two sublayer branches to its right; the
    block input sits at height ``base``."""
    bx, bw = sx + 2.1, 2.0  # branch column (centre) and box width
    norm_w, norm_h, sub_h = 1.7, 0.5, 0.75
    text(ax, sx, base, "block input $x$", 11)
    y = base + 0.3  # top of the stream drawn so far
    for k, name in enumerate(_SUBLAYERS):
        y0 = base + 0.75 + 3.5 * k  # where the branch leaves the stream
        _line(ax, [(sx, y), (sx, y0)], _STREAM, 3.0)  # the stream up to the split
        if pre:  # the branch: LayerNorm, then the sublayer
            box(ax, bx - norm_w / 2, y0 + 0.25, norm_w, norm_h, "LayerNorm", "output")
            box(ax, bx - bw / 2, y0 + 1.05, bw, sub_h, name, "compute", 10)
            arrow(ax, (bx, y0 + 0.25 + norm_h), (bx, y0 + 1.05))
            top, plus_y = y0 + 1.05 + sub_h, y0 + 2.3
        else:  # the branch: the sublayer alone
            box(ax, bx - bw / 2, y0 + 0.55, bw, sub_h, name, "compute", 10)
            top, plus_y = y0 + 0.55 + sub_h, y0 + 1.85
        first = y0 + (0.25 if pre else 0.55)  # bottom of the branch's first box
        _line(ax, [(sx, y0), (bx, y0)], "#333333", 1.4)
        arrow(ax, (bx, y0), (bx, first))
        _line(ax, [(bx, top), (bx, plus_y)], "#333333", 1.4)
        arrow(ax, (bx, plus_y), (sx + 0.24, plus_y))
        _line(ax, [(sx, y0), (sx, plus_y - 0.22)], _STREAM, 3.0)  # the skip
        _plus(ax, sx, plus_y)
        y = plus_y + 0.22
        if not pre:  # post-norm: the stream itself goes through LayerNorm
            ln_y = plus_y + 0.5
            _line(ax, [(sx, y), (sx, ln_y)], _STREAM, 3.0)
            box(ax, sx - norm_w / 2, ln_y, norm_w, norm_h, "LayerNorm", "output")
            y = ln_y + norm_h
    arrow(ax, (sx, y), (sx, base + 7.9), color=_STREAM)
    text(ax, sx, base + 8.15, "block output", 11)
    if pre:  # the stream is never normalised inside the stack
        note = "a pre-norm stack adds one\nfinal LayerNorm after its\nlast block"
        text(ax, sx + 0.3, base + 7.35, note, 9, color="#555555", ha="left")


def post_vs_pre_norm() -> Figure:
    """Post-norm (left) normalises the residual stream after each addition, so every path
    from input to output crosses a LayerNorm; pre-norm (right) normalises only what
    enters each sublayer, leaving a clean identity path along the stream."""
    fig, ax = canvas(13.0, 11.0, scale=0.72)
    base = 1.35
    panels = (
        (
            1.6,
            False,
            "Post-norm (original transformer)",
            r"$x \leftarrow \mathrm{LN}(x + F(x))$",
            "the residual stream (blue) passes\na LayerNorm after every addition",
        ),
        (
            8.1,
            True,
            "Pre-norm (GPT-2, most models since)",
            r"$x \leftarrow x + F(\mathrm{LN}(x))$",
            "the residual stream (blue) is a clean identity\npath: "
            r"$x_L = x_0 + \sum_l F_l(\mathrm{LN}(x_l))$",
        ),
    )
    for sx, pre, title, formula, note in panels:
        _panel(ax, sx, pre, base)
        text(ax, sx + 1.5, base + 9.25, title, 13, weight="bold")
        text(ax, sx + 1.5, base + 8.75, formula, 12)
        text(ax, sx + 1.5, 0.45, note, 10.5, color=_STREAM)
    return fig
