"""Diagrams of tiled attention: the score matrix visited one tile at a time (chapter 08)."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ._draw import EDGE, FILL, arrow, box, canvas, text

__all__ = ["tiled_attention"]


def tiled_attention(n_blocks: int = 4, current: tuple[int, int] = (2, 1)) -> Figure:
    """The (T, T) causal score matrix cut into n_blocks x n_blocks tiles. One block of
    queries (a row of tiles) visits its key tiles left to right, keeping a running max
    m, a running sum l and an unnormalised output o; tiles above the diagonal are
    skipped; only the current tile exists in memory."""
    row, col = current
    b = 0.9  # tile size
    fig, ax = canvas(13.0, n_blocks * b + 1.9)
    x0, y0 = 0.9, 0.7
    for i in range(n_blocks):
        for j in range(n_blocks):
            if j > i:
                face, edge, hatch = "white", "#BBBBBB", "//"  # causal: skipped
            elif i == row and j == col:
                face, edge, hatch = EDGE["output"], EDGE["output"], None  # the tile
            elif i == row and j < col:
                face, edge, hatch = FILL["output"], EDGE["output"], None  # done
            else:
                face, edge, hatch = FILL["input"], EDGE["input"], None
            ax.add_patch(
                Rectangle(
                    (x0 + j * b, y0 + (n_blocks - 1 - i) * b),
                    b,
                    b,
                    facecolor=face,
                    edgecolor=edge,
                    hatch=hatch,
                    linewidth=1.2,
                )
            )
    side = n_blocks * b
    text(ax, x0 + side / 2, y0 + side + 0.45, "scores, one tile at a time", 12)
    text(ax, x0 + side / 2, y0 - 0.3, "key blocks →", 9)
    text(ax, x0 - 0.35, y0 + side / 2, "query blocks ↓", 9, rotation=90)
    tile_y = y0 + (n_blocks - 1 - row) * b + b / 2
    text(ax, x0 + side + 0.15, tile_y - 0.22, f"query block {row}", 10, ha="left")
    text(
        ax,
        x0 + side / 2,
        y0 + side + 0.12,
        "pink: folded into m, l, o; dark: in memory now; hatched: skipped",
        8,
        color="#444444",
    )
    # the running statistics of the current query block
    steps = [
        (r"tile $S = Q_i K_j^\top / \sqrt{d}$   ($b \times b$)", "compute"),
        (r"$m' = \max(m,\ \mathrm{rowmax}\, S)$", "compute"),
        (r"$l \leftarrow l\, e^{m - m'} + \mathrm{rowsum}\, e^{S - m'}$", "compute"),
        (
            r"$o \leftarrow o\, e^{m - m'} + e^{S - m'} V_j$,   $m \leftarrow m'$",
            "compute",
        ),
        (r"after the last tile:  $\mathrm{out} = o / l$", "output"),
    ]
    bx = 6.0
    for n, (label, role) in enumerate(steps):
        y = y0 + side - 0.15 - n * 0.72
        box(ax, bx, y - 0.25, 6.6, 0.5, label, role, 10)
        if n:
            arrow(ax, (bx + 3.3, y + 0.47), (bx + 3.3, y + 0.27))
    arrow(
        ax,
        (x0 + side + 0.1, tile_y + 0.15),
        (bx, y0 + side - 0.15),
        connection="arc3,rad=-0.2",
        color=EDGE["output"],
    )
    text(
        ax,
        bx + 3.3,
        y0 - 0.3,
        "in memory per query block: m and l (b numbers each), o (b × d), one tile",
        9,
        color="#444444",
    )
    return fig
