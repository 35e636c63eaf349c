"""Chapter 12's few-label experiment read from its committed sweep
(``benchmarks/ch12_few_labels.py``, also read by chapter 13): which head and rate each
arm chose on the selection split, where that rate sits in the grid, the dev table, and
the comparisons between arms put in words that claim no more than the seeds show
(:func:`report.compare_seeds`). The too-large rate's runs and verdicts are
:mod:`large_rate`'s.

A sweep result is the dict the benchmark writes: ``selection_runs[key]`` (one run per
peak rate, seed ``select_seed``), ``chosen[key]["lr"]``, ``final_runs[key]`` (one run
per seed at the chosen rate), ``probe``, ``majority`` and ``longer``, where ``key`` is
``"arm/head"`` (arm ``pre-trained`` or ``scratch``, head ``cls`` or ``mean``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from . import report

__all__ = [
    "HEADS",
    "chosen_head",
    "grid_edge",
    "compare_heads",
    "one_run_against",
    "dev_accuracies",
    "dev_table",
    "sweep_cpu_seconds",
    "comparison_words",
    "live_words",
    "pretraining_verdict",
    "power_words",
]

HEADS = ("cls", "mean")
ARM_NAMES = {
    "pre-trained": "MiniLM pre-trained",
    "scratch": "same architecture, scratch",
}


def _head_name(head: str) -> str:
    return "[CLS]" if head == "cls" else "mean"


def chosen_head(result: dict, arm: str) -> tuple[str, float]:
    """The head and peak rate the sweep chose for ``arm``: of the two heads, the one
    whose run of the select seed at its own chosen rate scored best on the selection
    split (the first head on a tie). Returns (head, rate)."""

    def selection(head: str) -> float:
        lr = result["chosen"][f"{arm}/{head}"]["lr"]
        runs = result["selection_runs"][f"{arm}/{head}"]
        return next(r for r in runs if r["lr"] == lr)["selection_accuracy"]

    head = max(HEADS, key=selection)
    return head, result["chosen"][f"{arm}/{head}"]["lr"]


def grid_edge(result: dict, key: str) -> str:
    """Where the chosen rate of ``key`` sits in the sweep's grid of rates, in words;
    at an edge, whether the selection accuracy points beyond it."""
    lrs = sorted(r["lr"] for r in result["selection_runs"][key])
    acc = {r["lr"]: r["selection_accuracy"] for r in result["selection_runs"][key]}
    falls = all(acc[a] > acc[b] for a, b in zip(lrs, lrs[1:]))
    rises = all(acc[a] < acc[b] for a, b in zip(lrs, lrs[1:]))
    lr = result["chosen"][key]["lr"]
    beyond = ", and the selection accuracy {} at every step up the grid: the best rate "
    if lr == lrs[0]:
        tail = beyond.format("falls") + "may lie below it" if falls else ""
        return "the smallest rate tried" + tail
    if lr == lrs[-1]:
        tail = beyond.format("rises") + "may lie above it" if rises else ""
        return "the largest rate tried" + tail
    return "inside the grid"


def compare_heads(result: dict, head: str) -> dict[str, str]:
    """The pre-trained arm's ``head`` against its other head over the final seeds, on
    each split ("selection", "dev"): :func:`report.compare_seeds`, paired by seed (the
    same seed gives both heads the same start, batches and dropout)."""
    runs = {h: result["final_runs"][f"pre-trained/{h}"] for h in HEADS}
    if [r["seed"] for r in runs["cls"]] != [r["seed"] for r in runs["mean"]]:
        raise ValueError("the two heads' final runs must be the same seeds, in order")
    other = "mean" if head == "cls" else "cls"
    return {
        split: report.compare_seeds(
            [r[f"{split}_accuracy"] for r in runs[other]],
            [r[f"{split}_accuracy"] for r in runs[head]],
            pairs=True,
        )
        for split in ("selection", "dev")
    }


def head_noise(words: dict[str, str], select_seed: int) -> str:
    """:func:`compare_heads`'s verdicts in one sentence: a tie that the select seed
    broke when neither split ranks the heads."""
    if all(w.endswith("no ranking") for w in words.values()):
        each = "; ".join(
            f"{k}: {w.removesuffix(': no ranking')}" for k, w in words.items()
        )
        return (
            f"neither split ranks the two heads ({each}): the choice of head is within "
            f"seed noise, a tie that seed {select_seed} broke"
        )
    return f"selection: {words['selection']}; dev: {words['dev']}"


def one_run_against(value: float, seeds: Sequence[float], arm: str) -> str:
    """One run (one seed) against an arm's seeds, the run taken as a fixed number (a
    one-sample t-test, :func:`report.compare_seeds`), in words."""
    words = report.compare_seeds([value] * len(seeds), seeds)
    side = "below" if value < statistics.mean(seeds) else "above"
    if words in ("higher for every seed", "lower for every seed"):
        return f"{side} every seed of {arm}, beyond their spread"
    if words.startswith("every seed on one side"):
        return f"{side} every seed of {arm}, but within their spread: no ranking"
    return f"inside the range of {arm}'s seeds: no ranking"


def dev_table(result: dict, probe_kind: str) -> dict[str, list[float]]:
    """The sweep's dev accuracies by row: the majority class and the linear probe (one
    value each), then every arm and head (one value per seed)."""
    rows = {
        "majority class": [result["majority"]["dev_accuracy"]],
        f"linear probe, frozen MiniLM ({probe_kind})": [
            result["probe"]["dev_accuracy"]
        ],
    }
    for key, runs in result["final_runs"].items():
        arm, pooling = key.split("/")
        rows[f"{ARM_NAMES[arm]}, {pooling} head"] = [r["dev_accuracy"] for r in runs]
    return rows


def sweep_cpu_seconds(result: dict) -> float:
    """The CPU seconds of every fine-tuning run the sweep made: its selection runs, its
    final runs of the other seeds (the select seed's final run is a selection run)
    and the longer scratch run."""
    select_seed = result["settings"]["select_seed"]
    runs = [r for rs in result["selection_runs"].values() for r in rs]
    runs += [
        r
        for rs in result["final_runs"].values()
        for r in rs
        if r["seed"] != select_seed
    ]
    return sum(r["cpu_seconds"] for r in [*runs, result["longer"]])


def dev_accuracies(result: dict, arm: str, head: str) -> list[float]:
    """The dev accuracy of each seed's final run of ``arm`` with ``head``."""
    return [r["dev_accuracy"] for r in result["final_runs"][f"{arm}/{head}"]]


def comparison_words(result: dict, heads: dict[str, str]) -> dict[str, str]:
    """What chapter 12's prose reads from the sweep's dev table, each as glue text:
    the chosen heads' dev accuracies (``pre_dev``, ``scratch_dev``), the gain of
    pre-training and its t-test (``gain``, ``gain_t``), the probe's verdict
    (``probe_dev``, ``probe_verdict``, ``stands``), the pre-trained arm's other head
    against both scratch heads (``pre_other_head``, ``pre_other_dev``,
    ``other_vs_scratch``), the scratch runs stuck at the majority's accuracy
    (``n_scratch_const``, ``n_scratch_runs``, ``pre_minus_majority``,
    ``scratch_vs_majority``) and the scratch arm trained longer (``longer_epochs``,
    ``longer_head``, ``longer_dev``, ``longer_verdict``). ``heads`` maps each arm to
    its chosen head (:func:`chosen_head`)."""
    dev = {a: dev_accuracies(result, a, heads[a]) for a in heads}
    pre, majority = dev["pre-trained"], result["majority"]["dev_accuracy"]
    probe_dev = result["probe"]["dev_accuracy"]
    probe_gap = statistics.mean(pre) - probe_dev
    probe_fixed = [probe_dev] * len(pre)  # one deterministic fit: a one-sample test
    probe_words = report.compare_seeds(probe_fixed, pre)
    probe_t = report.t_words(pre, probe_fixed, "the one-sample t-test")
    if probe_words == "higher for every seed":
        probe_verdict = (
            f"fine-tuning the encoder adds {probe_gap:.3f} to it, every seed above it "
            f"({probe_t}): training the encoder pays beyond reading it"
        )
    elif probe_words == "lower for every seed":
        probe_verdict = (
            f"the fine-tuned arm stays {-probe_gap:.3f} below it, every seed "
            f"({probe_t}): with this few labels, the convex fit wins"
        )
    else:
        probe_verdict = (
            f"the fine-tuned arm's mean lies {probe_gap:+.3f} from it ("
            f"{report.beside(probe_words, 'the probe')}; {probe_t}): with this few labels, "
            "most of what fine-tuning buys is already in the frozen vectors"
        )
    other = "mean" if heads["pre-trained"] == "cls" else "cls"
    other_pre = dev_accuracies(result, "pre-trained", other)
    other_words = {  # Welch's: the arms start from different weights
        h: report.compare_seeds(dev_accuracies(result, "scratch", h), other_pre)
        for h in HEADS
    }
    if all(w == "higher for every seed" for w in other_words.values()):
        other_vs_scratch = (
            "above each scratch head for every seed, beyond the seeds' spread"
        )
    else:
        each = (f"against the scratch {h} head: {w}" for h, w in other_words.items())
        other_vs_scratch = "; ".join(each)
    scratch_all = [
        r for h in HEADS for r in result["final_runs"].get(f"scratch/{h}", [])
    ]
    longer = result["longer"]
    scratch_vs = report.compare_seeds([majority] * len(dev["scratch"]), dev["scratch"])
    return {
        "pre_dev": report.mean_spread(pre),
        "scratch_dev": report.mean_spread(dev["scratch"]),
        "gain": f"{statistics.mean(pre) - statistics.mean(dev['scratch']):.3f}",
        "gain_t": report.t_words(pre, dev["scratch"]),
        "probe_dev": f"{probe_dev:.3f}",
        "probe_verdict": probe_verdict,
        "stands": "above the majority class"
        + (
            " and above the probe"
            if probe_words == "higher for every seed"
            else " (against the probe: no ranking)"
        ),
        "pre_other_head": _head_name(other),
        "pre_other_dev": report.mean_spread(other_pre),
        "other_vs_scratch": other_vs_scratch,
        "n_scratch_const": str(
            sum(math.isclose(r["dev_accuracy"], majority) for r in scratch_all)
        ),
        "n_scratch_runs": str(len(scratch_all)),
        "pre_minus_majority": f"{statistics.mean(pre) - majority:.3f}",
        "scratch_vs_majority": report.beside(scratch_vs, "the majority"),
        "longer_epochs": str(longer["epochs"]),
        "longer_head": _head_name(longer["pooling"]),
        "longer_dev": f"{longer['dev_accuracy']:.3f}",
        "longer_verdict": one_run_against(
            longer["dev_accuracy"], pre, "the pre-trained arm"
        ),
    }


def live_words(
    acc: dict[str, list[float]],
    majority: float,
    seeds: Sequence[int],
    steps: int,
    epochs: int,
    sweep_epochs: int,
) -> dict[str, str]:
    """The page's live runs in words, as glue text: ``live_plan`` (which seeds of which
    arms, ``steps`` updates of ``epochs`` epochs beside the sweep's ``sweep_epochs``)
    and ``live_story`` (the first seed's accuracy, ``acc[arm]`` one per seed, against
    the ``majority`` class's on the same sentences, and the scratch arm's if it ran)."""
    if epochs == sweep_epochs:
        as_sweep = f"{steps} updates, as in the sweep"
    else:
        as_sweep = f"{steps} updates ({epochs} epochs; the sweep trains {sweep_epochs})"
    if list(acc) == ["pre-trained"]:
        plan = (
            f"seed {seeds[0]} of the pre-trained arm only, {as_sweep} (the full "
            "profile runs every seed of both arms)"
        )
    else:
        plan = f"every seed of both arms ({', '.join(map(str, seeds))}), {as_sweep}"
    story = (
        f"Seed {seeds[0]} of the pre-trained arm scored {acc['pre-trained'][0]:.3f} on "
        f"those sentences, against {majority:.3f} for the majority class there "
        "(asserted more than 0.1 above it)"
    )
    if "scratch" in acc:
        story += (
            f", and {acc['scratch'][0]:.3f} from scratch (every seed's pre-trained run "
            "above its scratch run, asserted)"
        )
    return {"live_plan": plan, "live_story": story}


def pretraining_verdict(pre: Sequence[float], scratch: Sequence[float]) -> str:
    """What pre-training pays (the pre-trained arm's seeds against the scratch arm's,
    Welch's test), in words: a ranking only when :func:`report.compare_seeds` gives
    one."""
    gain = statistics.mean(pre) - statistics.mean(scratch)
    words, t = report.compare_seeds(scratch, pre), report.t_words(pre, scratch)
    if words == "higher for every seed":
        return f"pre-training pays {gain:.3f}, higher for every seed ({t})"
    if words.startswith("every seed on one side") and gain > 0:
        return (
            "these seeds do not rank the arms: every pre-trained seed lies above every "
            f"scratch seed, but the gain, {gain:.3f}, is {t}, within the seeds' spread"
        )
    return f"no clear gain from pre-training ({gain:+.3f}; {words}; {t})"


def power_words(
    pre: Sequence[float], scratch: Sequence[float], delta: float = 0.01
) -> dict[str, str]:
    """How far these seeds are from resolving pre-trained against scratch, as glue
    text: the difference of the means in standard errors (``own_se``) beside what
    Welch's test needs at 95 % (``own_t``) with these seeds' degrees of freedom
    (``own_df``); the pre-trained seeds' standard deviation (``own_sd``) and the runs
    per arm a difference of ``delta`` would need at that spread (``runs_needed``:
    two-sided 5 %, 80 % power, n = 2 (sd / delta)² (z_0.975 + z_0.8)²)."""
    diff, se, df = report.welch(pre, scratch)
    sd = statistics.stdev(pre)
    return {
        "own_se": f"{diff / se:.1f}",
        "own_t": f"{report.t_quantile(0.975, df):.2f}",
        "own_df": f"{df:.1f}",
        "own_sd": f"{sd:.3f}",
        "runs_needed": f"{2 * (sd / delta) ** 2 * (1.96 + 0.84) ** 2:.0f}",
    }
