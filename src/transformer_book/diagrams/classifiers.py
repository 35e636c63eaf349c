"""Diagrams of the two ways to put an encoder to work (chapter 05): a label for every
token, or one label for the sentence from a [CLS] vector or the mean of the outputs."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, grid, text

__all__ = ["sentence_classification", "token_classification"]

_VEC = 4  # cells drawn per contextual vector h_t
_CELL = 0.24


def _encoder_column(
    ax,
    x0: float,
    tokens: Sequence[str],
    roles: Sequence[str],
    gap: float,
    width: float,
) -> list[tuple[float, float]]:
    """Input tokens (bottom), one encoder box, one vector h_t per token above it.

    Returns the top centre of every h_t, left to right.
    """
    box(ax, x0, 1.2, width, 0.9, "encoder block (padding mask)", "compute", 10.5)
    tops = []
    for t, (tok, role) in enumerate(zip(tokens, roles)):
        cx = x0 + gap / 2 + t * gap
        box(ax, cx - 0.7, 0.2, 1.4, 0.5, tok, role, 10)
        arrow(ax, (cx, 0.7), (cx, 1.2))
        vw = _VEC * _CELL
        grid(
            ax,
            cx - vw / 2,
            2.6,
            1,
            _VEC,
            _CELL,
            "neutral" if role == "neutral" else "output",
        )
        arrow(ax, (cx, 2.1), (cx, 2.6))
        tops.append((cx, 2.6 + _CELL))
    return tops


def token_classification(
    words: Sequence[str] = ("flights", "to", "new", "york"),
    tags: Sequence[str] = ("O", "O", "B-toloc.city", "I-toloc.city"),
) -> Figure:
    """Slot filling: the encoder gives every word a contextual vector h_t, and one
    linear layer, the same at every position, maps each h_t to scores over the tags."""
    if len(words) != len(tags):
        raise ValueError(f"one tag per word: got {len(words)} words, {len(tags)} tags")
    gap = 2.1
    width = gap * len(words)
    fig, ax = canvas(width + 0.6, 5.6)
    tops = _encoder_column(ax, 0.3, words, ["input"] * len(words), gap, width)
    for t, ((cx, top), tag) in enumerate(zip(tops, tags)):
        text(ax, cx + 0.62, top - _CELL / 2, f"$h_{t + 1}$", 11, ha="left")
        box(ax, cx - 0.45, 3.35, 0.9, 0.5, "W, b", "weight", 10)
        arrow(ax, (cx, top), (cx, 3.35))
        box(ax, cx - 0.95, 4.25, 1.9, 0.5, tag, "output", 9.5)
        arrow(ax, (cx, 3.85), (cx, 4.25))
    text(
        ax,
        0.3 + width / 2,
        5.25,
        "one label per token: the same W, b at every position",
        11,
        color=EDGE["neutral"],
    )
    return fig


def sentence_classification(
    words: Sequence[str] = ("cheapest", "fare"), n_pad: int = 1
) -> Figure:
    """Two ways to make one vector of a padded sentence: read the output at a learned
    [CLS] input prepended to the words, or average the outputs of the real tokens
    (the padding left out); either vector goes through one linear layer."""
    gap = 1.75
    pads = ["<pad>"] * n_pad
    left = ["[CLS]", *words, *pads]
    right = [*words, *pads]
    w_left, w_right = gap * len(left), gap * len(right)
    x_right = 0.3 + w_left + 1.0
    fig, ax = canvas(x_right + w_right + 0.3, 6.4)

    roles = ["weight"] + ["input"] * len(words) + ["neutral"] * n_pad
    tops = _encoder_column(ax, 0.3, left, roles, gap, w_left)
    cx, top = tops[0]
    text(ax, cx + 0.62, top - _CELL / 2, r"$h_{\mathrm{[CLS]}}$", 11, ha="left")
    box(ax, cx - 0.8, 3.4, 1.6, 0.6, "the output\nat [CLS]", "compute", 9.5)
    arrow(ax, (cx, top), (cx, 3.4))
    box(ax, cx - 0.45, 4.4, 0.9, 0.5, "W, b", "weight", 10)
    arrow(ax, (cx, 4.0), (cx, 4.4))
    box(ax, cx - 0.9, 5.2, 1.8, 0.5, "intent", "output", 10)
    arrow(ax, (cx, 4.9), (cx, 5.2))
    text(ax, 0.3 + w_left / 2, 6.05, "[CLS] pooling", 12, weight="bold")
    text(
        ax,
        cx + 1.1,
        3.7,
        "[CLS] is a learned input vector;\nattention lets it read every word",
        9.5,
        ha="left",
        color=EDGE["neutral"],
    )

    roles = ["input"] * len(words) + ["neutral"] * n_pad
    tops = _encoder_column(ax, x_right, right, roles, gap, w_right)
    mid = x_right + gap * len(words) / 2
    box(ax, mid - 1.2, 3.4, 2.4, 0.6, "mean over the\nreal tokens", "compute", 9.5)
    for cx, top in tops[: len(words)]:
        arrow(ax, (cx, top), (mid + (cx - mid) * 0.4, 3.4))
    for cx, top in tops[len(words) :]:
        text(ax, cx, top + 0.3, "left out", 9.5, color=EDGE["neutral"])
    box(ax, mid - 0.45, 4.4, 0.9, 0.5, "W, b", "weight", 10)
    arrow(ax, (mid, 4.0), (mid, 4.4))
    box(ax, mid - 0.9, 5.2, 1.8, 0.5, "intent", "output", 10)
    arrow(ax, (mid, 4.9), (mid, 5.2))
    text(ax, x_right + w_right / 2, 6.05, "mean pooling", 12, weight="bold")
    return fig
