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
(:func:`compare_seeds`, :func:`ranking`: a t-test, not the seeds' ranges alone,
decides), and so does a speed ratio measured on whatever machine ran the page
(:func:`times_faster`). Two arms over seeds in numbers and words (:func:`mean_sd`,
:func:`compared`, :func:`t_words`, :func:`beside`) and two training recipes' settings
in words (:func:`recipe_differences`) are put the same way in every chapter.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = [
    "Glued",
    "GluedAll",
    "glue",
    "glue_all",
    "t_quantile",
    "paired",
    "welch",
    "ahead",
    "ranking",
    "paired_differences",
    "fisher_one_sided",
    "compare_seeds",
    "mean_spread",
    "times_faster",
    "mean_sd",
    "compared",
    "t_words",
    "beside",
    "recipe_differences",
]

# myst-nb's prefix for glued data that the cell does not display
_HIDDEN = "application/papermill.record/"


class Glued(str):
    """The text :func:`glue` stored, a plain ``str`` everywhere but in a notebook's
    output: a cell that ends with a glue call shows nothing, since the value appears
    where the prose cites it (IPython calls ``_ipython_display_`` instead of printing
    the cell's value)."""

    def _ipython_display_(self) -> None:
        return None


class GluedAll(dict):
    """What :func:`glue_all` returns: a plain ``dict`` that shows nothing as a cell's
    value, as :class:`Glued`."""

    def _ipython_display_(self) -> None:
        return None


def glue(name: str, value: Any, fmt: str | None = None) -> str:
    """Store ``value`` (formatted with ``fmt``, e.g. ``"{:.3f}"``) under ``name`` for the
    book's text; return the formatted string (a :class:`Glued`, which a notebook cell
    does not echo). Outside IPython it only formats."""
    if not name.isidentifier():
        raise ValueError(
            f"glue names must be identifiers (letters, digits, _), got {name!r}"
        )
    text = Glued(fmt.format(value) if fmt else str(value))
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


def glue_all(
    values: dict[str, Any], fmt: str | dict[str, str] | None = None
) -> dict[str, str]:
    """:func:`glue` every ``{name: value}`` of ``values``, formatted with ``fmt``: one
    format for all (e.g. ``"{:.2f}"``), or ``{name: format}`` (a name left out, and
    None: ``str``); return ``{name: formatted text}``, in order."""
    if not isinstance(values, dict):
        raise ValueError(f"values must be a dict of name -> value, got {type(values)}")
    fmts = fmt if isinstance(fmt, dict) else dict.fromkeys(values, fmt)
    return GluedAll(
        {name: glue(name, value, fmts.get(name)) for name, value in values.items()}
    )


@functools.lru_cache
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t distribution with ``df`` degrees of freedom
    (p in (0.5, 1); ``df`` need not be whole, as Welch's test gives it): bisection on
    its distribution function, whose density is integrated by Simpson's rule (about
    1e-6 accurate; 4.303 for p = 0.975, df = 2)."""
    if not 0.5 < p < 1:
        raise ValueError(f"p must be in (0.5, 1), got {p}")
    if not df >= 1:
        raise ValueError(f"df must be at least 1, got {df}")
    log_c = (
        math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    )

    def density(x: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))

    def cdf(t: float, n: int = 2000) -> float:  # 0.5 + the integral over [0, t]
        h = t / n
        inner = sum((4 if i % 2 else 2) * density(i * h) for i in range(1, n))
        return 0.5 + h / 3 * (density(0.0) + inner + density(t))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:  # bracket the quantile
        lo, hi = hi, 2 * hi
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def paired(a: Sequence[float], b: Sequence[float]) -> tuple[list[float], float, float]:
    """Per-seed differences a - b (the same seed's runs paired), their mean and the
    mean's standard error sd / sqrt(n)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(
            f"a and b must pair at least two seeds, got {len(a)} and {len(b)} values"
        )
    diffs = [x - y for x, y in zip(a, b)]
    mean = sum(diffs) / len(diffs)
    sd = (sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) ** 0.5
    return diffs, mean, sd / len(diffs) ** 0.5


def median_interval_ranks(n: int, level: float = 0.95) -> tuple[int, float]:
    """The sign test's interval for a median from ``n`` independent values: it runs from
    the k-th smallest value to the k-th largest, k the largest rank with P(X < k) ≤
    (1 - level) / 2 for X ~ Binomial(n, 1/2) (each value lies above the true median with
    probability 1/2, so the true median lies below the k-th smallest only when fewer
    than k values lie below it). Returns ``(k, coverage)``, coverage = 1 - 2 P(X < k),
    at least ``level`` (the binomial moves in steps: 0.983 for n = 22 at 0.95)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be a confidence level in (0, 1), got {level}")
    tail, k = 0.0, 0  # tail: P(X < k + 1) for X ~ Binomial(n, 1/2), added rank by rank
    while True:
        tail += math.comb(n, k) / 2**n
        if tail > (1 - level) / 2:
            break
        k += 1
    if k == 0:
        raise ValueError(
            f"{n} rounds cannot give a {100 * level:g} % interval for the median: even "
            f"the smallest and largest values leave out the median with probability "
            f"{2 / 2**n:.3f}; give more rounds"
        )
    return k, 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def median_ratio(
    a: Sequence[float], b: Sequence[float], level: float = 0.95
) -> tuple[float, float, float]:
    """The ratio a / b when a[i] and b[i] were measured together (in one round of a
    benchmark, or with one seed): the median of the ratios a[i] / b[i] and an interval
    that holds the true median ratio with probability at least ``level`` whatever the
    shape of the noise, provided the rounds are independent: ``(ratio, low, high)``.
    The interval is the sign test's (:func:`median_interval_ranks`): the k-th smallest
    ratio to the k-th largest. A round that stalled (a ratio of 6, say) moves it by one
    rank, where it would widen a t-interval of the mean many times over. ``level`` 0.95
    needs at least 6 rounds."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(
            f"a and b must hold a value per round, at least two, and as many on each "
            f"side; got {len(a)} and {len(b)} values"
        )
    if any(not x > 0 for x in [*a, *b]):
        raise ValueError("a and b must hold positive values (a ratio's two sides)")
    k, _ = median_interval_ranks(len(a), level)
    ratios = sorted(x / y for x, y in zip(a, b))
    return statistics.median(ratios), ratios[k - 1], ratios[len(a) - k]


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """The difference of the means of two independent samples, mean(a) - mean(b), its
    standard error sqrt(s_a²/n_a + s_b²/n_b) and Welch–Satterthwaite's degrees of
    freedom. A sample whose values are all equal (a fixed baseline given once per seed)
    adds no variance: the test becomes the one-sample test of the other."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(
            f"a and b must hold at least two values each, got {len(a)} and {len(b)}"
        )
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    diff = statistics.mean(a) - statistics.mean(b)
    if va + vb == 0:
        return diff, 0.0, float(len(a) + len(b) - 2)
    df = (va + vb) ** 2 / (
        (va**2 / (len(a) - 1) if va else 0.0) + (vb**2 / (len(b) - 1) if vb else 0.0)
    )
    return diff, (va + vb) ** 0.5, df


def ahead(a: Sequence[float], b: Sequence[float], level: float = 0.95,
          pairs: bool = True) -> bool:  # fmt: skip
    """Whether the seeds show ``a`` ahead of (above) ``b``. With ``pairs`` (a[i] and
    b[i] ran with the same seed): every per-seed difference is positive and the mean
    difference exceeds t · SE, t the (1 + level) / 2 quantile of Student's t with n - 1
    degrees of freedom (4.30 for 3 seeds) -- a paired t-test. Without: every value of
    ``a`` lies above every value of ``b`` and Welch's t-test rejects equal means at
    ``level``. Either way two identical arms pass with probability below
    (1 - level) / 2."""
    if pairs:
        diffs, mean, se = paired(a, b)
        every, df = all(d > 0 for d in diffs), len(diffs) - 1
    else:
        mean, se, df = welch(a, b)
        every = min(a) > max(b)
    return every and mean > t_quantile((1 + level) / 2, max(df, 1.0)) * se


def ranking(per_seed: dict[str, Sequence[float]], level: float = 0.95) -> str:
    """Names ordered by their mean over seeds, joined by ">" where the seeds show the
    higher neighbour :func:`ahead` of the lower one, and by "≈" where they do not
    ("not resolved by these seeds", not "equal"). Every list pairs the same seeds."""
    order = sorted(per_seed, key=lambda n: -statistics.mean(per_seed[n]))
    text = order[0]
    for hi, lo in zip(order, order[1:]):
        text += (" > " if ahead(per_seed[hi], per_seed[lo], level) else " ≈ ") + lo
    return text


def paired_differences(a: Sequence[float], b: Sequence[float], label: str) -> str:
    """The per-seed differences a - b (``label`` names them, e.g. "[CLS] minus mean"),
    their mean, and how many standard errors it lies from 0 against the two-sided 5 %
    critical value of the paired t-test (:func:`paired`), in words; both to two
    decimals, so that a statistic just past the threshold does not print as equal."""
    diffs, mean_diff, se = paired(a, b)
    t_stat = mean_diff / se if se > 0 else math.inf
    t_crit = t_quantile(0.975, len(a) - 1)
    return (
        f"{label}, seed by seed: " + ", ".join(f"{d:+.3f}" for d in diffs)
        + f"; mean {mean_diff:+.3f}, {abs(t_stat):.2f} standard errors against "
        f"{t_crit:.2f}"
    )  # fmt: skip


def fisher_one_sided(k_a: int, n_a: int, k_b: int, n_b: int) -> float:
    """Fisher's exact test, one-sided: with ``k_a`` of ``n_a`` runs of arm a and
    ``k_b`` of ``n_b`` of arm b successful, the probability that the ``k_a + k_b``
    successes, dealt out at random over the ``n_a + n_b`` runs, give arm a at least
    ``k_a`` of them."""
    if not (0 <= k_a <= n_a and 0 <= k_b <= n_b):
        raise ValueError(
            f"need 0 <= k <= n for both arms, got {k_a} of {n_a} and {k_b} of {n_b}"
        )
    K, N = k_a + k_b, n_a + n_b
    lopsided = range(k_a, min(K, n_a) + 1)  # successes among arm a's runs
    total = sum(math.comb(n_a, i) * math.comb(n_b, K - i) for i in lopsided)
    return total / math.comb(N, K)


def compare_seeds(
    before: Sequence[float],
    after: Sequence[float],
    min_seeds: int = 3,
    pairs: bool = False,
    level: float = 0.95,
) -> str:
    """How the values of ``after`` compare with those of ``before`` (one per seed), in
    words that claim no more than the seeds show. "lower for every seed" when every
    value of ``after`` lies below every value of ``before`` (with ``pairs``: below its
    own seed's) *and* a t-test at ``level`` puts the difference beyond the seeds'
    spread (:func:`ahead`: Welch's, or paired with ``pairs``); "higher for every seed"
    the other way round. Otherwise no ranking: "the seeds overlap: no ranking", or, when
    every seed lies on one side but the test does not pass, "every seed on one side,
    within the seeds' spread: no ranking" (three seeds a side of two identical arms
    fall apart that way one time in ten: 2 of the 20 equally likely orders). With
    fewer than ``min_seeds`` on either side, "fewer than three seeds: no ranking"."""
    if not before or not after:
        raise ValueError(
            f"before and after must hold a value per seed, got {len(before)} and "
            f"{len(after)} values"
        )
    if pairs and len(before) != len(after):
        raise ValueError(
            f"pairs=True needs one value per seed on both sides, got {len(before)} "
            f"and {len(after)}"
        )
    if min(len(before), len(after)) < min_seeds:
        return f"fewer than {_WORDS.get(min_seeds, min_seeds)} seeds: no ranking"
    if ahead(before, after, level, pairs):
        return "lower for every seed"
    if ahead(after, before, level, pairs):
        return "higher for every seed"
    if pairs:
        diffs = [a - b for a, b in zip(after, before)]
        one_side = all(d < 0 for d in diffs) or all(d > 0 for d in diffs)
    else:
        one_side = max(after) < min(before) or min(after) > max(before)
    if one_side:
        return "every seed on one side, within the seeds' spread: no ranking"
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


def mean_sd(values: Sequence[float]) -> str:
    """One value per seed as "mean ± standard deviation", to 3 decimals
    (:func:`mean_spread` without the range)."""
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def compared(
    before: Sequence[float], after: Sequence[float], pairs: bool = False
) -> tuple[float, float, str]:
    """``after`` against ``before``, one value per seed: the difference of the means,
    the larger of the two standard deviations, and chapter 4's verdict
    (:func:`compare_seeds`: every seed on one side and a t-test at 5 %; Welch's
    unpaired one unless the seed pairs the runs)."""
    d = statistics.mean(after) - statistics.mean(before)
    s = max(statistics.stdev(after), statistics.stdev(before))
    return d, s, compare_seeds(before, after, pairs=pairs)


def t_words(a: Sequence[float], b: Sequence[float], test: str = "Welch's test") -> str:
    """mean(a) - mean(b) in standard errors (:func:`welch`), beside what the t-test at
    95 % needs with these seeds."""
    diff, se, df = welch(a, b)
    need = t_quantile(0.975, max(df, 1.0))
    if se == 0:
        return f"no spread at all: {test} cannot be run"
    return f"{diff / se:.1f} standard errors of the difference, where {test} needs {need:.1f}"


_BESIDE = {  # compare_seeds's answers, with the side compared against named
    "higher for every seed": "above {} for every seed, beyond the seeds' spread",
    "lower for every seed": "below {} for every seed, beyond the seeds' spread",
    "every seed on one side, within the seeds' spread: no ranking": (
        "every seed on one side of {}, but within the seeds' spread: no ranking"
    ),
    "the seeds overlap: no ranking": "the seeds overlap {}: no ranking",
}


def beside(words: str, other: str) -> str:
    """A :func:`compare_seeds` verdict (the seeds against ``other``) that names
    ``other``; other answers unchanged."""
    return _BESIDE[words].format(other) if words in _BESIDE else words


def recipe_differences(before: Any, after: Any, names: dict[str, str]) -> list[str]:
    """The settings of ``names`` ({field: its name in words}, e.g.
    ``pretraining.RECIPE_NAMES``) in which two recipes differ, each as
    "name before → after" (a number in ``:g``, a switch "on" or "off"), in the order of
    ``names``. A recipe is a dict (a checkpoint card's ``recipe``) or a dataclass (a
    config)."""

    def fields(recipe: Any) -> dict:
        is_config = dataclasses.is_dataclass(recipe) and not isinstance(recipe, type)
        return dataclasses.asdict(recipe) if is_config else recipe

    def show(v) -> str:
        return ("on" if v else "off") if isinstance(v, bool) else f"{v:g}"

    before, after = fields(before), fields(after)
    return [
        f"{name} {show(before[k])} → {show(after[k])}"
        for k, name in names.items()
        if before[k] != after[k]
    ]
