"""Diagrams of the KV cache: how query heads share key/value heads (MHA, GQA, MQA), and
how the cache grows by one row per decoded token."""

from __future__ import annotations

from matplotlib.figure import Figure

from ..plotting import PALETTE
from ._draw import EDGE, FILL, arrow, box, canvas, grid, text

__all__ = ["shared_heads", "cache_growth"]


def shared_heads(n_heads: int = 8, kv_heads: tuple[int, ...] = (8, 2, 1)) -> Figure:
    """One panel per attention kind: ``n_heads`` query heads above, the key/value heads
    below, a line from every query head to the key/value head it reads. The cache holds
    only the bottom row."""
    names = {n_heads: "multi-head (MHA)", 1: "multi-query (MQA)"}
    w_panel, gap, size = 4.6, 0.5, 0.42
    width = len(kv_heads) * w_panel + (len(kv_heads) - 1) * gap + 0.4
    fig, ax = canvas(width, 4.3, scale=0.72)
    for p, n_kv in enumerate(kv_heads):
        x0 = 0.2 + p * (w_panel + gap)
        group = n_heads // n_kv
        step = w_panel / n_heads
        name = names.get(n_kv, f"grouped-query (GQA)\n{n_kv} groups of {group}")
        text(ax, x0 + w_panel / 2, 3.85, name, 11.5, va="center")
        q_centres = []
        for h in range(n_heads):  # query heads
            cx = x0 + (h + 0.5) * step
            colour = PALETTE[(h // group) % 6] if group > 1 else PALETTE[0]
            ax.add_patch(_square(cx, 2.85, size, colour, "#FFFFFF"))
            text(ax, cx, 2.85, f"q{h + 1}", 8.5)
            q_centres.append(cx)
        kv_step = w_panel / n_kv
        for j in range(n_kv):  # key/value heads, each under the middle of its group
            cx = x0 + (j + 0.5) * kv_step
            colour = PALETTE[j % 6] if group > 1 else PALETTE[0]
            ax.add_patch(_square(cx, 1.05, size, colour, FILL["weight"]))
            text(ax, cx, 1.05, "k,v", 8)
            for h in range(j * group, (j + 1) * group):
                arrow(
                    ax,
                    (q_centres[h], 2.85 - size / 2),
                    (cx, 1.05 + size / 2),
                    color=colour,
                    style="-",
                )
        text(
            ax,
            x0 + w_panel / 2,
            0.35,
            f"cached per token and layer: {n_kv} key + {n_kv} value heads",
            9,
            color=EDGE["neutral"],
        )
    text(ax, 0.05, 2.85, "queries", 9, ha="left", va="bottom", rotation=90)
    text(ax, 0.05, 1.05, "cache", 9, ha="left", va="bottom", rotation=90)
    return fig


def _square(cx: float, cy: float, size: float, edge: str, fill: str):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch(
        (cx - size / 2, cy - size / 2),
        size,
        size,
        boxstyle="round,pad=0.01,rounding_size=0.06",
        linewidth=1.6,
        edgecolor=edge,
        facecolor=fill,
    )


def cache_growth(prompt: int = 3, steps: int = 3, head_dim: int = 4) -> Figure:
    """Decoding steps side by side: each step reads one new token, appends its key and
    value as a new row of the cache, and its query attends to every cached row."""
    c = 0.3  # cell size
    col_w = 2 * head_dim * c + 1.4
    width = steps * col_w + 0.4
    rows_max = prompt + steps
    base = 2.0  # the caches' bottom edge
    height = base + rows_max * c + 1.2
    fig, ax = canvas(width, height, scale=0.75)
    for s in range(steps):
        t = prompt + s + 1  # tokens cached after this step
        x0 = 0.4 + s * col_w
        kx = x0 + 0.2
        vx = kx + head_dim * c + 0.4
        mid = (kx + vx + head_dim * c) / 2
        text(ax, mid, height - 0.45, f"step {s + 1}: token {t} in", 11)
        new_row = {(t - 1, j): "output" for j in range(head_dim)}
        grid(ax, kx, base, t, head_dim, c, "weight", "K cache", "", new_row)
        grid(ax, vx, base, t, head_dim, c, "weight", "V cache", "", new_row)
        # the new token's query, key and value, below; k and v go into the new row
        bx = box(ax, kx - 0.1, 0.85, vx + head_dim * c - kx + 0.2, 0.5, "", "input")
        for gx, name in ((kx, "k"), (vx, "v")):
            cx = gx + head_dim * c / 2
            text(ax, cx, bx[1] + 0.25, f"{name}{t}", 10)
            arrow(ax, (cx, bx[1] + bx[3]), (cx, base - 0.02), color=EDGE["output"])
        text(ax, mid, bx[1] + 0.25, f"q{t}", 10, color=EDGE["compute"])
        text(ax, mid, 0.5, f"q{t} attends to all {t} rows", 9.5, color=EDGE["compute"])
    text(
        ax,
        width / 2,
        0.12,
        f"the prompt's {prompt} rows were cached in one pass; each step appends one "
        "row (highlighted) and recomputes none",
        9.5,
        color=EDGE["neutral"],
    )
    return fig
