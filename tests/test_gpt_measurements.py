"""gpt_measurements: chapter 14's committed throughput and ablation read back, in rows,
tables, words and a live run set beside them."""

from dataclasses import replace

import pytest
import torch

from transformer_book import gpt_measurements, gpt_training, report

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
    "repeats": {"wall": {"gpt.GPT": [1.0, 1.2, 1.1], "nanoGPT": [1.0, 1.0, 1.0]}},
    "per_tensor_loop": {
        "ratio": 0.9,
        "repeats": {"wall": {"gpt.GPT": [0.9, 0.8, 1.0], "nanoGPT": [1.0, 1.0, 1.0]}},
    },
    "phases": {
        "ms": {
            "gpt.GPT": {"forward_backward": 20.2, "clip": 0.8, "adamw": 2.7},
            "nanoGPT": {"forward_backward": 20.0, "clip": 0.8, "adamw": 2.4},
        },
        "ratio": {"forward_backward": 1.01, "clip": 1.0, "adamw": 1.125},
        "rounds": {
            "ratio": {
                "forward_backward": [0.98, 1.04],
                "clip": [1.0, 1.0],
                "adamw": [1.1, 1.2],
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
    assert "1.25 (wall), 1.00 (CPU)" in lines[2] and "2,932 against 2,578" in lines[3]
    assert (
        words["rounds_mult"] == "1.00 to 1.20"
        and words["rounds_loop"] == "0.80 to 1.00"
    )
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
    assert words["ratio"] == "1.25" and words["loop_ratio"] == "0.90"
    assert "seed" not in words["loop_verdict"]
    assert "the AdamW update 2.70 against 2.40" in lines[-2]
    assert "forward and backward 0.98 to 1.04" in lines[-1]
    assert (words["phase_adamw"], words["phase_clip"]) == ("1.12", "1.00")
    assert words["phase_adamw_rounds"] == "1.10 to 1.20"
    assert words["phase_adamw_vs_one"] == "above 1 in every round"
    assert (
        words["phase_forward_backward_vs_one"] == "on both sides of 1 over the rounds"
    )
    assert words["phase_clip_vs_one"] == "on both sides of 1 over the rounds"  # 1.0
    assert words["phase_extra"] == (
        "forward and backward +0.20 ms, gradient clipping +0.00 ms, "
        "the AdamW update +0.30 ms"
    )
    # 24 tokens a step: 24 ms at 1,000 tokens/s, 30 ms at 800
    assert words["phase_sums"] == (
        "23.70 ms against 24.00 ms for gpt.GPT and 23.20 ms against 30.00 ms for nanoGPT"
    )
    with pytest.raises(ValueError, match="bench must be.*missing.*ratio"):
        gpt_measurements.throughput({"date": "x"})


def _on_path(path: str, ours: list[float], settings: dict | None = None) -> dict:
    """BENCH measured on the code path ``path``, gpt.GPT's rounds ``ours`` against
    nanoGPT's 1.0 in every round."""
    machine = {**BENCH["machine"], "cpu_capability": path,
               "cpu_path_settings": settings or {}}  # fmt: skip
    rounds = {"gpt.GPT": ours, "nanoGPT": [1.0] * len(ours)}
    return {**BENCH, "machine": machine, "repeats": {"wall": rounds}}


def test_code_paths_read_each_run_as_paired_rounds():
    even = _on_path("AVX512", [0.98, 1.02, 1.0])  # geometric mean 1, interval about 1
    avx2 = _on_path("AVX2", [0.97, 1.01, 0.99], {"MKL_ENABLE_INSTRUCTIONS": "AVX2"})
    lines, words = gpt_measurements.code_paths([even, avx2])
    ratio, low, high = report.paired_ratio([0.97, 1.01, 0.99], [1.0] * 3)
    assert lines[1] == (
        f"AVX2    3 rounds: {ratio:.3f}, 95 % interval {low:.3f} to {high:.3f}"
        "  (MKL_ENABLE_INSTRUCTIONS=AVX2)"
    )
    assert lines[0].endswith("(no setting: as the chip comes)")
    assert words["paths"].startswith("1.000 on AVX512 (95 % interval 0.951 to 1.051)")
    assert words["paths_verdict"] == (
        "each interval holds 1: on either code path the rounds cannot tell the two "
        "models' speeds apart"
    )
    assert (
        words["paths_slowest"] == f"at most {100 * (1 - low):.1f} % slower"
    )  # AVX2's end
    fast = _on_path("AVX2", [1.05, 1.06, 1.07])  # above 1 every round, tight
    _, words = gpt_measurements.code_paths([even, fast])
    assert words["paths_verdict"] == (
        "the intervals put gpt.GPT the faster on AVX2, no ranking on AVX512"
    )
    assert gpt_measurements.code_paths([fast])[1]["paths_slowest"] == "not slower"
    slow = _on_path("AVX2", [0.90, 0.91, 0.92])
    assert (
        "gpt.GPT the slower on AVX2"
        in gpt_measurements.code_paths([slow])[1]["paths_verdict"]
    )


def test_code_paths_name_a_run_that_did_not_record_its_path():
    with pytest.raises(ValueError, match="record its code path.*2026-01-02"):
        gpt_measurements.code_paths([BENCH])
    with pytest.raises(ValueError, match="at least one"):
        gpt_measurements.code_paths([])


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
