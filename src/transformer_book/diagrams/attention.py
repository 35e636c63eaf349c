"""Diagrams of attention: the data flow of scaled dot-product attention."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, grid, text

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(T: int = 4, d: int = 6, d_k: int = 3) -> Figure:
    """X is projected to Q, K and V; the scores Q Kᵀ / √d_k become weights by a
    row-wise softmax; the weights mix the rows of V into the output."""
    fig, ax = canvas(14.2, 6.2)
    c = 0.3  # cell size
    # input X (T, d)
    xx, xy, xw, xh = grid(ax, 0.3, 2.4, T, d, c, "input", "X", f"(T={T}, d={d})")
    # three projections
    rows = {"Q": 4.6, "K": 2.6, "V": 0.6}
    ends = {}
    for name, y in rows.items():
        bx = box(ax, 3.0, y, 1.3, 0.8, f"$W_{name}$", "weight")
        arrow(ax, (xx + xw, xy + xh / 2), (bx[0], y + 0.4))
        gx, gy, gw, gh = grid(
            ax, 5.0, y - 0.2, T, d_k, c, "compute", "", f"{name} (T, d_k)"
        )
        arrow(ax, (bx[0] + bx[2], y + 0.4), (gx, gy + gh / 2))
        ends[name] = (gx + gw, gy + gh / 2)
    # scores and softmax
    sx = box(ax, 7.2, 3.4, 2.3, 1.0, r"$\frac{Q K^\top}{\sqrt{d_k}}$", "compute", 13)
    arrow(ax, ends["Q"], (sx[0], sx[1] + 0.7))
    arrow(ax, ends["K"], (sx[0], sx[1] + 0.3))
    sm = box(ax, 10.1, 3.4, 1.7, 1.0, "softmax\nper row", "compute")
    arrow(ax, (sx[0] + sx[2], sx[1] + 0.5), (sm[0], sm[1] + 0.5))
    hi = {(1, j): "output" for j in range(T)}
    wx, wy, ww, wh = grid(
        ax,
        12.3,
        3.3,
        T,
        T,
        c,
        "output",
        "weights A",
        "(T, T), rows sum to 1",
        highlight=hi,
    )
    arrow(ax, (sm[0] + sm[2], sm[1] + 0.5), (wx, wy + wh / 2))
    # output = A V
    mx = box(ax, 10.0, 0.6, 1.7, 1.0, "A · V", "compute")
    arrow(ax, ends["V"], (mx[0], mx[1] + 0.5))
    arrow(
        ax, (wx + ww / 2, wy), (mx[0] + mx[2], mx[1] + 0.8), connection="arc3,rad=-0.2"
    )
    gx, gy, gw, gh = grid(
        ax,
        12.5,
        0.5,
        T,
        d_k,
        c,
        "output",
        "",
        "output (T, d_v)",
        highlight={(1, j): "output" for j in range(d_k)},
    )
    arrow(ax, (mx[0] + mx[2], mx[1] + 0.5), (gx, gy + gh / 2))
    text(
        ax,
        11.0,
        5.7,
        "row i of A: how much query i takes from each key",
        10,
        color=EDGE["output"],
    )
    return fig
