"""transformer_book.thread_gain: timings taken in turns, the rounds a busy probe
leaves out, the gains, and the verdict's every branch (chapter 01)."""

import time

import pytest
import torch

from transformer_book import thread_gain


def test_a_busy_probe_leaves_the_others_out_of_its_round():
    calls = {"probe": 0, "other": 0}

    def probe():  # slow with more threads: the cores look busy
        calls["probe"] += 1
        time.sleep(0.1 if torch.get_num_threads() > 1 else 0.001)

    def other():
        calls["other"] += 1

    times = thread_gain.timing_rounds({"probe": probe, "other": other}, [1, 2], 2)
    assert set(times) == {("probe", 1), ("probe", 2), ("other", 1), ("other", 2)}
    assert all(t.shape == (2,) for t in times.values())
    assert times["other", 2].isnan().all() and not times["other", 1].isnan().any()
    assert (times["probe", 2] > 3 * times["probe", 1]).all()
    assert calls == {"probe": 2 * 2 * 4, "other": 2 * 4}  # 3 runs + 1 warm-up each
    assert torch.get_num_threads() == 1  # left on one thread
    with pytest.raises(ValueError, match="start with 1"):
        thread_gain.timing_rounds({"probe": probe}, [2], 1)


def test_gains_are_one_thread_over_many():
    times = {("a", 1): torch.tensor([2.0, 3.0]), ("a", 4): torch.tensor([1.0, 1.5]),
             ("b", 1): torch.tensor([1.0, 1.0]), ("b", 4): torch.tensor([2.0, 0.5])}  # fmt: skip
    gain = thread_gain.gains(times, 4)
    assert list(gain) == ["a", "b"]
    assert gain["a"].tolist() == [2.0, 2.0] and gain["b"].tolist() == [0.5, 2.0]


def _gain(att, gru):
    return {"attention": torch.tensor(att), "GRU": torch.tensor(gru)}


def test_verdict_says_only_what_the_rounds_support():
    nan = float("nan")
    assert thread_gain.verdict(_gain([1.0], [1.0]), 1).startswith("This run had one")
    busy = thread_gain.verdict(_gain([1.5, 1.7, 1.6], [nan] * 3), 2)
    assert busy.startswith("With 2 threads, attention's forward pass ran 1.60 times")
    assert "left the GRU out" in busy
    neither = thread_gain.verdict(_gain([1.0, 1.05], [0.5, 0.6]), 2)
    assert neither.startswith("Neither layer ran faster with 2 threads")
    assert "attention 1.00×, the GRU 0.50× (slower)" in neither and neither.endswith(
        "every round."
    )
    assert thread_gain.verdict(_gain([1.0, 0.5], [0.9, 0.9]), 2).endswith("threads.")
    gru_only = thread_gain.verdict(_gain([1.0, 1.0], [1.5, 1.5]), 2)
    assert "does not show attention gaining more" in gru_only
    wins = thread_gain.verdict(_gain([1.8, 1.9, 2.0], [1.0, 1.1, 1.0]), 2)
    assert wins.startswith("With 2 threads, attention's forward pass ran 1.90 times")
    assert wins.endswith("attention gained more from the extra threads in every round.")
    split = thread_gain.verdict(_gain([1.8, 1.9, 2.0], [2.5, 1.1, 1.0]), 2)
    assert "attention gained more in 2 of those rounds" in split
    # rounds without the GRU are left out of the comparison
    some = thread_gain.verdict(_gain([1.8, 1.9, 1.2], [1.0, 1.0, nan]), 2)
    assert "medians of 2 rounds that timed both" in some
