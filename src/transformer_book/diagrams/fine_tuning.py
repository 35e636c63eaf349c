"""Diagram of fine-tuning (chapter 12): one pre-trained encoder, three small heads."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import arrow, box, canvas, text

__all__ = ["three_heads"]

GREY = "#444444"


def _panel(
    ax,
    x0: float,
    tokens: list[str],
    title: str,
    outs: list[str],
    read: list[int],
    head: str = "W",
    head_width: float = 0.0,
):
    step, w = 1.05, 0.95
    text(ax, x0 + len(tokens) * step / 2, 6.55, title, 11.5, weight="bold")
    for i, tok in enumerate(tokens):
        x = x0 + i * step
        box(ax, x, 0.3, w, 0.6, tok, "input", 9)
        arrow(ax, (x + w / 2, 0.95), (x + w / 2, 1.45), color=GREY)
        box(ax, x, 3.0, w, 0.6, f"h{i}", "compute", 9)
        if i in read:
            arrow(ax, (x + w / 2, 3.65), (x + w / 2, 4.35), color=GREY)
    box(
        ax,
        x0,
        1.5,
        len(tokens) * step - (step - w),
        1.2,
        "pre-trained encoder\n(fine-tuned with the head)",
        "weight",
        10,
    )
    for i, label in zip(read, outs):
        x = x0 + i * step
        box(ax, x - 0.05, 4.4, max(w + 0.1, head_width), 0.6, head, "output", 9)
        text(ax, x + w / 2, 5.55, label, 8.5)
        arrow(ax, (x + w / 2, 5.05), (x + w / 2, 5.3), color=GREY)


def three_heads() -> Figure:
    """Sentence classification reads [CLS] through BERT's pooler (a dense layer and
    tanh, pre-trained with NSP) before its own W, token classification reads every word's
    first piece (all-MiniLM-L6-v2's WordPiece cuts "burbank" into three, keeps
    "denver" whole), extractive QA scores every context token as start and end
    (Devlin et al., 2019, figure 4)."""
    fig, ax = canvas(20.8, 7.0, scale=0.62)
    ax.set_ylim(-0.4, 7.0)
    _panel(ax, 0.2, ["[CLS]", "a", "gem", "[SEP]"], "sentence: SST-2", ["P(pos)"], [0],
           head="W · tanh(W_p h0)  (pooler)", head_width=3.1)  # fmt: skip
    _panel(
        ax,
        5.0,
        ["[CLS]", "to", "bu", "##rba", "##nk", "[SEP]"],
        "tokens: ATIS slots",
        ["O", "B-toloc", "ignored", "ignored"],
        [1, 2, 3, 4],
    )
    _panel(
        ax,
        11.9,
        ["[CLS]", "what", "city", "?", "[SEP]", "to", "denver", "[SEP]"],
        "span: question answering",
        ["s5 e5", "s6 e6"],
        [5, 6],
    )
    text(ax, 14.5, -0.05, "question (segment A)", 8.5, color=GREY)
    text(ax, 18.7, -0.05, "context (segment B)", 8.5, color=GREY)
    return fig
