"""The three families of transformers side by side (chapter 10): what each stack is,
which positions each token may attend to, what it is trained to do."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, grid, text

__all__ = ["three_families"]


def _pattern(ax, x, y, rows, cols, causal, cell, label, role="input"):
    """An attention pattern: queries down, keys across, a filled cell = may attend."""
    offset = cols - rows  # causal: queries are the last positions (masks.causal_mask)
    allowed = {
        (i, j): role
        for i in range(rows)
        for j in range(cols)
        if not causal or j <= i + offset
    }
    return grid(ax, x, y, rows, cols, cell, "neutral", label, highlight=allowed)


def _stack(ax, x, w, stack_label, out_label, emb_label="embeddings"):
    """Embeddings -> a block repeated N times -> what comes out, bottom to top."""
    box(ax, x, 4.35, w, 0.55, emb_label, "input", 9.5)
    box(ax, x, 5.3, w, 0.95, stack_label, "compute", 9.5)
    box(ax, x, 6.65, w, 0.55, out_label, "output", 9.5)
    for y0, y1 in ((4.9, 5.3), (6.25, 6.65)):
        arrow(ax, (x + w / 2, y0), (x + w / 2, y1))


def three_families() -> Figure:
    """Encoder-only (BERT), encoder–decoder (T5) and decoder-only (GPT): each stack, the
    attention pattern its tokens follow, and its training objective and typical use."""
    width, panel = 15.0, 4.6
    fig, ax = canvas(width, 8.3, scale=0.72)
    xs = [0.2, 0.2 + panel + 0.3, 0.2 + 2 * (panel + 0.3)]
    titles = ("encoder-only (BERT)", "encoder–decoder (T5)", "decoder-only (GPT)")
    for x, title in zip(xs, titles):
        text(ax, x + panel / 2, 7.85, title, 13, weight="bold")
    c = 0.3  # grid cell

    # encoder-only
    x = xs[0]
    _stack(ax, x + 0.5, panel - 1.0, "encoder block × N\nbidirectional self-attention",
           "a vector per token")  # fmt: skip
    _pattern(ax, x + panel / 2 - 3 * c, 1.75, 6, 6, False, c, "")
    text(ax, x + panel / 2, 3.85, "every token sees every token", 9.5)

    # encoder–decoder
    x = xs[1]
    w = panel / 2 - 0.25
    _stack(ax, x + 0.1, w, "encoder × N\nbidirectional", "memory", "source")
    _stack(ax, x + panel / 2 + 0.15, w, "decoder × N\ncausal, then\ncross-attention",
           "next-token logits", "target so far")  # fmt: skip
    arrow(ax, (x + 0.1 + w, 6.8), (x + panel / 2 + 0.15, 5.6), color=EDGE["output"])
    _pattern(ax, x + 0.15, 1.95, 5, 5, False, 0.25, "")
    _pattern(ax, x + 1.7, 2.2, 4, 4, True, 0.25, "", "compute")
    _pattern(ax, x + 3.05, 2.2, 4, 5, False, 0.25, "", "output")
    for gx, label in ((0.775, "encoder"), (2.2, "decoder"), (3.675, "cross")):
        text(ax, x + gx, 3.45, label, 9)
    text(ax, x + panel / 2, 3.85, "source: all; target: the past + all the source", 9.5)

    # decoder-only
    x = xs[2]
    _stack(ax, x + 0.5, panel - 1.0, "decoder block × N\ncausal self-attention",
           "next-token logits")  # fmt: skip
    _pattern(ax, x + panel / 2 - 3 * c, 1.75, 6, 6, True, c, "", "compute")
    text(ax, x + panel / 2, 3.85, "token t sees tokens 1 … t", 9.5)

    footers = (
        ("masked-token prediction (MLM)", "classify, tag, embed, extract"),
        (
            "span corruption: write the hidden spans",
            "translate, summarise, text → text",
        ),
        ("next-token prediction", "generate, chat, complete"),
    )
    for x, (objective, use) in zip(xs, footers):
        text(ax, x + panel / 2, 1.15, f"trained on: {objective}", 9.5)
        text(ax, x + panel / 2, 0.7, f"used to: {use}", 9.5, color=EDGE["neutral"])
    text(ax, width / 2, 0.2, "attention patterns: queries down, keys across, "
         "filled = may attend", 9, color=EDGE["neutral"])  # fmt: skip
    return fig
