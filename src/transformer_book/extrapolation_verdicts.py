"""Chapter 4's length experiment read back: what accuracies over seeds support.

:mod:`transformer_book.extrapolation` trains the schemes and returns, per run and task,
``{test length: [accuracy per seed]}``; this module reads those lists. :func:`spread`
gives (mean, min, max), :func:`spread_text` the same in words; :func:`verdict` says
whether a scheme keeps what it learned at the longer length (:data:`RULES` says each
verdict in words); :func:`results_table` and :func:`plot_accuracies` show every run,
:func:`verdicts_table` the verdicts. Rankings
compare the schemes seed by seed with the paired test of :func:`report.ahead`:
:func:`by_mean` orders them, :func:`neighbour_lines` prints the neighbours' differences,
:func:`resolved_beyond` finds the pairs the same test resolves beyond neighbours and
:func:`pairs_in_words` says them; :func:`drop_gaps` compares one scheme's drop from the
training length with others', seed by seed. The sentences the chapter quotes for a
verdict that a few seeds decide are :data:`DROP_WORDS` and :data:`MAX_DISTANCE_WORDS`.

Floor 4: it reads what ``extrapolation`` returns; it draws with ``plotting``.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from transformer_book import plotting, report

__all__ = [
    "spread",
    "RULES",
    "verdict",
    "by_mean",
    "resolved_beyond",
    "pairs_in_words",
    "spread_text",
    "results_table",
    "plot_accuracies",
    "verdicts_table",
    "neighbour_lines",
    "drop_gaps",
    "DROP_WORDS",
    "MAX_DISTANCE_WORDS",
]


def spread(values: list[float | None]) -> tuple[float, float, float] | None:
    """(mean, min, max) over seeds, or None where a model could not run."""
    if not values:
        raise ValueError("values must hold at least one accuracy, got an empty list")
    if any(v is None for v in values):
        return None
    return sum(values) / len(values), min(values), max(values)


# what each verdict of :func:`verdict` says, in words for the prose (lengths 32 and 64;
# the accuracy "at length 64" is the one on its new positions 32-63)
RULES = {
    "keeps it": "every seed keeps at least 90 % of its accuracy on positions 32–63",
    "loses it": "no seed keeps 90 % of its accuracy on positions 32–63",
    "mixed": "some seeds keep 90 % of their accuracy on positions 32–63, some do not",
    "not learned": "a seed stays below 0.8 already at length 32, so the rule does "
    "not count the task as learned",
    "cannot run": "the model cannot run at length 64",
}


def verdict(short: list[float], long: list[float | None], learned: float = 0.8) -> str:
    """The rule of chapter 4 for accuracies per seed at the training length (``short``)
    and at the longer one (``long``): "not learned" when a seed stays below
    ``learned``; else "cannot run", "keeps it" (every seed keeps 90 %), "loses it"
    (none does) or "mixed"."""
    if len(short) != len(long):
        raise ValueError(f"short and long must pair seeds: {len(short)} != {len(long)}")
    if min(short) < learned:
        return "not learned"
    if any(b is None for b in long):
        return "cannot run"
    kept = [b >= 0.9 * a for a, b in zip(short, long)]
    return "keeps it" if all(kept) else "loses it" if not any(kept) else "mixed"


def by_mean(per_seed: dict[str, list[float]]) -> list[str]:
    """The names of ``per_seed`` (one accuracy per seed each) by falling mean, as
    :func:`report.ranking` orders them."""
    return sorted(per_seed, key=lambda name: -spread(per_seed[name])[0])


def resolved_beyond(per_seed: dict[str, list[float]]) -> list[tuple[str, str]]:
    """The pairs that are not neighbours in the ranking by mean, with a "≈" between
    them, that the same paired test (:func:`report.ahead`) resolves: what a chain of
    "≈" leaves open (the ranking's own ">"s chain the others). Every list pairs the
    same seeds. Returns (higher, lower) pairs, in the ranking's order."""
    order = by_mean(per_seed)
    ahead = lambda a, b: report.ahead(per_seed[a], per_seed[b])  # noqa: E731
    links = [ahead(hi, lo) for hi, lo in zip(order, order[1:])]  # ">" or "≈"
    return [
        (order[i], order[j])
        for i in range(len(order))
        for j in range(i + 2, len(order))
        if not all(links[i:j]) and ahead(order[i], order[j])
    ]


def pairs_in_words(pairs: list[tuple[str, str]]) -> str:
    """Pairs in words: "a > b, c > d and e > f"; "no further pair" for none."""
    text = [f"{a} > {b}" for a, b in pairs]
    if len(text) > 1:
        return ", ".join(text[:-1]) + " and " + text[-1]
    return text[0] if text else "no further pair"


def _shown(name: str, train_len: int) -> str:
    """A run's name in tables: the T5 bias runs with max_distance = the training
    length, not T5's default 128, so say so."""
    return f"T5 bias, max_dist {train_len}" if name == "T5 bias" else name


def spread_text(values: list[float | None]) -> str:
    """:func:`spread` in words, "mean (min–max)" to two decimals; "n/a" where a model
    could not run."""
    s = spread(values)
    return "n/a" if s is None else f"{s[0]:.2f} ({s[1]:.2f}–{s[2]:.2f})"


def _cell(values: list[float | None]) -> str:
    return (
        f"{spread_text(values):^16s}" if spread(values) is None else spread_text(values)
    )


def _lengths(results: dict) -> tuple[int, int]:
    lengths = sorted(next(iter(results.values())))
    if len(lengths) != 2:
        raise ValueError(f"results must hold two test lengths, got {lengths}")
    return lengths[0], lengths[1]


def results_table(results: dict, names: Sequence[str]) -> str:
    """Every run of ``names`` (rows) on every task (columns, at the training length
    and on the new positions of the longer one): mean (min–max) over the seeds, "n/a"
    where the model cannot run, "-" where the run was not trained on that task.
    ``results`` is ``{(name, task): {length: [accuracy per seed]}}`` with two lengths,
    the shorter one the training length."""
    L1, L2 = _lengths(results)
    tasks = list(dict.fromkeys(task for _, task in results))
    header = [f"{task.split()[-1] + ' @' + str(L):16s}"
              for task in tasks for L in (L1, f"{L2}*")]  # fmt: skip
    lines = [f"{'scheme':20s}| " + " | ".join(header)]
    for name in names:
        row = [_cell(results[name, t][L]) if (name, t) in results else f"{'-':^16s}"
               for t in tasks for L in (L1, L2)]  # fmt: skip
        lines.append(f"{_shown(name, L1):20s}| " + " | ".join(row))
    return "\n".join(lines)


def plot_accuracies(results: dict, names: Sequence[str], chance: dict) -> Figure:
    """Chapter 4's bar chart: per task (``chance`` maps each to the best constant
    guess's accuracy on the new positions), the runs of ``names`` trained on it, at the
    training length and on the new positions of the longer one (mean bars, min–max
    error bars). ``results`` as in :func:`results_table`."""
    L1, L2 = _lengths(results)
    per_task = {t: [n for n in names if (n, t) in results] for t in chance}
    n_seeds = len(next(iter(results.values()))[L1])
    widths = [len(n) for n in per_task.values()]
    fig, axes = plt.subplots(1, len(chance), figsize=plotting.WIDE, sharey=True,
                             gridspec_kw={"width_ratios": widths})  # fmt: skip
    label = {L1: f"test length {L1}", L2: f"length {L2}, positions {L1}–{L2 - 1}"}
    for ax, (task, task_names) in zip(axes, per_task.items()):
        series = {label[L]: [spread(results[n, task][L]) for n in task_names]
                  for L in (L1, L2)}  # fmt: skip
        title = f"{task} (trained at length {L1}, {n_seeds} seeds)"
        plotting.spread_bars([_shown(n, L1) for n in task_names], series, ax,
                             missing=f"n/a: max_len {L1}", title=title)  # fmt: skip
        ax.axhline(chance[task], color="black", ls="--", lw=1,
                   label=f"best constant guess (positions {L1}–{L2 - 1})")  # fmt: skip
    axes[0].set_ylabel("accuracy (mean, min–max)")
    axes[0].set_ylim(0, 1.19)
    axes[0].legend(loc="upper left", ncol=3, fontsize=9)
    fig.tight_layout()
    return fig


def verdicts_table(verdicts: dict[tuple[str, str], str]) -> str:
    """Per task, the runs of each verdict of :data:`RULES` (``verdicts`` maps
    (name, task) to :func:`verdict`'s answer), one line per task and verdict."""
    unknown = set(verdicts.values()) - set(RULES)
    if unknown:
        raise ValueError(f"verdicts must be among {list(RULES)}, got {sorted(unknown)}")
    order = ("keeps it", "loses it", "mixed", "cannot run", "not learned")
    lines = []
    for task in dict.fromkeys(t for _, t in verdicts):
        for name in order:
            which = [s for s, t in verdicts if t == task and verdicts[s, t] == name]
            lines.append(f"{task:11s} {name:12s}: {which}")
    return "\n".join(lines)


def neighbour_lines(per_seed: dict[str, list[float]]) -> str:
    """The neighbours of :func:`by_mean`'s order, each pair's per-seed differences,
    their mean, standard error and mean/SE (:func:`report.paired`), one line each."""
    order = by_mean(per_seed)
    lines = []
    for hi, lo in zip(order, order[1:]):
        diffs, mean, se = report.paired(per_seed[hi], per_seed[lo])
        per_seed_text = ", ".join(f"{x:+.3f}" for x in diffs)
        lines.append(
            f"  {hi:10s} - {lo:10s}: per seed {per_seed_text}; mean {mean:+.3f} "
            f"(SE {se:.3f}, mean/SE {mean / se:5.1f})"
        )
    return "\n".join(lines)


def drop_gaps(
    per_length: dict[str, dict[int, list[float]]], of: str, lengths: tuple[int, int]
) -> dict[str, list[float]]:
    """Scheme ``of``'s drop in accuracy from the first length of ``lengths`` to the
    second, minus every other scheme's, seed by seed: {other: [gap per seed]}.
    ``per_length`` maps each scheme to {length: [accuracy per seed]}."""
    if of not in per_length:
        raise ValueError(f"of must be one of {list(per_length)}, got {of!r}")
    short, long = lengths
    drop = {
        s: [a - b for a, b in zip(r[short], r[long])] for s, r in per_length.items()
    }
    return {s: [x - y for x, y in zip(drop[of], d)] for s, d in drop.items() if s != of}


# RoPE's drop on *last marker* against the other relative schemes', in words: whether
# it is larger in every seed (chapter 4 quotes it; a few hundredths decide it)
DROP_WORDS = {
    True: "and it is larger than theirs in every seed",
    False: "though not in every seed, so the seeds do not resolve it",
}
# whether the paired rule finds T5 with max_distance 128 behind max_distance 32 on copy
MAX_DISTANCE_WORDS = {
    True: "the paired rule resolves the difference: with these seeds, the larger "
    "`max_distance` costs accuracy on the new positions",
    False: "the paired rule does not resolve the difference: the seeds spread too "
    "widely to say that the larger `max_distance` costs accuracy, or that it does not",
}
