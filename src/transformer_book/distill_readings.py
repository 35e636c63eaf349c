"""Chapter 13's comparison of students, read back from the committed results of
``benchmarks/ch13_distillation.py`` (a fine-tuned teacher and a probe teacher): each
arm's test accuracies per seed at its chosen setting (:func:`seed_tests`,
:func:`best_setting`, :func:`arm_tests`), the verdicts the prose reads as glue text
(:func:`comparison_words`) and the figure of the students (:func:`students_figure`).
The distillation itself is :mod:`transformer_book.distill`.

Floor 6 (a chapter experiment): it reads results and words them with ``report``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import torch

from . import report

__all__ = [
    "seed_tests",
    "settings_tried",
    "best_setting",
    "arm_tests",
    "comparison_words",
    "students_figure",
]


# Chapter 13's comparison, read back from benchmarks/ch13_distillation.py's committed
# result: ``runs`` (one per setting and seed, with its ``config``, ``dev`` and ``test``
# accuracy), ``mean_dev`` (setting -> mean dev accuracy over the seeds), ``chosen``
# (arm -> its setting of the best mean dev accuracy), ``teacher``, ``copies`` (a copy
# of the teacher's layers, before training -> its dev and test accuracy). A setting
# is named ``arm:lr[:T][@updates]``.


def seed_tests(result: dict, config: str) -> list[float]:
    """The test accuracy of every seed's run of the setting ``config``."""
    return [r["test"] for r in result["runs"] if r["config"] == config]


def settings_tried(result: dict, arm: str) -> list[str]:
    """The settings of ``arm`` the benchmark ran, sorted by name."""
    return sorted(k for k in result["mean_dev"] if k.split(":")[0] == arm)


def best_setting(result: dict, arm: str, updates: int) -> str:
    """``arm``'s setting of the best mean dev accuracy among those trained for
    ``updates`` updates (named ``...@updates``)."""
    tried = [k for k in settings_tried(result, arm) if k.endswith(f"@{updates}")]
    return max(tried, key=result["mean_dev"].get)


def _argmax_reading(verdict: str) -> str:
    if verdict.endswith("no ranking"):
        return (
            "Three seeds do not tell the soft targets from the teacher's argmax on the "
            "same texts: how much of the gain is the probabilities, beyond the answers "
            "themselves, this experiment does not resolve"
        )
    if verdict == "higher for every seed":
        return (
            "The probabilities add to the answers: on the same texts, the soft targets "
            "teach more than the teacher's argmax does"
        )
    return "Here the teacher's argmax teaches more than its probabilities on the same texts"


def _probe_reading(chosen: str, matched: str) -> str:
    no_ranking = [v.endswith("no ranking") for v in (chosen, matched)]
    if all(no_ranking):
        return (
            "Neither at the chosen settings nor at 300 updates each does the test rank "
            "its soft targets against the labels: a teacher that knows little more than "
            "the student can learn from the labels themselves passes on nothing three "
            "seeds can see (a gain of a point or two could hide in spreads this size)"
        )
    if "higher for every seed" in (chosen, matched):
        return (
            "Even this teacher passes something on: its soft targets beat the labels at "
            "one of the two comparisons, though by less than the fine-tuned teacher's"
        )
    if matched == "lower for every seed" and no_ranking[0]:
        return (
            "At the chosen settings the test does not rank its soft targets against the "
            "labels, and at 300 updates each they do worse, on every seed and by the "
            "t-test: a teacher that knows little more than the labels passes on nothing "
            "measurable here, and imitating it cost the student some of what the labels "
            "teach"
        )
    return "Its soft targets do worse than the labels here"


def _settings_words(settings: Mapping[str, str]) -> str:
    """{"hard": "hard:0.0003@300", "soft": "soft:0.0003:2@300"} as "the labels at
    lr 3e-4, the soft targets at 3e-4 and T = 2"."""
    hard = settings["hard"].split("@")[0].split(":")
    soft = settings["soft"].split("@")[0].split(":")
    return (
        f"the labels at lr {float(hard[1]):.0e}, the soft targets at "
        f"{float(soft[1]):.0e} and T = {soft[2]}"
    ).replace("e-0", "e-")


def comparison_words(
    results: dict[str, dict], keep: Sequence[int], n_test: int
) -> dict[str, str]:
    """What chapter 13's prose reads from the committed comparison of its two teachers
    (``results``: ``"fine-tuned"`` and ``"probe"`` -> a result), each as glue text,
    named with the teacher's prefix ``ft_`` or ``pr_``: every arm's test accuracy at
    its chosen setting (``<prefix><arm>``, :func:`report.mean_sd`) and at 300 updates
    (``<prefix>hard300``, ``<prefix>soft300``), the soft targets and the teacher's
    argmax against the labels (``<prefix><arm>_diff``, ``_sd``, ``_verdict``:
    :func:`report.compared`, unpaired), the teachers' test accuracies; for the fine-tuned
    teacher the soft targets against its argmax, paired by seed (``soft_vs_argmax``,
    ``_sd``, ``_verdict``, ``argmax_reading``) and the gain in test sentences of
    ``n_test`` (``gain_sentences``); for the probe teacher the comparison at 300
    updates (``pr_matched_diff``, ``_sd``, ``_verdict``, ``pr_reading``); and the
    copies before training (``tr_best_copy`` of the best dev accuracy, on dev and
    test, the copy of layers ``keep``); ``<prefix>settings300``, the settings dev chose
    at 300 updates, in words."""
    words: dict[str, str] = {}
    short = {"fine-tuned": "ft", "probe": "pr"}
    for name, kd in results.items():
        pre = short[name]
        tests = {
            a: seed_tests(kd, kd["chosen"][a]) for a in ("hard", "teacher_hard", "soft")
        }
        for arm, accs in tests.items():
            words[f"{pre}_{arm}"] = report.mean_sd(accs)
        for arm in ("soft", "teacher_hard"):  # other texts than the labels: unpaired
            d, s, verdict = report.compared(tests["hard"], tests[arm])
            words.update(
                {
                    f"{pre}_{arm}_diff": f"{d:+.3f}",
                    f"{pre}_{arm}_sd": f"{s:.3f}",
                    f"{pre}_{arm}_verdict": verdict,
                }
            )
        words[f"{pre}_teacher"] = f"{kd['teacher']['test']:.3f}"
        settings_300 = {a: best_setting(kd, a, 300) for a in ("hard", "soft")}
        at_300 = {a: seed_tests(kd, k) for a, k in settings_300.items()}
        for arm, accs in at_300.items():
            words[f"{pre}_{arm}300"] = report.mean_sd(accs)
        words[f"{pre}_settings300"] = _settings_words(settings_300)
        if name == "fine-tuned":
            words["gain_sentences"] = (
                f"{report.compared(tests['hard'], tests['soft'])[0] * n_test:.0f}"
            )
            # the same copy reads the same phrases in the same order and the same
            # dropout for one seed: the seed pairs soft targets and argmax
            d, s, verdict = report.compared(
                tests["teacher_hard"], tests["soft"], pairs=True
            )
            words.update(
                {
                    "soft_vs_argmax": f"{d:+.3f}",
                    "soft_vs_argmax_sd": f"{s:.3f}",
                    "soft_vs_argmax_verdict": verdict,
                    "argmax_reading": _argmax_reading(verdict),
                }
            )
        else:
            d, s, verdict = report.compared(at_300["hard"], at_300["soft"])
            words.update(
                {
                    "pr_matched_diff": f"{d:+.3f}",
                    "pr_matched_sd": f"{s:.3f}",
                    "pr_matched_verdict": verdict,
                    "pr_reading": _probe_reading(words["pr_soft_verdict"], verdict),
                }
            )
    kd = results["fine-tuned"]
    copy_dev = {k: v["dev"] for k, v in kd["copies"].items()}
    best_copy = max(copy_dev, key=copy_dev.get)
    words.update(
        {
            "tr_n": f"{kd['n_transfer']:,}",
            "tr_best_copy": best_copy,
            "tr_best_copy_dev": f"{copy_dev[best_copy]:.3f}",
            "tr_best_copy_test": f"{kd['copies'][best_copy]['test']:.3f}",
            "tr_keep_dev": f"{copy_dev[str(list(keep))]:.3f}",
            "tr_keep_test": f"{kd['copies'][str(list(keep))]['test']:.3f}",
            "tr_n_dev": str(kd["n_dev"]),
        }
    )
    return words


def arm_tests(
    results: Mapping[str, dict], arm_names: Mapping[str, str]
) -> tuple[dict[tuple[str, str], list[float]], dict[str, str], list[str]]:
    """Per teacher of ``results`` (name -> result) and arm of ``arm_names`` (arm ->
    its description): the test accuracy of every seed at the arm's chosen setting;
    per teacher the verdict of soft targets against labels at 300 updates each
    (:func:`report.compared`, unpaired); and the lines that print both, with the
    settings tried. Returns ``({(teacher, arm): accuracies}, {teacher: verdict},
    lines)``."""
    if not results or not arm_names:
        raise ValueError("results and arm_names must each name at least one entry")
    arm_test, matched_verdict, lines = {}, {}, []
    for name, kd in results.items():
        lines.append(f"{name} teacher: test {kd['teacher']['test']:.3f}, dev "
                     f"{kd['teacher']['dev']:.3f}; seeds {kd['seeds']}")  # fmt: skip
        for arm, what in arm_names.items():  # each at its setting of the best mean dev
            arm_test[name, arm] = seed_tests(kd, kd["chosen"][arm])
            lines.append(f"  {what:>27} | {kd['chosen'][arm]:>17} | test "
                         f"{report.mean_spread(arm_test[name, arm])}")  # fmt: skip
        tried = [", ".join(settings_tried(kd, a)) for a in arm_names]
        lines.append("  settings tried: " + "; ".join(tried))
        # the same number of updates for both: soft targets and labels, 300 each
        m = {a: seed_tests(kd, best_setting(kd, a, 300)) for a in ("hard", "soft")}
        matched_verdict[name] = report.compared(m["hard"], m["soft"])[2]
        lines.append(f"  at 300 updates each: soft targets {report.mean_sd(m['soft'])}"
                     f", labels {report.mean_sd(m['hard'])}: "
                     f"{matched_verdict[name]}")  # fmt: skip
    return arm_test, matched_verdict, lines


def students_figure(
    results: Mapping[str, dict],
    arm_test: Mapping[tuple[str, str], Sequence[float]],
    arm_names: Mapping[str, str],
    keep: Sequence[int],
    ax: plt.Axes | None = None,
) -> plt.Axes:
    """Chapter 13's figure: per teacher of ``results``, one point per seed of every arm
    (``arm_test``, as :func:`arm_tests` returns it), the copy of layers ``keep``
    before training (a cross) and the teacher's test accuracy (a dashed line)."""
    if "fine-tuned" not in results:
        raise ValueError(
            f"results must hold the 'fine-tuned' teacher, got {list(results)}"
        )
    ax = ax or plt.gca()
    labels = []  # one per teacher, under its group of points
    for i, (name, r) in enumerate(results.items()):
        for j, arm in enumerate(arm_names):
            accs = arm_test[name, arm]
            x = 3 * i + j + 0.06 * (torch.arange(len(accs)) - (len(accs) - 1) / 2)
            ax.scatter(x, accs, color=f"C{j}", zorder=3,
                       label=arm_names[arm] if i == 0 else None)  # fmt: skip
        copy_test = r["copies"][str(list(keep))]["test"]
        ax.scatter([3 * i + 1], [copy_test], marker="x", color="0.3", zorder=3,
                   label="the copy, before training" if i == 0 else None)  # fmt: skip
        ax.hlines(r["teacher"]["test"], 3 * i - 0.4, 3 * i + 2.4, colors="0.3",
                  linestyles="--", label="its teacher" if i == 0 else None)  # fmt: skip
        steps = "/".join(r["chosen"][a].partition("@")[2] or "60" for a in arm_names)
        labels.append(f"{name} teacher\nupdates (labels/argmax/soft): {steps}")
    ax.set_xticks([3 * i + 1 for i in range(len(results))], labels)
    ax.set(ylabel="SST-2 test accuracy", title="3-layer students, one point per seed "
           f"(majority class {results['fine-tuned']['majority_test']:.3f})")  # fmt: skip
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return ax
