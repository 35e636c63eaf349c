"""gpt_measurements: chapter 14's committed throughput and ablation read back, in rows,
tables, words and a live run set beside them."""

from dataclasses import replace

import pytest
import torch

from transformer_book import gpt_measurements, gpt_training

ABLATION = {
    "threads": 1,
    "variants": {
        name: {
            "what": f"the {name} rung",
            "config": {**vars(recipe), "steps": steps, "seed": 0, "threads": 0},
            "runs": [
                {
                    "seed": s,
                    "val_loss": loss + 0.01 * s,
                    "train_cpu_seconds": cpu * (1 + 0.1 * s),
                }
                for s in range(seeds)
            ],
        }
        for name, recipe, steps, seeds, loss, cpu in [
            ("nanogpt", gpt_training.RECIPES["nanogpt-cpu"], 2000, 3, 1.90, 200.0),
            ("nanogpt-short", gpt_training.RECIPES["nanogpt-cpu"], 800, 3, 2.10, 100.0),
            ("schedule", gpt_training.RECIPES["nanogpt-cpu"], 800, 3, 2.00, 150.0),
            ("book-quick", gpt_training.RECIPES["book-quick"], 800, 3, 1.80, 90.0),
            ("untied", gpt_training.RECIPES["book-quick"], 800, 1, 1.81, 91.0),
        ]
    },
}


def test_ablation_rows_table_and_clock_noise():
    rows = gpt_measurements.ablation_rows(ABLATION)
    assert rows["nanogpt"]["losses"] == pytest.approx([1.90, 1.91, 1.92])
    assert rows["nanogpt"]["cpu"] == pytest.approx(220.0)  # the median of 200, 220, 240
    assert rows["book-quick"]["batch"] == 32 and rows["untied"]["steps"] == 800
    table = gpt_measurements.ablation_table(rows)
    assert len(table) == 1 + len(rows) and "(one seed)" in table[-1]
    assert "1.910 ± 0.010 (1.900–1.920)" in table[1]
    clock = gpt_measurements.clock_noise(rows)
    assert clock["ms_per_step"]["nanogpt"] == pytest.approx(110.0)  # 220 s / 2000
    assert clock["seed_spread"] == pytest.approx(0.2)  # 1.2 / 1.0 - 1
    assert clock["step_drift"] == pytest.approx(137.5 / 110 - 1)  # 110 s / 800
    assert clock["model_gap"] == pytest.approx(0.5)  # 165 s against 110 s, same model
    assert clock["noise"] == clock["model_gap"]  # the largest of the three


def test_reruns_ablation_and_live_clock():
    quick = replace(gpt_training.RECIPES["book-quick"], threads=1, seed=1)
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert gpt_measurements.reruns_ablation(quick, ABLATION, on_cpu=True)
    assert not gpt_measurements.reruns_ablation(quick, ABLATION, on_cpu=False)
    # the recipe, whatever the threads: they change the clock, not the recipe
    assert gpt_measurements.reruns_ablation(replace(quick, threads=2), ABLATION, True)
    assert not gpt_measurements.reruns_ablation(replace(quick, lr=1e-3), ABLATION, True)
    result = {"train_cpu_seconds": 99.0, "val_loss": 1.8, "threads": 1}
    said = gpt_measurements.live_clock(result, quick, ABLATION, "book-quick", cpu)
    assert "seed 1" in said and "1.00 times" in said and "45%" in said  # 99/99, 99/220
    assert "the file's 1.810" in said
    said = gpt_measurements.live_clock(result, quick, ABLATION, "book-quick", gpu)
    assert "say nothing" in said
    on_file = {**ABLATION, "machine": {"cpu": "Chip A"}}
    said = gpt_measurements.live_clock(
        result, quick, on_file, "book-quick", cpu, cpu_name="Chip A"
    )
    assert "1.00 times" in said  # the table's processor: CPU seconds compare
    said = gpt_measurements.live_clock(
        result, quick, on_file, "book-quick", cpu, cpu_name="Chip B"
    )
    assert "another processor (Chip B; the table's: Chip A)" in said
    assert "times the table's" not in said and "the file's 1.810" in said
    # two threads where the table had one: the loss compares, the CPU seconds do not
    two = {**result, "threads": 2}
    said = gpt_measurements.live_clock(
        two, replace(quick, threads=2), on_file, "book-quick", cpu, cpu_name="Chip A"
    )
    assert "on 2 threads where the table's runs had 1" in said
    assert "times the table's" not in said and "the file's 1.810" in said


BENCH = {
    "date": "2026-01-02T03:04:05",
    "torch": "2.13.0",
    "threads": 1,
    "machine": {"cpu": "Chip A", "cores": 2},
    "tokens_per_s": {"gpt.GPT": 1000.0, "nanoGPT": 800.0},
    "tokens_per_cpu_s": {"gpt.GPT": 900.0, "nanoGPT": 900.0},
    "ratio": 1.25,
    "ratio_cpu": 1.0,
    "parameter_tensors": {"gpt.GPT": 35, "nanoGPT": 27},
    "operations_per_step": {"gpt.GPT": {"foreach": 2932}, "nanoGPT": {"foreach": 2578}},
    "repeats": {
        "wall": {"gpt.GPT": [1.0, 1.2, 1.1] * 2, "nanoGPT": [1.0] * 6},
        "cpu": {"gpt.GPT": [1.0, 1.1, 1.0] * 2, "nanoGPT": [1.0] * 6},
    },
    "per_tensor_loop": {
        "ratio": 0.9,
        "repeats": {"wall": {"gpt.GPT": [0.9, 0.8, 1.0] * 2, "nanoGPT": [1.0] * 6}},
    },
    "phases": {
        "ms": {
            "gpt.GPT": {"forward_backward": 20.2, "clip": 0.8, "adamw": 2.7},
            "nanoGPT": {"forward_backward": 20.0, "clip": 0.8, "adamw": 2.4},
        },
        "ratio": {"forward_backward": 1.01, "clip": 1.0, "adamw": 1.125},
        "rounds": {
            "ms": {
                "gpt.GPT": {
                    "forward_backward": [19.6, 20.8, 20.2] * 2,
                    "clip": [0.8] * 6,
                    "adamw": [2.64, 2.88, 2.76] * 2,
                },
                "nanoGPT": {
                    "forward_backward": [20.0] * 6,
                    "clip": [0.8] * 6,
                    "adamw": [2.4] * 6,
                },
            },
            "ratio": {
                "forward_backward": [0.98, 1.04, 1.01] * 2,
                "clip": [1.0] * 6,
                "adamw": [1.1, 1.2, 1.15] * 2,
            },
        },  # fmt: skip
    },
    "config": {"batch_size": 2, "context": 12},
}


def test_measured_on_and_throughput():
    assert gpt_measurements.measured_on(BENCH) == (
        "measured 2026-01-02, torch 2.13.0, 1 thread\non Chip A, 2 cores"
    )
    lines, words = gpt_measurements.throughput(BENCH)
    assert lines[0].startswith("gpt.GPT ") and "1,000 tokens/s" in lines[0]
    assert "2,932 against 2,578" in lines[2]
    # 6 rounds: the median, and an interval from the smallest round to the largest
    assert lines[3] == (
        "gpt.GPT / nanoGPT, median of 6 rounds' ratios (95 % interval): wall 1.100 "
        "(1.000 to 1.200), CPU 1.000 (1.000 to 1.100), AdamW as a loop 0.900 (0.800 "
        "to 1.000)"
    )
    assert (words["rounds"], words["rank"]) == ("6", "1st")
    assert words["coverage"] == "96.9 %"  # 1 - 2 / 64
    assert (words["ratio"], words["ratio_interval"]) == ("1.100", "1.000 to 1.200")
    assert (words["ratio_cpu"], words["loop_ratio"]) == ("1.000", "0.900")
    assert words["loop_ratio_interval"] == "0.800 to 1.000"
    assert words["loop_verdict"].startswith("the interval holds 1: with that optimiser")
    assert words["rounds_mult"] == "1.00 to 1.20"
    assert (
        words["extra_ops"] == "354 more operations than nanoGPT's"
        and words["our_tensors"] == "35"
    )
    fewer = {
        **BENCH,
        "operations_per_step": {
            "gpt.GPT": {"foreach": 2544, "loop": 1},
            "nanoGPT": {"foreach": 2578, "loop": 1},
        },
    }
    assert gpt_measurements.throughput(fewer)[1]["extra_ops"].startswith("34 fewer")
    assert "the AdamW update 2.70 against 2.40" in lines[-1]
    assert lines[-2].startswith("time per phase, the same way: forward and backward")
    assert words["phase_intervals"] == (
        "forward and backward 1.010 (0.980 to 1.040), gradient clipping 1.000 (1.000 "
        "to 1.000), the AdamW update 1.150 (1.100 to 1.200)"
    )
    # AdamW 1.10 to 1.20 times nanoGPT's: its interval lies above 1; clipping's,
    # a single point at 1, and forward and backward's hold 1
    assert words["phase_verdict"] == (
        "gpt.GPT takes longer in the AdamW update; the others hold 1"
    )
    assert words["phase_extra"] == (
        "forward and backward +0.20 ms, gradient clipping +0.00 ms, "
        "the AdamW update +0.30 ms"
    )
    # 24 tokens a step: 24 ms at 1,000 tokens/s, 30 ms at 800
    assert words["phase_sums"] == (
        "23.70 ms against 24.00 ms for gpt.GPT and 23.20 ms against 30.00 ms for nanoGPT"
    )
    loop = {
        "ratio": 0.9,
        "repeats": {"wall": {"gpt.GPT": [0.9] * 6, "nanoGPT": [1.0] * 6}},
    }
    assert gpt_measurements.throughput({**BENCH, "per_tensor_loop": loop})[1][
        "loop_verdict"
    ] == ("the interval lies below 1: with that optimiser gpt.GPT is the slower")
    with pytest.raises(ValueError, match="bench must be.*missing.*ratio"):
        gpt_measurements.throughput({"date": "x"})


def _on_path(
    path: str, wall: list[float], cpu: list[float] | None = None, **settings: str
) -> dict:
    """BENCH measured on the code path ``path``: gpt.GPT's rounds ``wall`` (and ``cpu``,
    the same if None) against nanoGPT's 1.0 in every round."""
    machine = {
        **BENCH["machine"],
        "cpu_capability": path,
        "cpu_path_settings": settings,
    }
    theirs = [1.0] * len(wall)
    repeats = {
        "wall": {"gpt.GPT": wall, "nanoGPT": theirs},
        "cpu": {"gpt.GPT": cpu or wall, "nanoGPT": theirs},
    }
    return {**BENCH, "machine": machine, "repeats": repeats}


def test_code_paths_read_each_run_as_paired_rounds_on_both_clocks():
    # 6 rounds: median, and an interval from the smallest round to the largest
    even = _on_path("AVX512", [0.98, 1.02, 1.0, 0.99, 1.01, 1.0])
    avx2 = _on_path("AVX2", [0.97, 1.01, 0.99] * 2, MKL_ENABLE_INSTRUCTIONS="AVX2")
    lines, words = gpt_measurements.code_paths([even, avx2])
    assert lines[0] == "AVX512, 6 rounds (no setting: as the chip comes):"
    assert lines[3] == "AVX2, 6 rounds (MKL_ENABLE_INSTRUCTIONS=AVX2):"
    assert lines[4] == "  wall 0.9900, 95 % interval 0.9700 to 1.0100"
    assert words["paths"].startswith(
        "on AVX512, 1.000 (0.980 to 1.020) by the wall clock and 1.000 (0.980 to 1.020) "
        "by CPU time; on AVX2, 0.990 (0.970 to 1.010)"
    )
    assert words["paths_verdict"] == (
        "on both code paths every interval holds 1: the rounds cannot tell the two "
        "models' speeds apart"
    )

    # from AVX2's low end (0.97) to AVX512's high end (1.02); 0.97 lies farther from 1
    assert words["paths_span"] == "between 0.970 and 1.020"
    assert words["paths_bound"] == "3.0 %"
    assert words["paths_cost"] == "1 % fewer tokens per second on AVX2 than on AVX512"


def test_code_paths_say_which_clock_resolves_a_difference():
    fast = _on_path("AVX2", [1.05, 1.06, 1.07] * 2)  # above 1 every round, tight
    _, words = gpt_measurements.code_paths([_on_path("AVX512", [1.0] * 6), fast])
    assert words["paths_verdict"].startswith("on AVX512 both intervals hold 1: the ")
    assert words["paths_verdict"].endswith("; on AVX2 both lie above 1: gpt.GPT is the "
                                           "faster, by 6.0 % (wall clock, 95 % interval "
                                           "1.050 to 1.070)")  # fmt: skip
    slow = _on_path("AVX2", [0.90, 0.91, 0.92] * 2)
    assert gpt_measurements.code_paths([slow])[1]["paths_verdict"] == (
        "on AVX2 both lie below 1: gpt.GPT is the slower, by 9.0 % (wall clock, 95 % "
        "interval 0.900 to 0.920)"
    )
    torn = _on_path("AVX2", [0.90, 0.91, 0.92] * 2, cpu=[1.05, 1.06, 1.07] * 2)
    assert gpt_measurements.code_paths([torn])[1]["paths_verdict"] == (
        "on AVX2 the clocks disagree: the wall-clock interval lies below 1 and the "
        "CPU-time interval lies above 1: no ranking"
    )
    split = _on_path("AVX2", [0.95, 1.0, 1.01] * 2, cpu=[0.988, 0.99, 0.992] * 2)
    assert gpt_measurements.code_paths([split])[1]["paths_verdict"] == (
        "on AVX2 the CPU-time interval lies below 1: by that clock gpt.GPT ran 1.0 % "
        "slower; the wall-clock interval holds 1, so one clock resolves the difference "
        "and the other does not"
    )


def test_code_paths_name_runs_that_cannot_be_compared():
    with pytest.raises(ValueError, match="record its code path.*2026-01-02"):
        gpt_measurements.code_paths([BENCH])
    with pytest.raises(ValueError, match="at least one"):
        gpt_measurements.code_paths([])
    twice = _on_path("AVX2", [1.0] * 6)
    with pytest.raises(ValueError, match=r"another code path, got \['AVX2', 'AVX2'\]"):
        gpt_measurements.code_paths([twice, twice])
    other = {**_on_path("AVX512", [1.0] * 6), "parameters": 5, "threads": 2}
    with pytest.raises(
        ValueError, match=r"AVX512 differs from AVX2 in \['parameters', 'threads'\]"
    ):
        gpt_measurements.code_paths([twice, other])


def test_ladder_steps_words_each_rung_against_the_one_before():
    rows = gpt_measurements.ablation_rows(ABLATION)
    said = gpt_measurements.ladder_steps(rows, ["nanogpt-short", "book-quick"])
    assert list(said) == ["book-quick"]
    assert said["book-quick"].startswith("-0.300 nats, lower for every seed")
    with pytest.raises(ValueError, match="rungs must name"):
        gpt_measurements.ladder_steps(rows, ["nanogpt", "missing"])


def test_live_throughput_counts_cpu_seconds_on_a_cpu_and_wall_seconds_elsewhere():
    config = replace(gpt_training.RECIPES["book-quick"], threads=1)
    result = {"train_cpu_seconds": 100.0, "train_wall_seconds": 50.0}
    tokens = config.steps * config.batch_size * config.context
    said = gpt_measurements.live_throughput(result, config, torch.device("cpu"))
    assert f"{tokens / 100:,.0f} tokens per CPU s" in said and "1 thread(s)" in said
    said = gpt_measurements.live_throughput(result, config, torch.device("cuda"))
    assert said.endswith(f"{tokens / 50:,.0f} tokens/s on cuda")


def test_ablation_notes_and_clock_lines():
    rows = gpt_measurements.ablation_rows(ABLATION)
    notes = gpt_measurements.ablation_notes(ABLATION, rows)
    assert notes[0] == "nanogpt        3 seeds: the nanogpt rung"
    assert "untied         1 seed: the untied rung" in notes
    assert notes[-2] == "1 thread per run, on an unnamed processor" and notes[-1] == ""
    clock = gpt_measurements.clock_noise(rows)
    assert clock["time_share"] == pytest.approx(99 / 220)  # medians 99 and 220 s
    assert clock["steps_share"] == pytest.approx(0.4)
    lines = gpt_measurements.clock_lines(clock, rows)
    assert lines[0].endswith("up to 20%") and "45% of the CPU time" in lines[4]
    assert lines[3].endswith("(the same model and steps): +50%")
    assert lines[-1] == f"book-quick: {800 * 32 * 64:,} characters read"


def test_half_scores_choose_on_the_first_half_and_read_both():
    def variant(first, second):
        return {"runs": [{"val_loss_halves": [f, s]} for f, s in zip(first, second)]}

    ablation = {"variants": {"a": variant([1.9, 2.0], [1.5, 1.6]),
                             "b": variant([1.8, 1.9], [1.95, 2.0]),
                             "old": {"runs": [{"val_loss": 2.0}]}}}  # fmt: skip
    chosen, halves = gpt_measurements.half_scores(ablation, ["a", "b"])
    assert chosen == "b"  # the first half decides, though "a" reads lower on the second
    assert halves["a"] == ([1.9, 2.0], [1.5, 1.6])
    with pytest.raises(ValueError, match="no variant 'c'"):
        gpt_measurements.half_scores(ablation, ["a", "c"])
    with pytest.raises(ValueError, match="'old' has runs without val_loss_halves"):
        gpt_measurements.half_scores(ablation, ["old"])
