"""Diagrams of the encoder-decoder: its data flow, with the mask of each attention."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, grid, text

__all__ = ["encoder_decoder"]


def _mask(ax, x: float, y: float, allowed, label: str, cell: float = 0.22) -> None:
    """A boolean mask as a grid: filled cells may attend, pale ones may not."""
    rows, cols = len(allowed), len(allowed[0])
    hi = {(r, c): "output" for r in range(rows) for c in range(cols) if allowed[r][c]}
    grid(ax, x, y, rows, cols, cell, "neutral", highlight=hi)
    text(ax, x + cols * cell / 2, y - 0.22, label, 9, color="#444444", va="top")


def encoder_decoder(n_src: int = 5, n_tgt: int = 4, n_pad: int = 1) -> Figure:
    """The source goes through the encoder once; its output, the memory, is read by the
    cross-attention of every decoder block; the decoder reads the target shifted right
    under a causal mask and predicts the next token at every position. Residual
    connections and norms are left out."""
    fig, ax = canvas(15.0, 10.0)
    w, h = 2.8, 0.85  # sublayer boxes

    def chain(x: float, ys: list[float]) -> None:  # arrows up from box to box
        for lo, hi in zip(ys, ys[1:]):
            arrow(ax, (x, lo + h), (x, hi))

    # ---- encoder (left) ------------------------------------------------------------
    ex = 0.8
    mid = ex + w / 2
    text(ax, mid, 0.35, "source: show flights to boston <pad>", 10.5)
    arrow(ax, (mid, 0.55), (mid, 0.95))
    box(ax, ex, 0.95, w, h, "embed · √d + positions", "input", 10)
    box(ax, ex - 0.35, 1.95, w + 2.5, 3.65, "", "neutral")
    text(ax, ex - 0.2, 5.35, "encoder block × N", 10.5, ha="left", color="#444444")
    ys = [0.95, 2.65, 4.05, 6.5]
    box(ax, ex, ys[1], w, h, "self-attention", "compute", 10.5)
    box(ax, ex, ys[2], w, h, "feed-forward", "compute", 10.5)
    box(ax, ex, ys[3], w, h, "memory (S, d)", "output", 10.5)
    chain(mid, ys)
    keep = [[c < n_src - n_pad for c in range(n_src)] for _ in range(n_src)]
    _mask(ax, ex + w + 0.45, 2.6, keep, "padding mask (S, S)")
    text(ax, mid, 8.25, "computed once per source,", 10, color=EDGE["output"])
    text(ax, mid, 7.85, "read by every decoder block", 10, color=EDGE["output"])
    # ---- decoder (right) -----------------------------------------------------------
    dx = 8.6
    mid = dx + w / 2
    text(ax, mid + 0.6, 0.35, "decoder input: <bos> atis_flight toloc…: boston", 10.5)
    arrow(ax, (mid, 0.55), (mid, 0.95))
    box(ax, dx, 0.95, w, h, "embed · √d + positions", "input", 10)
    box(ax, dx - 0.35, 1.95, w + 2.9, 5.05, "", "neutral")
    text(ax, dx - 0.2, 6.75, "decoder block × N", 10.5, ha="left", color="#444444")
    ys = [0.95, 2.65, 4.05, 5.45, 7.55]
    box(ax, dx, ys[1], w, h, "masked self-attention", "compute", 10)
    box(ax, dx, ys[2], w, h, "cross-attention", "compute", 10.5)
    box(ax, dx, ys[3], w, h, "feed-forward", "compute", 10.5)
    box(ax, dx, ys[4], w, h, "linear head + softmax", "weight", 10)
    chain(mid, ys)
    causal = [[c <= r for c in range(n_tgt)] for r in range(n_tgt)]
    _mask(ax, dx + w + 0.45, 2.6, causal, "causal mask (T, T)")
    cross = [[c < n_src - n_pad for c in range(n_src)] for _ in range(n_tgt)]
    _mask(ax, dx + w + 0.45, 3.95 + 0.2, cross, "padding mask (T, S)")
    arrow(ax, (mid, ys[4] + h), (mid, 8.95))
    text(ax, mid + 0.6, 9.3, "predicts: atis_flight toloc…: boston <eos>", 10.5)
    # memory -> cross-attention of every decoder block (keys and values)
    arrow(
        ax,
        (ex + w, ys[0] + 6.5 - 0.95 + h / 2),
        (dx, 4.05 + h / 2),
        color=EDGE["output"],
        connection="arc3,rad=-0.2",
    )
    text(ax, 6.3, 6.6, "keys and values", 10, color=EDGE["output"])
    text(ax, 2.2, 9.3, "mask cells: filled = may attend", 10, color="#444444")
    text(ax, mid + 0.1, 3.8, "queries", 9, ha="left", color="#444444")
    return fig
