"""Chapter 14's committed measurements read back: nanoGPT's throughput beside
:class:`transformer_book.gpt.GPT`'s, and the ablation of the chapter's recipes.

``benchmarks/nanogpt_throughput.py`` times both models on one configuration, taking
turns; :func:`measured_on` says where and when, :func:`throughput` reads its ratios and
their spread over rounds, :func:`code_paths` reads runs on different CPU code paths as
paired rounds. ``benchmarks/shakespeare_ablation.py`` trains a ladder of
recipes over seeds: :func:`ablation_rows` reads one row per variant,
:func:`ablation_notes` and :func:`ablation_table` print them, :func:`ladder_steps`
words each rung against the one before, :func:`clock_noise` and :func:`clock_lines`
measure how noisy its CPU seconds are, and :func:`live_throughput` and
:func:`live_clock` set a chapter's own run (:func:`transformer_book.gpt_training.run`)
beside them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import torch

from . import benchmark, report
from .gpt_training import TrainConfig

__all__ = [
    "half_scores",
    "measured_on",
    "throughput",
    "ablation_rows",
    "ablation_notes",
    "ablation_table",
    "ladder_steps",
    "clock_noise",
    "clock_lines",
    "reruns_ablation",
    "live_clock",
    "live_throughput",
]

MODELS = ("gpt.GPT", "nanoGPT")  # the throughput file's two models, ours first


# the phases of a training step that the throughput benchmark times apart
PHASE_NAMES = {
    "forward_backward": "forward and backward",
    "clip": "gradient clipping",
    "adamw": "the AdamW update",
}


def _check_throughput(bench: dict) -> None:
    needed = {"ratio", "ratio_cpu", "repeats", "per_tensor_loop", "phases"}
    missing = needed - set(bench)
    if missing:
        raise ValueError(
            f"bench must be a committed nanogpt_throughput.json, missing {sorted(missing)}"
        )


def _clock_ratios(bench: dict) -> dict[str, tuple[float, float, float]]:
    """gpt.GPT's tokens per second over nanoGPT's, per clock ("wall", "cpu"): the
    median of the rounds' ratios and its interval, :func:`report.median_ratio`."""
    per = bench["repeats"]
    return {
        clock: report.median_ratio(per[clock][MODELS[0]], per[clock][MODELS[1]])
        for clock in ("wall", "cpu")
    }


def _phase_verdict(paired: dict[str, tuple[float, float, float]]) -> str:
    """What the phases' paired intervals of gpt.GPT's time over nanoGPT's say."""
    slower = [PHASE_NAMES[p] for p, (_, lo, _) in paired.items() if lo > 1]
    faster = [PHASE_NAMES[p] for p, (_, _, hi) in paired.items() if hi < 1]
    if not slower and not faster:
        return (
            "every interval holds 1: the rounds cannot rank the two models in any phase"
        )
    parts = [f"gpt.GPT takes longer in {', '.join(slower)}"] if slower else []
    parts += [f"gpt.GPT takes less time in {', '.join(faster)}"] if faster else []
    held = len(paired) - len(slower) - len(faster)
    rest = "; the other interval holds 1" if held == 1 else "; the others hold 1"
    return "; ".join(parts) + (rest if held else "")


def measured_on(bench: dict) -> str:
    """Where and when the committed throughput ``bench`` was measured, in two lines:
    the date, torch and the thread count; the processor and its cores."""
    _check_throughput(bench)
    n = bench["threads"]
    return (
        f"measured {bench['date'][:10]}, torch {bench['torch']}, {n} thread"
        f"{'s' if n != 1 else ''}\non {bench['machine']['cpu']}, "
        f"{bench['machine']['cores']} cores"
    )


def _more_or_fewer(difference: int) -> str:
    """gpt.GPT's operations per step against nanoGPT's, in words: ``12 more operations
    than nanoGPT's``, ``34 fewer …``, ``as many operations as nanoGPT's``."""
    if difference == 0:
        return "as many operations as nanoGPT's"
    more = "more" if difference > 0 else "fewer"
    return f"{abs(difference):,} {more} operations than nanoGPT's"


def throughput(bench: dict) -> tuple[list[str], dict[str, str]]:
    """The committed throughput ``bench`` (``nanogpt_throughput.json``) read back.

    In each round the two models took their turns back to back, so a round's ratio
    (gpt.GPT's tokens per second over nanoGPT's, or its time over nanoGPT's in a phase)
    leaves out what the machine did in that round: the ratios are read as the median
    of the rounds' ratios with the sign test's interval
    (:func:`transformer_book.report.median_ratio`).

    Returns the lines to print (each model's tokens per wall and per CPU second, the
    parameter tensors and operations per step, the median ratios with their intervals,
    each phase's milliseconds) and, as text for ``report.glue_all``: ``rounds``,
    ``rank`` and ``coverage`` (how many rounds, the interval's rank from each end, the
    probability that it holds the true median); ``ratio``, ``ratio_cpu`` and
    ``loop_ratio`` (wall, CPU, and wall with AdamW as a loop over the tensors), each
    with its interval (the same names with ``_interval``); ``rounds_mult`` (the single
    rounds' range, wall); ``loop_verdict`` (what the loop's interval says);
    ``extra_ops`` (gpt.GPT's operations per step against nanoGPT's: "12 more
    operations than nanoGPT's"), ``our_tensors``, ``their_tensors``; per phase of a
    step, gpt.GPT's time over nanoGPT's, each round timed as the median of its steps
    (``phase_intervals``: ratio and interval per phase), ``phase_verdict`` (where an
    interval holds 1, the rounds cannot rank the models in that phase), ``phase_extra``
    (the milliseconds gpt.GPT spends more, phase by phase, from the medians over all
    steps) and ``phase_sums`` (each model's phases added up, beside its step time from
    the throughput: two passes that should agree).
    """
    _check_throughput(bench)
    ours, theirs = MODELS
    n = len(bench["repeats"]["wall"][ours])
    rank, coverage = report.median_interval_ranks(n)
    paired = _clock_ratios(bench)  # gpt.GPT over nanoGPT: (ratio, low, high)
    paired["loop"] = report.median_ratio(
        *(bench["per_tensor_loop"]["repeats"]["wall"][m] for m in MODELS)
    )
    round_ms = bench["phases"]["rounds"]["ms"]  # model -> phase -> ms, round by round
    phases = {
        p: report.median_ratio(round_ms[ours][p], round_ms[theirs][p])
        for p in PHASE_NAMES
    }  # phase -> gpt.GPT's time over nanoGPT's: (ratio, low, high)
    wall = bench["repeats"]["wall"]
    single = [a / b for a, b in zip(wall[ours], wall[theirs])]
    ms = bench["phases"]["ms"]
    ops, tensors = bench["operations_per_step"], bench["parameter_tensors"]
    lines = [
        f"{name:8s} {bench['tokens_per_s'][name]:8,.0f} tokens/s, "
        f"{bench['tokens_per_cpu_s'][name]:8,.0f} tokens per CPU s"
        for name in MODELS
    ]
    lines.append(
        f"parameter tensors {tensors}; operations per step "
        f"{ops[ours]['foreach']:,} against {ops[theirs]['foreach']:,}"
    )
    lines.append(
        f"{ours} / {theirs}, median of {n} rounds' ratios (95 % interval): "
        + ", ".join(
            f"{what} {r:.3f} ({lo:.3f} to {hi:.3f})"
            for what, (r, lo, hi) in zip(
                ("wall", "CPU", "AdamW as a loop"), paired.values()
            )
        )
    )
    lines.append(
        "time per phase, the same way: "
        + ", ".join(
            f"{PHASE_NAMES[p]} {r:.3f} ({lo:.3f} to {hi:.3f})"
            for p, (r, lo, hi) in phases.items()
        )
    )
    lines.append(
        "ms per step: "
        + ", ".join(
            f"{PHASE_NAMES[p]} {ms[ours][p]:.2f} against {ms[theirs][p]:.2f}"
            for p in PHASE_NAMES
        )
    )
    tokens = bench["config"]["batch_size"] * bench["config"]["context"]
    step_ms = {m: 1e3 * tokens / bench["tokens_per_s"][m] for m in MODELS}
    sums = {m: sum(ms[m].values()) for m in MODELS}
    loop_side = _interval_words(*paired["loop"][1:])
    words = {
        "rounds": str(n),
        "rank": _ordinal(rank),
        "coverage": f"{100 * coverage:.1f} %",
        **{
            name: f"{paired[kind][0]:.3f}"
            for name, kind in (
                ("ratio", "wall"),
                ("ratio_cpu", "cpu"),
                ("loop_ratio", "loop"),
            )
        },
        **{
            f"{name}_interval": f"{paired[kind][1]:.3f} to {paired[kind][2]:.3f}"
            for name, kind in (
                ("ratio", "wall"),
                ("ratio_cpu", "cpu"),
                ("loop_ratio", "loop"),
            )
        },
        "rounds_mult": f"{min(single):.2f} to {max(single):.2f}",
        "loop_verdict": {
            "holds 1": "the interval holds 1: with that optimiser too, the rounds "
            "cannot tell the two models' speeds apart",
            "lies below 1": "the interval lies below 1: with that optimiser gpt.GPT is "
            "the slower",
            "lies above 1": "the interval lies above 1: with that optimiser gpt.GPT is "
            "the faster",
        }[loop_side],
        "extra_ops": _more_or_fewer(ops[ours]["foreach"] - ops[theirs]["foreach"]),
        "our_tensors": str(tensors[ours]),
        "their_tensors": str(tensors[theirs]),
        "phase_intervals": ", ".join(
            f"{PHASE_NAMES[p]} {r:.3f} ({lo:.3f} to {hi:.3f})"
            for p, (r, lo, hi) in phases.items()
        ),
        "phase_verdict": _phase_verdict(phases),
        "phase_extra": ", ".join(
            f"{PHASE_NAMES[p]} {ms[ours][p] - ms[theirs][p]:+.2f} ms"
            for p in PHASE_NAMES
        ),
        "phase_sums": " and ".join(
            f"{sums[m]:.2f} ms against {step_ms[m]:.2f} ms for {m}" for m in MODELS
        ),
    }
    return lines, words


def _ordinal(k: int) -> str:
    """1 -> "1st", 2 -> "2nd", 6 -> "6th", 22 -> "22nd"."""
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}th" if 10 <= k % 100 <= 20 else f"{k}{suffix}"


CLOCKS = {"wall": "wall-clock", "cpu": "CPU-time"}  # a throughput file's two clocks


def _interval_words(low: float, high: float) -> str:
    """Where a ratio's interval lies against 1, in words."""
    if low > 1:
        return "lies above 1"
    if high < 1:
        return "lies below 1"
    return "holds 1"


def code_paths(benches: Sequence[dict]) -> tuple[list[str], dict[str, str]]:
    """Committed throughputs (``nanogpt_throughput*.json``) of the same benchmark, the
    same configuration and nanoGPT's same ``model.py``, run on different CPU code paths,
    read as paired rounds: in each round the two models took their turns back to back,
    so each round's ratio (gpt.GPT's tokens per second over nanoGPT's) leaves out what
    the machine did in that round. Per file and clock (wall, CPU): the median of the
    rounds' ratios and its 95 % interval, which a stalled round cannot stretch
    (:func:`transformer_book.report.median_ratio`), recomputed from the rounds.

    Returns the lines to print and, as text for ``report.glue_all``: ``paths`` (each
    path's ratio and interval on both clocks), ``paths_verdict`` (what the intervals
    say, path by path: both holding 1, the rounds cannot tell the speeds apart),
    ``paths_span`` (over all paths and clocks, from the lowest interval end to the
    highest: "between 0.977 and 1.031"), ``paths_bound`` (the end farthest from 1, as
    how far from equal speed the intervals reach: "3.1 %") and
    ``paths_cost`` (how many tokens per second each path after the first lost or gained
    against the first, both models together)."""
    if not benches:
        raise ValueError("benches must hold at least one committed throughput")
    for bench in benches:
        _check_throughput(bench)
        if "cpu_capability" not in bench["machine"]:
            raise ValueError(
                "bench must record its code path (machine.cpu_capability): measured "
                f"{bench['date'][:10]} before the benchmark recorded it; run it again"
            )
    names = [b["machine"]["cpu_capability"] for b in benches]
    if len(set(names)) != len(names):
        raise ValueError(f"benches must each run on another code path, got {names}")
    same = ("config", "parameters", "nanogpt_model_sha256", "threads", "torch",
            "steps_per_repeat")  # fmt: skip
    for bench in benches[1:]:
        differ = [k for k in same if bench.get(k) != benches[0].get(k)]
        if differ:
            raise ValueError(
                f"benches must measure the same models to compare code paths; "
                f"{bench['machine']['cpu_capability']} differs from {names[0]} in {differ}"
            )
    # path -> clock -> (ratio, low, high)
    rows = {path: _clock_ratios(bench) for path, bench in zip(names, benches)}
    lines = []
    for path, bench in zip(names, benches):
        chosen = ", ".join(
            f"{k}={v}" for k, v in bench["machine"].get("cpu_path_settings", {}).items()
        )
        lines.append(
            f"{path}, {len(bench['repeats']['wall'][MODELS[0]])} rounds "
            f"({chosen or 'no setting: as the chip comes'}):"
        )
        lines += [
            f"  {clock:4s} {r:.4f}, 95 % interval {lo:.4f} to {hi:.4f}"
            for clock, (r, lo, hi) in rows[path].items()
        ]
    paths = "; ".join(
        f"on {path}, {w[0]:.3f} ({w[1]:.3f} to {w[2]:.3f}) by the wall clock and "
        f"{c[0]:.3f} ({c[1]:.3f} to {c[2]:.3f}) by CPU time"
        for path, (w, c) in ((p, (r["wall"], r["cpu"])) for p, r in rows.items())
    )
    sides_of = {  # path -> clock -> where its interval lies against 1
        path: {clock: _interval_words(lo, hi) for clock, (_, lo, hi) in r.items()}
        for path, r in rows.items()
    }
    verdicts = []
    for path, r in rows.items():
        sides = sides_of[path]
        ratio, lo, hi = r["wall"]
        wall = f"wall clock, 95 % interval {lo:.3f} to {hi:.3f}"
        if set(sides.values()) == {"holds 1"}:
            verdicts.append(f"on {path} both intervals hold 1: the rounds cannot tell "
                            "the two models' speeds apart")  # fmt: skip
        elif set(sides.values()) == {"lies below 1"}:
            verdicts.append(f"on {path} both lie below 1: gpt.GPT is the slower, by "
                            f"{100 * (1 - ratio):.1f} % ({wall})")  # fmt: skip
        elif set(sides.values()) == {"lies above 1"}:
            verdicts.append(f"on {path} both lie above 1: gpt.GPT is the faster, by "
                            f"{100 * (ratio - 1):.1f} % ({wall})")  # fmt: skip
        elif "holds 1" not in sides.values():  # one below 1, the other above
            verdicts.append(
                f"on {path} the clocks disagree: the wall-clock interval "
                f"{sides['wall']} and the CPU-time interval {sides['cpu']}: no ranking"
            )
        else:
            clock = next(c for c, side in sides.items() if side != "holds 1")
            other = next(c for c in r if c != clock)
            ratio = r[clock][0]
            verdicts.append(
                f"on {path} the {CLOCKS[clock]} interval {sides[clock]}: by that clock "
                f"gpt.GPT ran {100 * abs(1 - ratio):.1f} % "
                f"{'slower' if ratio < 1 else 'faster'}; the {CLOCKS[other]} interval "
                "holds 1, so one clock resolves the difference and the other does not"
            )
    every_holds = all(set(s.values()) == {"holds 1"} for s in sides_of.values())
    if len(rows) > 1 and every_holds:
        verdicts = [
            f"on {'both code paths' if len(rows) == 2 else 'every code path'} every "
            "interval holds 1: the rounds cannot tell the two models' speeds apart"
        ]
    lowest = min(lo for r in rows.values() for _, lo, _ in r.values())
    highest = max(hi for r in rows.values() for _, _, hi in r.values())

    def both(bench: dict) -> float:  # both models' median tokens per second, added
        return sum(statistics.median(bench["repeats"]["wall"][m]) for m in MODELS)

    cost = [
        f"{100 * abs(1 - both(b) / both(benches[0])):.0f} % "
        f"{'fewer' if both(b) < both(benches[0]) else 'more'} tokens per second on "
        f"{path} than on {names[0]}"
        for path, b in zip(names[1:], benches[1:])
    ]
    return lines, {
        "paths": paths,
        "paths_verdict": "; ".join(verdicts),
        "paths_span": f"between {lowest:.3f} and {highest:.3f}",
        "paths_bound": f"{100 * max(1 - lowest, highest - 1, 0.0):.1f} %",
        "paths_cost": ", ".join(cost) or "one path only",
    }


def ablation_rows(ablation: dict) -> dict[str, dict]:
    """The runs of a committed ``shakespeare_ablation.json``, one row per variant.

    Each row: ``what`` (the change), ``losses`` and ``cpus`` (validation loss and
    training CPU seconds, one per seed), ``cpu`` (their median), and the variant's
    ``steps``, ``lr`` and ``batch``.
    """
    rows = {}
    for name, entry in ablation["variants"].items():
        cpus = [r["train_cpu_seconds"] for r in entry["runs"]]
        rows[name] = dict(
            what=entry["what"],
            losses=[r["val_loss"] for r in entry["runs"]],
            cpus=cpus,
            cpu=statistics.median(cpus),
            steps=entry["config"]["steps"],
            lr=entry["config"]["lr"],
            batch=entry["config"]["batch_size"],
        )
    return rows


def half_scores(
    ablation: dict, names: Sequence[str]
) -> tuple[str, dict[str, tuple[list[float], list[float]]]]:
    """A recipe chosen on one half of the held-out text and read on the other: of the
    variants ``names`` of a committed ``shakespeare_ablation.json``, the one with the
    lowest mean loss on the first half (``val_loss_halves[0]`` of its runs), and for
    every variant its seeds' losses on the first and on the second half."""
    halves = {}
    for name in names:
        if name not in ablation["variants"]:
            raise ValueError(f"no variant {name!r} in the ablation")
        runs = ablation["variants"][name]["runs"]
        if not runs or any("val_loss_halves" not in r for r in runs):
            raise ValueError(f"variant {name!r} has runs without val_loss_halves")
        halves[name] = tuple([r["val_loss_halves"][i] for r in runs] for i in (0, 1))
    chosen = min(halves, key=lambda n: statistics.mean(halves[n][0]))
    return chosen, halves


def ablation_notes(ablation: dict, rows: dict[str, dict]) -> list[str]:
    """Lines that introduce the committed ``ablation``: each row of
    :func:`ablation_rows` with its number of seeds and what it changes, the threads and
    processor of every run, and the file's note (empty if none)."""
    lines = []
    for name, r in rows.items():
        n = len(r["losses"])
        lines.append(f"{name:14s} {n} seed{'s' * (n > 1)}: {r['what']}")
    cpu = ablation.get("machine", {}).get("cpu", "an unnamed processor")
    lines.append(f"{ablation['threads']} thread per run, on {cpu}")
    return lines + [ablation.get("note", "")]


def ablation_table(rows: dict[str, dict]) -> list[str]:
    """The lines of the ablation's table: a header, then per row of
    :func:`ablation_rows` its steps, peak rate, loss mean ± standard deviation
    (min–max) over the seeds (``(one seed)`` for one), and median CPU seconds."""
    lines = [
        f"{'recipe':14s}{'steps':>6s}{'lr':>7s}  val. loss mean ± std (min–max)  CPU s"
    ]
    for name, r in rows.items():
        losses = r["losses"]
        spread = "(one seed)"
        if len(losses) > 1:
            sd = statistics.stdev(losses)
            spread = f"± {sd:.3f} ({min(losses):.3f}–{max(losses):.3f})"
        lines.append(
            f"{name:14s}{r['steps']:6d}{r['lr']:7.0e}  "
            f"{statistics.mean(losses):.3f} {spread:21s} {r['cpu']:5.0f}"
        )
    return lines


def ladder_steps(rows: dict[str, dict], rungs: Sequence[str]) -> dict[str, str]:
    """Each rung of ``rungs`` (names of :func:`ablation_rows`' rows, one change per rung)
    against the rung before it: rung -> "+0.123 nats, <verdict>", the difference of the
    mean losses and :func:`transformer_book.report.compare_seeds`'s words."""
    if len(rungs) < 2 or any(r not in rows for r in rungs):
        raise ValueError(
            f"rungs must name at least two rows of {list(rows)}, got {rungs}"
        )
    said = {}
    for before, after in zip(rungs, rungs[1:]):
        old, new = rows[before]["losses"], rows[after]["losses"]
        gap = statistics.mean(new) - statistics.mean(old)
        said[after] = f"{gap:+.3f} nats, {report.compare_seeds(old, new)}"
    return said


def clock_noise(rows: dict[str, dict]) -> dict:
    """How noisy the ablation's CPU seconds are, read from the file twice.

    ``ms_per_step``: median CPU ms per step of ``nanogpt``, ``nanogpt-short`` and
    ``book-quick``; ``seed_spread``: the largest max/min - 1 of one recipe's seeds;
    ``step_drift``: how much more a step of nanoGPT's model cost in its 800-step rows
    than in its 2,000-step ones (the same model); ``model_gap``: how much more
    ``schedule`` cost than ``nanogpt-short`` (the same model and steps; 0 without a
    ``schedule`` row); ``noise``: the largest of the three, in size;
    ``time_share`` and ``steps_share``: ``book-quick``'s median CPU seconds and its
    steps as shares of ``nanogpt``'s.
    """
    ms = {
        n: 1e3 * rows[n]["cpu"] / rows[n]["steps"]
        for n in ("nanogpt", "nanogpt-short", "book-quick")
    }
    seed_spread = max(
        max(r["cpus"]) / min(r["cpus"]) - 1 for r in rows.values() if len(r["cpus"]) > 1
    )
    step_drift = ms["nanogpt-short"] / ms["nanogpt"] - 1
    # ``schedule`` runs nanoGPT's model for as many steps as ``nanogpt-short``: only
    # the learning rate differs, so its CPU time should too
    model_gap = 0.0
    if "schedule" in rows:
        model_gap = rows["schedule"]["cpu"] / rows["nanogpt-short"]["cpu"] - 1
    return dict(
        ms_per_step=ms,
        seed_spread=seed_spread,
        step_drift=step_drift,
        model_gap=model_gap,
        noise=max(seed_spread, abs(step_drift), abs(model_gap)),
        time_share=rows["book-quick"]["cpu"] / rows["nanogpt"]["cpu"],
        steps_share=rows["book-quick"]["steps"] / rows["nanogpt"]["steps"],
    )


def clock_lines(clock: dict, rows: dict[str, dict], context: int = 64) -> list[str]:
    """Lines of :func:`clock_noise`'s ``clock`` for the ablation's ``rows``: the seeds'
    spread, CPU ms per step, nanoGPT's drift per step, ``book-quick``'s share of
    nanoGPT's CPU time and steps, and the characters each of the two read (windows of
    ``context`` characters)."""
    ms = ", ".join(f"{n} {v:.0f}" for n, v in clock["ms_per_step"].items())
    lines = [
        f"seeds of one recipe differ in CPU time by up to {clock['seed_spread']:.0%}",
        f"CPU ms per step: {ms}",
        f"nanoGPT's model: {clock['step_drift']:+.0%} per step in its 800-step runs",
        f"schedule against nanogpt-short (the same model and steps): "
        f"{clock['model_gap']:+.0%}",
        f"book-quick trains in {clock['time_share']:.0%} of the CPU time of nanoGPT's "
        f"recipe (its steps alone: {clock['steps_share']:.0%})",
    ]
    for name in ("nanogpt", "book-quick"):
        read = rows[name]["steps"] * rows[name]["batch"] * context
        lines.append(f"{name}: {read:,} characters read")
    return lines


def reruns_ablation(config: TrainConfig, ablation: dict, on_cpu: bool,
                    variant: str = "book-quick") -> bool:  # fmt: skip
    """Whether a run of ``config`` (on a CPU when ``on_cpu``) repeats a row's recipe of
    the committed ablation: the variant's settings, seed, logging, device and threads
    apart (the threads change the clock and the last bits of sums, not the recipe)."""
    ignored = ("seed", "log_every", "device", "threads")
    setting = {
        k: v
        for k, v in ablation["variants"][variant]["config"].items()
        if k not in ignored
    }
    return on_cpu and all(getattr(config, k) == v for k, v in setting.items())


def live_clock(result: dict, config: TrainConfig, ablation: dict, name: str,
               device: torch.device, variant: str = "book-quick",
               cpu_name: str | None = None) -> str:  # fmt: skip
    """A sentence that sets a chapter's run (``result`` of :func:`run` for ``config``,
    recipe ``name``, on ``device``) beside the committed ablation: when it repeats the
    ``variant``'s row (:func:`reruns_ablation`) on the processor the table was measured
    on (``cpu_name``, None: this machine's, :func:`benchmark.machine`) and with its
    threads, its CPU seconds against the row's median and nanoGPT's, and its loss
    against the file's for the same seed; on another processor or another number of
    threads, the loss only (their CPU seconds do not compare); otherwise that the
    table's CPU seconds say nothing about it."""
    if not reruns_ablation(config, ablation, device.type == "cpu", variant):
        return (f"This page trained `{name}` on {device}, not in the table's setting, "
                "so the table's CPU seconds say nothing about its run.")  # fmt: skip
    rows = ablation_rows(ablation)
    on_file = {r["seed"]: r for r in ablation["variants"][variant]["runs"]}
    cpu = result["train_cpu_seconds"]
    losses = (
        f"its loss is {result['val_loss']:.3f}, the file's "
        f"{on_file[config.seed]['val_loss']:.3f} for that seed."
    )
    here = benchmark.machine()["cpu"] if cpu_name is None else cpu_name
    there = ablation.get("machine", {}).get("cpu")
    threads = result["threads"]
    if threads != ablation["threads"]:
        return (
            f"This page's run is the table's `{variant}` with seed {config.seed}, on "
            f"{threads} threads where the table's runs had {ablation['threads']}, so "
            f"its {cpu:.0f} CPU s do not compare with the table's; " + losses
        )
    if there is not None and here != there:
        return (
            f"This page's run is the table's `{variant}` with seed {config.seed}, on one "
            f"thread as well, but on another processor ({here}; the table's: {there}), "
            f"so its {cpu:.0f} CPU s do not compare with the table's; " + losses
        )
    return (
        f"This page's run is the table's `{variant}` with seed {config.seed}, on one "
        f"thread as well, at another time. It took {cpu:.0f} CPU s, "
        f"{cpu / rows[variant]['cpu']:.2f} times the table's median for `{variant}` and "
        f"{cpu / rows['nanogpt']['cpu']:.0%} of nanoGPT's recipe on file; " + losses
    )


def live_throughput(result: dict, config: TrainConfig, device: torch.device) -> str:
    """A chapter's own run (``result`` of :func:`transformer_book.gpt_training.run` for
    ``config`` on ``device``) in the throughput file's units: tokens per CPU second on a
    CPU, tokens per wall-clock second elsewhere (where CPU time says little)."""
    tokens = config.steps * config.batch_size * config.context
    if device.type == "cpu":
        live, unit = tokens / result["train_cpu_seconds"], "tokens per CPU s"
    else:
        live, unit = tokens / result["train_wall_seconds"], f"tokens/s on {device}"
    return (
        f"this notebook's run above ({config.d_model} wide, batches of "
        f"{config.batch_size}, {config.threads or 'all'} thread(s)): {live:,.0f} {unit}"
    )
