"""Diagrams of BERT (chapter 11): the input as a sum of three embeddings, and masked
language modelling with its 80/10/10 rule."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from ._draw import EDGE, FILL, arrow, box, canvas, text

# the drawn diagrams, which tests/test_plotting.py draws without arguments
__all__ = ["input_embeddings", "masked_language_model"]

GREY = "#444444"
# "This teddy bear is so cute." + "It naps." as chapter 11's tokenizer cuts them: the
# full stops are tokens too, and the real vocabulary cuts "naps" in two
PAIR = ("[CLS]", "this", "teddy", "bear", "is", "so", "cute", ".", "[SEP]")
PAIR_B = ("it", "nap", "##s", ".", "[SEP]")


def _cell(ax, x: float, y: float, w: float, h: float, label: str, edge, fill, size=10):
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0.01,rounding_size=0.08",
            linewidth=1.3,
            edgecolor=edge,
            facecolor=fill,
        )
    )
    text(ax, x + w / 2, y + h / 2, label, size)


def input_embeddings() -> Figure:
    """A sentence pair as BERT reads it: every token's input vector is the sum of its
    token embedding, its segment embedding (A or B) and its position embedding, then
    LayerNorm (Devlin et al., 2019, figure 2)."""
    tokens = PAIR + PAIR_B
    n_a = len(PAIR)
    step, w, h = 1.12, 1.0, 0.62
    left = 2.6
    width = left + len(tokens) * step + 0.3
    fig, ax = canvas(width, 6.3, scale=0.72)
    rows = [  # (y, label, cell text, role)
        (4.1, "token\nembeddings", lambda i, t: f"E({t.strip('[]')})", "output"),
        (3.1, "segment\nembeddings", lambda i, t: "E_A" if i < n_a else "E_B", None),
        (2.1, "position\nembeddings", lambda i, t: f"P{i}", "compute"),
    ]
    for i, tok in enumerate(tokens):
        x = left + i * step
        special = tok.startswith("[")
        _cell(
            ax,
            x,
            5.2,
            w,
            h,
            tok,
            EDGE["neutral"] if special else EDGE["input"],
            FILL["neutral"] if special else FILL["input"],
            9.5,
        )
        for y, _, label, role in rows:
            if role is None:  # segment: A in blue, B in orange
                seg = "input" if i < n_a else "weight"
                edge, fill = EDGE[seg], FILL[seg]
            else:
                edge, fill = EDGE[role], FILL[role]
            size = 8 if role == "output" else 8.5  # one size for all E(token)
            _cell(ax, x, y, w, h, label(i, tok), edge, fill, size)
        for y in (3.1 + h + 0.05, 2.1 + h + 0.05):
            text(ax, x + w / 2, y + 0.16, "+", 11, color=GREY)
        arrow(ax, (x + w / 2, 2.05), (x + w / 2, 1.45), color=GREY)
    for y, name, *_ in rows:
        text(ax, left - 0.25, y + h / 2, name, 10, ha="right")
    text(ax, left - 0.25, 5.2 + h / 2, "input\n(WordPiece)", 10, ha="right")
    total = len(tokens) * step - (step - w)
    box(ax, left, 0.55, total, 0.85, "sum, then LayerNorm and dropout  →  encoder")
    brace_y = 6.0
    for lo, hi, name in ((0, n_a, "segment A"), (n_a, len(tokens), "segment B")):
        x0, x1 = left + lo * step, left + (hi - 1) * step + w
        ax.plot(
            [x0, x0, x1, x1],
            [brace_y - 0.08, brace_y, brace_y, brace_y - 0.08],
            color=GREY,
            lw=1,
        )
        text(ax, (x0 + x1) / 2, brace_y + 0.18, name, 10, color=GREY)
    return fig


def masked_language_model() -> Figure:
    """MLM: 15 % of the tokens are selected; a selected token becomes [MASK] (80 %), a
    random token (10 %) or stays (10 %); the model predicts the original token at the
    selected positions only, every other position has label -100 (ignored)."""
    original = ("[CLS]", "this", "teddy", "bear", "is", "so", "cute", ".", "[SEP]")
    inputs = ("[CLS]", "this", "teddy", "[MASK]", "is", "so", "cute", "the", "[SEP]")
    selected = (3, 7)  # "bear" became [MASK], "." a random token
    step, w, h = 1.2, 1.05, 0.6
    left = 1.9
    fig, ax = canvas(left + len(original) * step + 4.6, 6.0, scale=0.72)
    rows = ((5.0, "original"), (3.55, "input"), (0.55, "label"))
    for y, name in rows:
        text(ax, left - 0.25, y + h / 2, name, 10, ha="right")
    for i, (orig, inp) in enumerate(zip(original, inputs)):
        x = left + i * step
        sel = i in selected
        role = "output" if sel else ("neutral" if orig.startswith("[") else "input")
        _cell(ax, x, 5.0, w, h, orig, EDGE[role], FILL[role], 9)
        _cell(ax, x, 3.55, w, h, inp, EDGE[role], FILL[role], 9)
        arrow(
            ax, (x + w / 2, 4.95), (x + w / 2, 4.2), color=EDGE[role] if sel else GREY
        )
        arrow(
            ax, (x + w / 2, 2.45), (x + w / 2, 1.2), color=EDGE[role] if sel else GREY
        )
        label = orig if sel else "-100"
        _cell(ax, x, 0.55, w, h, label, EDGE[role], FILL[role] if sel else "white", 9)
    span = len(original) * step - (step - w)
    box(ax, left, 2.45 - 0.05, span, 0.75, "BERT encoder + MLM head", "compute")
    # the selected positions: what each one became
    text(ax, left + 3 * step + w / 2, 4.55, "selected", 8.5, color=EDGE["output"])
    text(ax, left + 7 * step + w / 2, 4.55, "selected", 8.5, color=EDGE["output"])
    # the 80/10/10 rule, on the right
    rx = left + len(original) * step + 0.5
    text(ax, rx + 1.9, 5.3, "each selected token (15 %)", 10)
    for k, (share, what) in enumerate(
        (
            ("80 %", "becomes [MASK]"),
            ("10 %", "becomes a random token"),
            ("10 %", "stays itself"),
        )
    ):
        y = 4.3 - 0.85 * k
        box(ax, rx, y, 3.9, 0.6, f"{share}: {what}", "output", 9.5)
    text(
        ax,
        rx + 1.95,
        1.55,
        "[CLS], [SEP] and [PAD] are\nnever selected",
        9.5,
        color=GREY,
    )
    text(
        ax,
        rx + 1.95,
        0.75,
        "loss: cross-entropy at the\nselected positions only",
        9.5,
        color=GREY,
    )
    return fig
