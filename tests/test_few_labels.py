"""few_labels (chapter 12): a sweep result read back (the chosen head, where its rate
sits in the grid, the dev table, the CPU it cost) and its comparisons in words, on a
small hand-made sweep whose answers are known."""

import pytest

from transformer_book import few_labels, report

LRS = (1e-4, 3e-4, 1e-3)


def _run(lr, sel, dev=0.5, seed=0, cpu=10.0):
    return {"lr": lr, "seed": seed, "selection_accuracy": sel, "dev_accuracy": dev,
            "cpu_seconds": cpu, "steps": 40}  # fmt: skip


def _sweep():
    """Pre-trained: cls best at 3e-4 (0.80), mean best at 1e-4 (0.78, falling up the
    grid); scratch: mean best at 1e-3 (0.60, rising), cls at 1e-4 (0.55)."""
    sel = {
        "pre-trained/cls": (0.70, 0.80, 0.60),
        "pre-trained/mean": (0.78, 0.70, 0.50),
        "scratch/cls": (0.55, 0.54, 0.53),
        "scratch/mean": (0.50, 0.55, 0.60),
    }
    dev = {  # final runs, seeds 0, 1, 2
        "pre-trained/cls": (0.80, 0.82, 0.81),
        "pre-trained/mean": (0.79, 0.83, 0.80),
        "scratch/cls": (0.55, 0.50, 0.50),
        "scratch/mean": (0.60, 0.58, 0.59),
    }
    selection_runs = {k: [_run(lr, a) for lr, a in zip(LRS, v)] for k, v in sel.items()}
    chosen = {k: {"lr": max(runs, key=lambda r: r["selection_accuracy"])["lr"]}
              for k, runs in selection_runs.items()}  # fmt: skip
    final_runs = {
        k: [_run(chosen[k]["lr"], 0.7, d, seed) for seed, d in enumerate(v)]
        for k, v in dev.items()
    }
    return {
        "settings": {"select_seed": 0},
        "selection_runs": selection_runs,
        "chosen": chosen,
        "final_runs": final_runs,
        "majority": {"dev_accuracy": 0.50},
        "probe": {"dev_accuracy": 0.75},
        "longer": {
            "epochs": 40,
            "pooling": "mean",
            "dev_accuracy": 0.62,
            "cpu_seconds": 30.0,
        },  # fmt: skip
    }


def test_chosen_head_is_the_better_selection_run_at_its_own_rate():
    sweep = _sweep()
    assert few_labels.chosen_head(sweep, "pre-trained") == ("cls", 3e-4)
    assert few_labels.chosen_head(sweep, "scratch") == ("mean", 1e-3)


def test_grid_edge_names_the_edge_and_where_the_accuracy_points():
    sweep = _sweep()
    assert few_labels.grid_edge(sweep, "pre-trained/cls") == "inside the grid"
    low = few_labels.grid_edge(sweep, "pre-trained/mean")
    assert low.startswith("the smallest rate tried, and the selection accuracy falls")
    assert low.endswith("the best rate may lie below it")
    high = few_labels.grid_edge(sweep, "scratch/mean")
    assert high.startswith("the largest rate tried, and the selection accuracy rises")
    # the smallest rate, but the accuracy does not fall at every step: no pointer
    sweep["selection_runs"]["scratch/cls"][2]["selection_accuracy"] = 0.545
    assert few_labels.grid_edge(sweep, "scratch/cls") == "the smallest rate tried"


def test_compare_heads_pairs_the_seeds_and_head_noise_reads_a_tie():
    words = few_labels.compare_heads(_sweep(), "cls")
    assert set(words) == {"selection", "dev"}
    # selection: every final run at 0.7 for both heads, no spread: no ranking
    assert words["selection"].endswith("no ranking")
    assert words["dev"] == report.compare_seeds([0.79, 0.83, 0.80], [0.80, 0.82, 0.81],
                                                pairs=True)  # fmt: skip
    tie = few_labels.head_noise(words, 0)
    assert tie.startswith("neither split ranks the two heads (selection: ")
    assert tie.endswith("a tie that seed 0 broke")
    ranked = {"selection": "higher for every seed", "dev": "the seeds overlap: x"}
    assert few_labels.head_noise(ranked, 0) == (
        "selection: higher for every seed; dev: the seeds overlap: x"
    )
    sweep = _sweep()
    sweep["final_runs"]["pre-trained/mean"][0]["seed"] = 7
    with pytest.raises(ValueError, match="same seeds"):
        few_labels.compare_heads(sweep, "cls")


def test_one_run_against_names_the_other_side():
    seeds = [0.80, 0.81, 0.82]
    assert few_labels.one_run_against(0.5, seeds, "A") == (
        "below every seed of A, beyond their spread"
    )
    assert few_labels.one_run_against(0.815, seeds, "A") == (
        "inside the range of A's seeds: no ranking"
    )


def test_dev_table_and_comparison_words_read_the_chosen_heads():
    sweep = _sweep()
    rows = few_labels.dev_table(sweep, "mean")
    assert rows["majority class"] == [0.50]
    assert rows["linear probe, frozen MiniLM (mean)"] == [0.75]
    assert rows["same architecture, scratch, mean head"] == [0.60, 0.58, 0.59]
    heads = {"pre-trained": "cls", "scratch": "mean"}
    words = few_labels.comparison_words(sweep, heads)
    pre, scratch = [0.80, 0.82, 0.81], [0.60, 0.58, 0.59]
    assert words["pre_dev"] == report.mean_spread(pre)
    assert words["gain"] == f"{sum(pre) / 3 - sum(scratch) / 3:.3f}"
    assert words["probe_dev"] == "0.750"
    # every pre-trained seed far above the fixed probe: fine-tuning pays beyond it
    assert words["probe_verdict"].startswith("fine-tuning the encoder adds 0.060")
    assert words["stands"] == "above the majority class and above the probe"
    assert words["pre_other_head"] == "mean"
    # two of the six scratch runs score exactly the majority's 0.50
    assert (words["n_scratch_const"], words["n_scratch_runs"]) == ("2", "6")
    assert words["longer_head"] == "mean" and words["longer_dev"] == "0.620"
    assert words["longer_verdict"] == (
        "below every seed of the pre-trained arm, beyond their spread"
    )


def test_sweep_cpu_seconds_counts_each_run_once():
    # 12 selection runs, 8 final runs of seeds 1 and 2 (seed 0's is a selection run),
    # the longer run: 20 runs of 10 s and one of 30 s
    assert few_labels.sweep_cpu_seconds(_sweep()) == 20 * 10.0 + 30.0


def test_live_words_say_which_runs_and_how_they_scored():
    one = few_labels.live_words({"pre-trained": [0.8]}, 0.5, [0], 20, 2, 4)
    assert one["live_plan"] == (
        "seed 0 of the pre-trained arm only, 20 updates (2 epochs; the sweep trains "
        "4) (the full profile runs every seed of both arms)"
    )
    assert one["live_story"].startswith("Seed 0 of the pre-trained arm scored 0.800")
    both = few_labels.live_words(
        {"pre-trained": [0.8, 0.9], "scratch": [0.6, 0.5]}, 0.5, [0, 1], 40, 4, 4
    )
    assert both["live_plan"] == (
        "every seed of both arms (0, 1), 40 updates, as in the sweep"
    )
    assert "and 0.600 from scratch" in both["live_story"].replace(",", "")


def test_pretraining_verdict_ranks_only_what_the_test_passes():
    assert few_labels.pretraining_verdict([0.80, 0.82, 0.81], [0.5, 0.52, 0.51]) == (
        "pre-training pays 0.300, higher for every seed ("
        + report.t_words([0.80, 0.82, 0.81], [0.5, 0.52, 0.51])
        + ")"
    )
    overlap = few_labels.pretraining_verdict([0.5, 0.6, 0.7], [0.55, 0.65, 0.45])
    assert overlap.startswith("no clear gain from pre-training (+0.050; the seeds")


def test_dev_accuracies_and_power_words():
    sweep = _sweep()
    assert few_labels.dev_accuracies(sweep, "scratch", "cls") == [0.55, 0.50, 0.50]
    pre, scratch = [0.60, 0.62, 0.64], [0.58, 0.60, 0.59]
    words = few_labels.power_words(pre, scratch, delta=0.01)
    diff, se, df = report.welch(pre, scratch)
    assert words["own_se"] == f"{diff / se:.1f}" and words["own_df"] == f"{df:.1f}"
    assert words["own_t"] == f"{report.t_quantile(0.975, df):.2f}"
    assert words["own_sd"] == "0.020"
    # n = 2 (0.02 / 0.01)^2 (1.96 + 0.84)^2 = 8 * 7.84 = 62.72
    assert words["runs_needed"] == "63"
    assert few_labels.power_words(pre, scratch, delta=0.02)["runs_needed"] == "16"
