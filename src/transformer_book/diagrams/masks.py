"""Diagrams of attention masks: which keys each query may see (chapters 07-08)."""

from __future__ import annotations

from matplotlib.figure import Figure

from .. import masks
from ._draw import canvas, grid, text

__all__ = ["sparse_patterns"]


def sparse_patterns(T: int = 10, window: int = 3, global_positions=(0,)) -> Figure:
    """Three (T, T) masks side by side, queries down and keys across: full causal
    attention, a causal sliding window, and a two-sided window with global tokens
    (Longformer). A filled cell is a score that is computed."""
    panels = [
        ("full causal", masks.causal_mask(T), f"{T * (T + 1) // 2} scores"),
        (
            f"sliding window, w = {window}",
            masks.sliding_window_mask(T, window=window),
            None,
        ),
        (
            "two-sided window + global",
            masks.with_global_tokens(
                masks.sliding_window_mask(T, window=window, causal=False),
                list(global_positions),
            ),
            None,
        ),
    ]
    c = 0.3  # cell size
    side = T * c
    gap = 1.3
    fig, ax = canvas(3 * side + 2 * gap + 1.0, side + 1.7)
    glob = ", ".join(map(str, global_positions))
    for n, (title, mask, note) in enumerate(panels):
        x0, y0 = 0.6 + n * (side + gap), 0.95
        hi = {}
        for i in range(T):
            for j in range(T):
                if mask[i, j]:
                    is_global = i in global_positions or j in global_positions
                    hi[i, j] = "output" if (n == 2 and is_global) else "input"
        grid(ax, x0, y0, T, T, c, "neutral", title, highlight=hi)
        text(ax, x0 + side / 2, y0 - 0.2, "keys →", 9)
        note = note or f"{int(mask.sum())} scores"
        if n == 2:
            note += f"; global token: {glob}"
        text(ax, x0 + side / 2, y0 - 0.55, note, 9, color="#444444")
        text(ax, x0 - 0.25, y0 + side / 2, "queries ↓", 9, rotation=90)
    return fig
