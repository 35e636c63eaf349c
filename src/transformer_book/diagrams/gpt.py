"""Diagrams of chapter 14: next-token prediction (inputs, targets shifted by one, the
causal mask) and data-parallel training over several processes."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, grid, text

__all__ = ["next_token", "data_parallel"]


def _show(ch: str) -> str:
    return {" ": "␣", "\n": "↵"}.get(ch, ch)


def next_token(window: str = "First Ci") -> Figure:
    """Left: a window of characters read by the model (bottom) and the targets, the same
    characters shifted by one (top); every position predicts the next character. Right:
    the causal mask, True (filled) where a query position may attend to a key position."""
    T = len(window) - 1
    x_chars, y_chars = window[:-1], window[1:]
    cell = 0.62
    fig, ax = canvas(13.2, 5.2, scale=0.72)
    x0 = 1.3
    # inputs, model, targets
    text(ax, 0.15, 0.75, "inputs x", 11, ha="left", color=EDGE["input"])
    text(ax, 0.15, 4.45, "targets y", 11, ha="left", color=EDGE["output"])
    box(ax, x0, 2.05, T * cell + 0.1, 1.1, "GPT: causal self-attention × n_layers",
        role="compute", fontsize=10.5)  # fmt: skip
    for t in range(T):
        cx = x0 + 0.05 + (t + 0.5) * cell
        box(ax, cx - 0.24, 0.5, 0.48, 0.5, _show(x_chars[t]), role="input", fontsize=12)
        box(
            ax, cx - 0.24, 4.2, 0.48, 0.5, _show(y_chars[t]), role="output", fontsize=12
        )
        arrow(ax, (cx, 1.02), (cx, 2.03))
        arrow(ax, (cx, 3.17), (cx, 4.18))
        text(ax, cx, 0.22, str(t + 1), 8.5, color=EDGE["neutral"])
    text(ax, x0 + T * cell / 2, 3.67, "position t predicts character t + 1", 9.5,
         color=EDGE["neutral"], bbox=dict(facecolor="white", edgecolor="none", pad=1))  # fmt: skip
    # the causal mask
    g = 0.36
    gx, gy = 7.6, 1.0
    lower = {(r, c): "compute" for r in range(T) for c in range(r + 1)}
    grid(ax, gx, gy, T, T, cell=g, role="neutral", label="causal mask",
         shape="key position (what is read)", highlight=lower)  # fmt: skip
    text(ax, gx - 0.62, gy + T * g / 2, "query position", 9, rotation=90,
         color="#444444")  # fmt: skip
    for t in range(T):
        text(ax, gx - 0.12, gy + T * g - (t + 0.5) * g, _show(x_chars[t]), 8.5,
             ha="right")  # fmt: skip
    text(ax, gx + T * g + 0.2, gy + T * g * 0.75, "filled: may attend\n(key ≤ query)",
         9, ha="left", color=EDGE["compute"])  # fmt: skip
    text(ax, gx + T * g + 0.2, gy + T * g * 0.25, "empty: the future,\nhidden", 9,
         ha="left", color=EDGE["neutral"])  # fmt: skip
    return fig


def _times(r: int) -> str:
    return {0: "0", 1: "b"}.get(r, f"{r}b")


def data_parallel(n_ranks: int = 3) -> Figure:
    """``n_ranks`` processes, each with a full copy of the model and its own share of
    the batch; after the backward pass the gradients are averaged (all-reduce), so every
    copy takes the same optimiser step."""
    fig, ax = canvas(11.6, 5.4, scale=0.72)
    width, gap = 3.2, 0.5
    x_start = (11.6 - n_ranks * width - (n_ranks - 1) * gap) / 2
    box(ax, x_start, 4.55, n_ranks * width + (n_ranks - 1) * gap, 0.55,
        f"one batch of {n_ranks} × b windows (the same seeded draw on every rank)",
        role="input", fontsize=10.5)  # fmt: skip
    centres = []
    for r in range(n_ranks):
        x = x_start + r * (width + gap)
        cx = x + width / 2
        centres.append(cx)
        share = f"windows {_times(r)} … {_times(r + 1)} − 1"
        arrow(ax, (cx, 4.53), (cx, 4.03), label=share, fontsize=8.5)
        box(ax, x + 0.2, 3.25, width - 0.4, 0.75, f"rank {r}: model copy\nforward, loss",
            role="compute", fontsize=10)  # fmt: skip
        arrow(ax, (cx, 3.23), (cx, 2.6))
        box(ax, x + 0.2, 1.95, width - 0.4, 0.62, "backward: gradients g" + "₀₁₂₃₄₅₆₇"[r],
            role="weight", fontsize=10)  # fmt: skip
        arrow(ax, (cx, 1.93), (cx, 1.33))
        box(ax, x + 0.2, 0.55, width - 0.4, 0.75, "AdamW step with ḡ\n(the same on every rank)",
            role="output", fontsize=9.5)  # fmt: skip
    for a, b in zip(centres, centres[1:]):  # the all-reduce between neighbours
        arrow(ax, (a + width / 2 - 0.15, 2.26), (b - width / 2 + 0.15, 2.26),
              style="<|-|>", color=EDGE["weight"])  # fmt: skip
    text(ax, 11.6 / 2, 0.2, "all-reduce: ḡ = (g₀ + … + g" + "₀₁₂₃₄₅₆₇"[n_ranks - 1]
         + f") / {n_ranks}, the gradient of the whole batch", 10, color=EDGE["weight"])  # fmt: skip
    return fig
