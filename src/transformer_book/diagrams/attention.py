"""Diagrams of attention (chapters 01-02): the matrix form, recurrence against
attention, scaled dot-product attention and the multi-head split."""

from __future__ import annotations

from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..plotting import PALETTE
from ._draw import EDGE, FILL, arrow, box, canvas, grid, text

__all__ = [
    "self_attention_matrix_form",
    "recurrence_vs_attention",
    "scaled_dot_product_attention",
    "multi_head_attention",
]

# Heads get colours of their own, distinct from the role colours of _draw (X is
# drawn neutral in the multi-head diagram so that blue is free for head 0).
HEAD_EDGE = (PALETTE[0], PALETTE[5], PALETTE[2])
GREY = "#444444"


def _head_fill(h: int) -> tuple[float, float, float, float]:
    return to_rgba(HEAD_EDGE[h], 0.3)


def _cells(
    ax,
    x: float,
    y: float,
    rows: int,
    cols: int,
    cell: float,
    colour,
    label: str = "",
    shape: str = "",
) -> tuple[float, float, float, float]:
    """A rows x cols tensor whose cell (r, c) takes (face, edge) = colour(r, c); row 0 on
    top, lower-left corner (x, y); ``label`` above, ``shape`` below."""
    w, h = cols * cell, rows * cell
    for r in range(rows):
        for c in range(cols):
            face, edge = colour(r, c)
            ax.add_patch(
                Rectangle(
                    (x + c * cell, y + h - (r + 1) * cell),
                    cell,
                    cell,
                    facecolor=face,
                    edgecolor=edge,
                    linewidth=0.8,
                )
            )
    if label:
        ax.text(x + w / 2, y + h + 0.12, label, ha="center", va="bottom", fontsize=12)
    if shape:
        ax.text(
            x + w / 2, y - 0.12, shape, ha="center", va="top", fontsize=9, color=GREY
        )
    return x, y, w, h


def _row_highlight(role: str, row: int):
    """Colour function: one role everywhere, one row filled with the role's edge colour."""
    return lambda r, c: (EDGE[role] if r == row else FILL[role], EDGE[role])


def self_attention_matrix_form(T: int = 4, d: int = 3, i: int = 1) -> Figure:
    """softmax(X Xᵀ) X drawn as tensors: the (T, T) scores, a row-wise softmax, and row
    i of the output as a weighted average of every row of X."""
    fig, ax = canvas(13.8, 3.5)
    c = 0.38  # cell size
    y0 = 1.3  # bottom of the (T, ·) grids
    x = 0.3
    xx = _cells(ax, x, y0, T, d, c, _row_highlight("input", i), "X", f"(T={T}, d={d})")
    text(ax, xx[0] + xx[2] + 0.3, y0 + T * c / 2, "·", 20)
    xt = grid(ax, xx[0] + xx[2] + 0.6, y0 + (T - d) * c, d, T, c, "input", "Xᵀ")
    text(ax, xt[0] + xt[2] / 2, xt[1] - 0.12, "(d, T)", 9, va="top", color=GREY)
    text(ax, xt[0] + xt[2] + 0.35, y0 + T * c / 2, "=", 18)
    s = _cells(
        ax,
        xt[0] + xt[2] + 0.7,
        y0,
        T,
        T,
        c,
        _row_highlight("compute", i),
        "scores X Xᵀ",
        "(T, T): sᵢⱼ = xᵢ · xⱼ",
    )
    sm = box(ax, s[0] + s[2] + 0.55, y0 + 0.25, 1.6, 1.0, "softmax\nof each row")
    arrow(ax, (s[0] + s[2], y0 + T * c / 2), (sm[0], y0 + T * c / 2))
    w = _cells(
        ax,
        sm[0] + sm[2] + 0.45,
        y0,
        T,
        T,
        c,
        _row_highlight("output", i),
        "weights W",
        "(T, T), rows sum to 1",
    )
    arrow(ax, (sm[0] + sm[2], y0 + T * c / 2), (w[0], y0 + T * c / 2))
    text(ax, w[0] + w[2] + 0.3, y0 + T * c / 2, "·", 20)
    x2 = grid(ax, w[0] + w[2] + 0.6, y0, T, d, c, "input", "X", "(T, d)")
    text(ax, x2[0] + x2[2] + 0.35, y0 + T * c / 2, "=", 18)
    _cells(
        ax,
        x2[0] + x2[2] + 0.7,
        y0,
        T,
        d,
        c,
        _row_highlight("output", i),
        "Y",
        "(T, d)",
    )
    text(
        ax,
        6.9,
        0.45,
        f"row {i + 1} of W holds word {i + 1}'s weights over all T words; "
        f"row {i + 1} of Y = Σⱼ W{_sub(i + 1)}ⱼ xⱼ, a weighted average of the rows of X",
        10,
        color=EDGE["output"],
    )
    return fig


def recurrence_vs_attention(T: int = 5) -> Figure:
    """Left, a recurrent layer: state t needs state t-1, so T steps run one after the
    other and x₁ reaches the last output through T steps. Right, self-attention: every
    output reads every input in one step."""
    fig, ax = canvas(14.0, 5.0)
    bw, bh, gap = 0.75, 0.6, 1.15  # box width, height, spacing
    hot = EDGE["output"]

    # Left panel: x_t -> h_t, h_{t-1} -> h_t.
    left = 0.5
    text(ax, left + (T - 1) * gap / 2 + bw / 2, 4.6, "recurrent layer", 13)
    for t in range(T):
        x = left + t * gap
        box(ax, x, 0.9, bw, bh, f"x{_sub(t + 1)}", "input")
        box(ax, x, 2.5, bw, bh, f"h{_sub(t + 1)}", "compute")
        colour = hot if t == 0 else "#333333"
        arrow(ax, (x + bw / 2, 0.9 + bh), (x + bw / 2, 2.5), color=colour)
        if t:
            arrow(ax, (x - gap + bw, 2.5 + bh / 2), (x, 2.5 + bh / 2), color=hot)
    text(
        ax,
        left + (T - 1) * gap / 2 + bw / 2,
        3.75,
        f"step t waits for step t−1: {T} steps in sequence",
        10,
    )
    text(
        ax,
        left + (T - 1) * gap / 2 + bw / 2,
        0.35,
        f"x₁ reaches h{_sub(T)} through {T} steps",
        10,
        color=hot,
    )

    # Right panel: every x_j -> every y_i.
    right = 7.8
    text(ax, right + (T - 1) * gap / 2 + bw / 2, 4.6, "self-attention", 13)
    for t in range(T):
        x = right + t * gap
        box(ax, x, 0.9, bw, bh, f"x{_sub(t + 1)}", "input")
        box(ax, x, 2.5, bw, bh, f"y{_sub(t + 1)}", "compute")
    for j in range(T):
        for i in range(T):
            start = (right + j * gap + bw / 2, 0.9 + bh)
            end = (right + i * gap + bw / 2, 2.5)
            if i == T - 1:
                arrow(ax, start, end, color=hot if j == 0 else "#333333")
            else:
                ax.plot(*zip(start, end), color="#BBBBBB", lw=0.8, zorder=0)
    text(
        ax,
        right + (T - 1) * gap / 2 + bw / 2,
        3.75,
        "all outputs at once: one step",
        10,
    )
    text(
        ax,
        right + (T - 1) * gap / 2 + bw / 2,
        0.35,
        f"x₁ reaches y{_sub(T)} in one step",
        10,
        color=hot,
    )
    ax.plot([7.0, 7.0], [0.3, 4.8], color="#CCCCCC", lw=1)
    return fig


def _sub(n: int) -> str:
    """An integer as Unicode subscript digits."""
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def scaled_dot_product_attention(T: int = 4, d: int = 6, d_k: int = 3) -> Figure:
    """X is projected to Q, K and V; the scores Q Kᵀ / √d_k become weights by a
    row-wise softmax; row i of the weights mixes the rows of V into row i of the
    output."""
    fig, ax = canvas(15.2, 6.6)
    c = 0.3  # cell size
    i = 1  # the highlighted query
    xx, xy, xw, xh = grid(ax, 0.3, 2.6, T, d, c, "input", "X", f"(T={T}, d={d})")
    rows = {"Q": 4.9, "K": 2.9, "V": 0.9}  # vertical centre of each projection
    ends = {}
    for name, yc in rows.items():
        bx = box(ax, 2.9, yc - 0.4, 1.7, 0.8, f"· $A_{name}$", "weight")
        arrow(ax, (xx + xw, xy + xh / 2), (bx[0], yc))
        hi = _row_highlight("compute", i) if name == "Q" else None
        colour = hi or (lambda r, c_: (FILL["compute"], EDGE["compute"]))
        width = "d_v" if name == "V" else "d_k"
        g = _cells(
            ax, 5.3, yc - T * c / 2, T, d_k, c, colour, "", f"{name} (T, {width}={d_k})"
        )
        arrow(ax, (bx[0] + bx[2], yc), (g[0], yc))
        ends[name] = (g[0] + g[2], yc)
    text(ax, 3.75, 5.85, "$A_Q, A_K$: (d, d_k);  $A_V$: (d, d_v)", 10, color=GREY)
    # scores, softmax, weights
    sc = box(ax, 7.2, 3.45, 1.9, 1.1, r"$\frac{Q K^\top}{\sqrt{d_k}}$", "compute", 15)
    arrow(ax, ends["Q"], (sc[0], sc[1] + 0.8))
    arrow(ax, ends["K"], (sc[0], sc[1] + 0.3))
    s = _cells(
        ax,
        9.6,
        4.0 - T * c / 2,
        T,
        T,
        c,
        _row_highlight("compute", i),
        "scores",
        "(T, T)",
    )
    arrow(ax, (sc[0] + sc[2], 4.0), (s[0], 4.0))
    sm = box(ax, 11.3, 3.5, 1.6, 1.0, "softmax\nof each row")
    arrow(ax, (s[0] + s[2], 4.0), (sm[0], 4.0))
    a = _cells(
        ax,
        13.5,
        4.0 - T * c / 2,
        T,
        T,
        c,
        _row_highlight("output", i),
        "weights W",
        "(T, T), rows sum to 1",
    )
    arrow(ax, (sm[0] + sm[2], 4.0), (a[0], 4.0))
    # output = W V
    av = box(ax, 11.3, 0.4, 1.6, 1.0, "W · V", "compute")
    arrow(ax, ends["V"], (av[0], av[1] + 0.5))
    arrow(ax, (a[0] + a[2] / 2, a[1] - 0.45), (av[0] + av[2], av[1] + 0.85))
    out = _cells(
        ax,
        13.6,
        0.9 - T * c / 2,
        T,
        d_k,
        c,
        _row_highlight("output", i),
        "output",
        f"(T, d_v={d_k})",
    )
    arrow(ax, (av[0] + av[2], av[1] + 0.5), (out[0], 0.9))
    text(
        ax,
        8.0,
        6.25,
        f"query {i + 1} (row {i + 1}) scores every key; its weights mix the rows "
        f"of V into row {i + 1} of the output",
        10,
        color=EDGE["output"],
    )
    return fig


def multi_head_attention(T: int = 4, n_heads: int = 3, d_k: int = 2) -> Figure:
    """How heads sit in the projection matrices: head h owns columns h·d_k … (h+1)·d_k-1
    of A_Q = q_proj.weight.T (and of A_K, A_V); a view and a transpose make the heads a
    batch axis; the heads' outputs are concatenated and multiplied by A_O, whose rows
    h·d_k … (h+1)·d_k-1 read head h."""
    if n_heads > len(HEAD_EDGE):
        raise ValueError(
            f"n_heads must be at most {len(HEAD_EDGE)} in this diagram, got {n_heads}"
        )
    D = n_heads * d_k
    fig, ax = canvas(13.4, 7.6)
    c = 0.3

    def by_col(r, col):
        return _head_fill(col // d_k), HEAD_EDGE[col // d_k]

    def by_row(r, col):
        return _head_fill(r // d_k), HEAD_EDGE[r // d_k]

    def neutral(r, col):
        return FILL["neutral"], EDGE["neutral"]

    # Top row: X · A_Q = Q, then the split into heads.
    top = 5.2
    x = _cells(ax, 0.3, top, T, D, c, neutral, "X", f"(B, T, d_model={D})")
    text(ax, x[0] + x[2] + 0.3, top + T * c / 2, "·", 20)
    wq = _cells(
        ax,
        x[0] + x[2] + 0.6,
        top + (T - D) * c,
        D,
        D,
        c,
        by_col,
        "",
        "$A_Q$ = q_proj.weight.T  (nn.Linear stores (out, in))",
    )
    for h in range(n_heads):
        text(
            ax,
            wq[0] + (h + 0.5) * d_k * c,
            wq[1] + wq[3] + 0.25,
            f"head {h}",
            9,
            color=HEAD_EDGE[h],
        )
    text(
        ax,
        wq[0] + wq[2] / 2,
        wq[1] + wq[3] + 0.75,
        "head h's $A_Q$ = q_proj.weight.T[:, h·d_k : (h+1)·d_k]",
        10,
    )
    text(ax, wq[0] + wq[2] + 0.35, top + T * c / 2, "=", 18)
    q = _cells(
        ax,
        wq[0] + wq[2] + 0.7,
        top,
        T,
        D,
        c,
        by_col,
        "Q = q_proj(x)",
        "(B, T, H·d_k)",
    )
    # the split: view (B, T, H, d_k), transpose(1, 2) -> (B, H, T, d_k)
    sx = q[0] + q[2] + 3.6
    arrow(ax, (q[0] + q[2] + 0.1, top + T * c / 2), (sx - 0.15, top + T * c / 2))
    text(ax, q[0] + q[2] + 1.75, top + T * c / 2 + 0.55, "split_heads", 10)
    text(
        ax,
        q[0] + q[2] + 1.75,
        top + T * c / 2 - 0.55,
        "view (B, T, H, d_k)\ntranspose(1, 2)",
        9,
        color=GREY,
    )
    for h in range(n_heads):
        _cells(
            ax,
            sx + h * (d_k * c + 0.35),
            top,
            T,
            d_k,
            c,
            lambda r, col, h=h: (_head_fill(h), HEAD_EDGE[h]),
            f"head {h}",
        )
    text(
        ax,
        sx + (n_heads * (d_k * c + 0.35) - 0.35) / 2,
        top - 0.2,
        "(B, H, T, d_k)",
        9,
        va="top",
        color=GREY,
    )

    # Middle: attention within each head, as one batched computation.
    mid = 3.4
    box(
        ax,
        1.0,
        mid,
        sx + n_heads * (d_k * c + 0.35) - 1.3,
        0.9,
        "attention in every head at once (K and V are split the same way)",
        "compute",
        10,
    )
    heads_mid = sx + (n_heads * (d_k * c + 0.35) - 0.35) / 2
    arrow(ax, (heads_mid, top - 0.5), (heads_mid, mid + 0.9))

    # Bottom row: heads' outputs -> concatenation -> · A_O = Y.
    bot = 1.4
    ox = 0.3
    for h in range(n_heads):
        _cells(
            ax,
            ox + h * (d_k * c + 0.35),
            bot,
            T,
            d_k,
            c,
            lambda r, col, h=h: (_head_fill(h), HEAD_EDGE[h]),
            f"head {h}",
        )
    out_w = n_heads * (d_k * c + 0.35) - 0.35
    text(ax, ox + out_w / 2, bot - 0.2, "(B, H, T, d_k)", 9, va="top", color=GREY)
    arrow(ax, (ox + out_w / 2, mid), (ox + out_w / 2, bot + T * c + 0.45))
    cx = ox + out_w + 2.4
    arrow(ax, (ox + out_w + 0.1, bot + T * c / 2), (cx - 0.1, bot + T * c / 2))
    text(ax, ox + out_w + 1.2, bot + T * c / 2 + 0.5, "merge_heads", 10)
    text(
        ax,
        ox + out_w + 1.2,
        bot + T * c / 2 - 0.55,
        "transpose(1, 2)\nreshape",
        9,
        color=GREY,
    )
    cat = _cells(ax, cx, bot, T, D, c, by_col, "concatenation", "(B, T, H·d_k)")
    text(ax, cat[0] + cat[2] + 0.3, bot + T * c / 2, "·", 20)
    wo = _cells(ax, cat[0] + cat[2] + 0.6, bot + (T - D) * c, D, D, c, by_row, "", "")
    text(
        ax,
        wo[0] + wo[2] / 2,
        wo[1] - 0.12,
        "$A_O$ = o_proj.weight.T\nrows h·d_k … (h+1)·d_k − 1 read head h",
        9,
        va="top",
        color=GREY,
    )
    text(ax, wo[0] + wo[2] + 0.35, bot + T * c / 2, "=", 18)
    y_colour = lambda r, col: (FILL["output"], EDGE["output"])  # noqa: E731
    _cells(ax, wo[0] + wo[2] + 0.7, bot, T, D, c, y_colour, "Y", "(B, T, d_model)")
    return fig
