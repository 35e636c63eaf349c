"""Putting executed numbers into the prose: ``glue`` a value in a cell, cite it in text.

A chapter that says "the model reaches 0.93 span F1" must take 0.93 from the cell
that computed it, or the prose and the edition drift apart. In the cell::

    report.glue("slot_f1", f1, "{:.2f}")

and in a markdown cell of the same notebook, the MyST role::

    {glue:text}`slot_f1`

The value is stored the way myst-nb's own ``glue`` stores it, so Jupyter Book pastes it into the
page; this module needs no myst-nb at run time (Colab and laptops lack it).

A glued number that depends on the machine (a trained model's accuracy, a timing) is
glued in a cell whose output nbval does not compare (tag ``nbval-ignore-output``), and
that cell asserts the claim the prose makes about the number.
"""

from __future__ import annotations

from typing import Any

__all__ = ["glue"]

# myst-nb's prefix for glued data that the cell does not display
_HIDDEN = "application/papermill.record/"


def glue(name: str, value: Any, fmt: str | None = None) -> str:
    """Store ``value`` (formatted with ``fmt``, e.g. ``"{:.3f}"``) under ``name`` for the
    book's text; return the formatted string. Outside IPython it only formats."""
    if not name.isidentifier():
        raise ValueError(
            f"glue names must be identifiers (letters, digits, _), got {name!r}"
        )
    text = fmt.format(value) if fmt else str(value)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with Jupyter
        return text
    if get_ipython() is None:
        return text
    display(
        {_HIDDEN + "text/plain": text},
        raw=True,
        metadata={"scrapbook": {"name": name, "mime_prefix": _HIDDEN}},
    )
    return text
