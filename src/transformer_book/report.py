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
that cell asserts the claim the prose makes about the number. A comparison of runs over
seeds goes into the prose in words that say only what the seeds support
(:func:`compare_seeds`), and so does a speed ratio measured on whatever machine ran
the page (:func:`times_faster`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["glue", "compare_seeds", "mean_spread", "times_faster"]

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


def compare_seeds(
    before: Sequence[float], after: Sequence[float], min_seeds: int = 3
) -> str:
    """How the values of ``after`` compare with those of ``before`` (one per seed), in
    words that claim no more than the seeds show: "lower for every seed" when every
    value of ``after`` lies below every value of ``before``, "higher for every seed"
    the other way round, else "the seeds overlap: no ranking"; with fewer than
    ``min_seeds`` on either side, "fewer than three seeds: no ranking"."""
    if not before or not after:
        raise ValueError(
            f"before and after must hold a value per seed, got {len(before)} and "
            f"{len(after)} values"
        )
    if min(len(before), len(after)) < min_seeds:
        return f"fewer than {_WORDS.get(min_seeds, min_seeds)} seeds: no ranking"
    if max(after) < min(before):
        return "lower for every seed"
    if min(after) > max(before):
        return "higher for every seed"
    return "the seeds overlap: no ranking"


_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def mean_spread(values: Sequence[float], fmt: str = "{:.3f}") -> str:
    """One value per seed in words: "mean ± std (min–max)", each number in ``fmt``
    (the standard deviation of the sample, 0 for a single value)."""
    if not values:
        raise ValueError("values must hold at least one value, got none")
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    mean, low, high = statistics.mean(values), min(values), max(values)
    return (
        f"{fmt.format(mean)} ± {fmt.format(std)} ({fmt.format(low)}–{fmt.format(high)})"
    )


def times_faster(ratio: float) -> str:
    """A time ratio (the other's seconds / these seconds) in words that read true either
    way: ``2.0`` -> "2.0 times faster", ``0.5`` -> "2.0 times slower"."""
    if not ratio > 0:
        raise ValueError(f"ratio must be a positive number of times, got {ratio}")
    return f"{max(ratio, 1 / ratio):.1f} times {'faster' if ratio > 1 else 'slower'}"
