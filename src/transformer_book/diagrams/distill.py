"""Diagrams of distillation (chapter 13): a half-depth student initialised from every
other layer of its teacher, and the two losses it learns from."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._draw import EDGE, arrow, box, canvas, text

__all__ = ["teacher_student"]


def teacher_student(n_teacher: int = 6, keep: tuple[int, ...] = (0, 2, 4)) -> Figure:
    """Teacher (``n_teacher`` layers) and student (the layers ``keep``): the student's
    layers are copies of the kept ones; its logits learn from the teacher's softened
    distribution (KL at temperature T) and from the labels (cross-entropy). Sanh et al.
    (2019), Hinton et al. (2015)."""
    fig, ax = canvas(11.8, 8.4, scale=0.62)
    h, gap, y0 = 0.62, 0.16, 1.2
    tx, sx, w = 0.6, 6.6, 2.6
    box(ax, tx, 0.2, w, 0.7, "embeddings", "input", 10)
    box(ax, sx, 0.2, w, 0.7, "embeddings (copy)", "input", 10)
    arrow(ax, (tx + w, 0.55), (sx, 0.55), color=EDGE["neutral"])
    teacher_y = {}
    for i in range(n_teacher):
        y = y0 + i * (h + gap)
        kept = i in keep
        box(ax, tx, y, w, h, f"layer {i}", "weight" if kept else "neutral", 10)
        teacher_y[i] = y
    for j, i in enumerate(keep):
        y = y0 + j * (h + gap) * n_teacher / len(keep)
        box(ax, sx, y, w, h, f"layer {j} = copy of {i}", "weight", 10)
        arrow(ax, (tx + w, teacher_y[i] + h / 2), (sx, y + h / 2), color=EDGE["weight"])
        last = y
    top = y0 + n_teacher * (h + gap)
    box(ax, tx, top + 0.1, w, 0.7, "teacher logits t", "output", 10)
    box(ax, sx, top + 0.1, w, 0.7, "student logits s", "output", 10)
    arrow(ax, (tx + w / 2, top - gap), (tx + w / 2, top + 0.1))
    arrow(ax, (sx + w / 2, last + h), (sx + w / 2, top + 0.1))
    text(ax, tx + w / 2, top + 1.25, "softmax(t / T)", 11)
    text(ax, sx + w / 2, top + 1.25, "softmax(s / T)", 11)
    kl_x, kl_y = (tx + sx + w) / 2, top + 1.25
    box(ax, kl_x - 0.95, kl_y - 0.33, 1.9, 0.66, "T² · KL", "compute", 11)
    arrow(ax, (tx + w / 2 + 1.0, kl_y), (kl_x - 0.95, kl_y))
    arrow(ax, (sx + w / 2 - 1.0, kl_y), (kl_x + 0.95, kl_y))
    text(ax, sx + w + 0.35, top + 0.45, "CE with\nlabels y", 10, ha="left")
    text(
        ax,
        kl_x,
        y0 - 0.45 + (h + gap) * n_teacher / 2,
        "every other\nlayer",
        10,
        color=EDGE["weight"],
    )
    text(ax, tx + w / 2, top + 2.0, f"teacher ({n_teacher} layers)", 12)
    text(ax, sx + w / 2, top + 2.0, f"student ({len(keep)} layers)", 12)
    return fig
