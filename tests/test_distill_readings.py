"""Tests of distill_readings: chapter 13's committed comparison read back (a seed's
test accuracies, the settings tried and chosen, the verdicts in words, the figure)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from transformer_book import distill_readings, report  # noqa: E402


def _kd_result(soft_shift: float, copies_dev=(0.76, 0.72, 0.56, 0.78)):
    """A committed comparison in miniature: three seeds of each setting; the hard
    arm's chosen setting at 60 updates, the others at 300; soft targets
    ``soft_shift`` above the labels on test."""
    base = {"hard": 0.79, "teacher_hard": 0.80, "soft": 0.79 + soft_shift}
    settings = {  # setting -> (arm, test accuracy of seed 0, mean dev)
        "hard:0.0003": ("hard", base["hard"], 0.78),
        "hard:0.001": ("hard", 0.70, 0.70),
        "hard:0.0003@300": ("hard", base["hard"] - 0.01, 0.77),
        "hard:0.0001@300": ("hard", 0.60, 0.60),
        "teacher_hard:0.0003@300": ("teacher_hard", base["teacher_hard"], 0.79),
        "soft:0.0003:2@300": ("soft", base["soft"], 0.80),
        "soft:0.0003:2": ("soft", 0.50, 0.50),
    }
    runs = [
        {"config": k, "arm": arm, "seed": seed, "test": test + 0.004 * seed}
        for k, (arm, test, _) in settings.items()
        for seed in range(3)
    ]
    names = ("[0, 2, 4]", "[1, 3, 5]", "[0, 1, 2]", "[3, 4, 5]")
    return {
        "runs": runs,
        "mean_dev": {k: v[2] for k, v in settings.items()},
        "chosen": {
            "hard": "hard:0.0003",
            "teacher_hard": "teacher_hard:0.0003@300",
            "soft": "soft:0.0003:2@300",
        },  # fmt: skip
        "teacher": {"test": 0.85, "dev": 0.80},
        "copies": {n: {"dev": d, "test": d - 0.01} for n, d in zip(names, copies_dev)},
        "n_transfer": 12000,
        "n_dev": 200,
    }


def test_the_committed_comparison_read_back():
    kd = _kd_result(0.05)
    assert distill_readings.seed_tests(kd, "hard:0.0003") == pytest.approx(
        [0.79, 0.794, 0.798]
    )
    assert distill_readings.settings_tried(kd, "hard") == [
        "hard:0.0001@300", "hard:0.0003", "hard:0.0003@300", "hard:0.001"
    ]  # fmt: skip
    assert (
        distill_readings.best_setting(kd, "hard", 300) == "hard:0.0003@300"
    )  # 0.77 > 0.60
    assert distill_readings.best_setting(kd, "soft", 300) == "soft:0.0003:2@300"


def test_comparison_words_name_each_teacher_and_read_the_verdicts():
    # the fine-tuned teacher's soft targets 0.05 above the labels, the probe's level
    words = distill_readings.comparison_words(
        {"fine-tuned": _kd_result(0.05), "probe": _kd_result(0.0)}, [0, 2, 4], 256
    )
    assert words["ft_soft"] == report.mean_sd([0.84, 0.844, 0.848])
    assert words["ft_soft_diff"] == "+0.050" and words["ft_soft_sd"] == "0.004"
    assert words["ft_soft_verdict"] == "higher for every seed"
    assert words["gain_sentences"] == f"{0.05 * 256:.0f}"  # 13 sentences
    assert words["ft_teacher"] == "0.850" and words["tr_n"] == "12,000"
    # at 300 updates: soft 0.84, labels 0.78 (hard:0.0003@300)
    assert words["ft_hard300"] == report.mean_sd([0.78, 0.784, 0.788])
    assert words["soft_vs_argmax_verdict"] == "higher for every seed"
    assert words["argmax_reading"].startswith("The probabilities add to the answers")
    # the probe teacher: soft equals labels at the chosen settings, no ranking there;
    # at 300 updates soft is 0.01 above every seed's labels, by the t-test
    assert words["pr_soft_verdict"].endswith("no ranking")
    assert words["pr_matched_verdict"] == "higher for every seed"
    assert words["pr_reading"].startswith("Even this teacher passes something on")
    # the copies: every other layer, the best on dev, the top three on test
    assert (words["tr_keep_dev"], words["tr_keep_test"]) == ("0.760", "0.750")
    assert (words["tr_best_copy"], words["tr_best_copy_dev"]) == ("[3, 4, 5]", "0.780")
    assert words["tr_best_copy_test"] == "0.770" and words["tr_n_dev"] == "200"
    assert words["ft_settings300"] == (
        "the labels at lr 3e-4, the soft targets at 3e-4 and T = 2"
    )


def test_arm_tests_read_each_arm_and_the_figure_draws_them():
    results = {"fine-tuned": _kd_result(0.05), "probe": _kd_result(0.0)}
    for kd in results.values():
        kd.update(seeds=[0, 1, 2], majority_test=0.5)
    arms = {"hard": "labels", "soft": "soft targets"}
    arm_test, matched, lines = distill_readings.arm_tests(results, arms)
    assert arm_test["fine-tuned", "soft"] == pytest.approx([0.84, 0.844, 0.848])
    assert matched["fine-tuned"] == "higher for every seed"  # 0.84 against 0.78
    assert lines[0].startswith("fine-tuned teacher: test 0.850")
    _, ax = plt.subplots()  # its own axes: plt.gca() may be another test's figure
    assert (
        distill_readings.students_figure(results, arm_test, arms, [0, 2, 4], ax) is ax
    )
    assert len(ax.collections) == 2 * (2 + 1 + 1)  # per teacher: arms, copy, line
    plt.close("all")
    with pytest.raises(ValueError, match="arm_names"):
        distill_readings.arm_tests(results, {})
    with pytest.raises(ValueError, match="results must"):
        distill_readings.students_figure({}, arm_test, arms, [0, 2, 4])
