"""benchmarks/t5_bias_lr_scale.py and benchmarks/ch10_intents.py: their committed
results hold the choices chapter 10 reads (recomputed here from the runs on file), and
the sweep script runs (briefly) and adds runs to a result without losing any."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from transformer_book import span_pretraining

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def test_the_bias_multiple_on_file_is_the_dev_choice_and_the_default():
    result = json.loads((RESULTS / "t5_bias_lr_scale.json").read_text())
    by_scale = {}
    for run in result["runs"]:
        by_scale.setdefault(run["scale"], []).append(run["dev_nats"])
    assert all(len(v) >= 3 for v in by_scale.values())  # seeds behind every mean
    chosen = min(by_scale, key=lambda s: statistics.mean(by_scale[s]))
    assert (
        result["chosen"]
        == chosen
        == span_pretraining.SpanPretrainConfig().bias_lr_scale
    )
    assert result["baselines"]["hidden_words"] > 1000
    assert result["commands"] and result["machine"]["cores"] >= 1


def test_the_intent_recipes_on_file_are_the_dev_choices():
    result = json.loads((RESULTS / "ch10_intents.json").read_text())
    assert set(result["by_init"]) == {"pretrained", "scratch"}
    for init, choice in result["by_init"].items():
        runs = [r for r in result["runs"] if r["init"] == init]
        dev = {}
        for run in runs:
            for step, acc in run["dev"].items():
                dev.setdefault((run["lr"], int(step)), []).append(acc)
        assert all(len(v) >= 3 for v in dev.values())  # seeds behind every mean
        best = max(dev, key=lambda k: statistics.mean(dev[k]))
        assert best == (choice["chosen_lr"], choice["chosen"])
        at_choice = [r["test"][str(choice["chosen"])] for r in runs
                     if r["lr"] == choice["chosen_lr"]]  # fmt: skip
        assert at_choice == choice["test_at_chosen"]
    assert result["test_at_chosen"] == result["by_init"]["pretrained"]["test_at_chosen"]
    assert 0.5 < result["majority_test"] < 1


def test_the_bias_sweep_runs_and_adds_runs(tmp_path):
    out = tmp_path / "sweep.json"
    script = [sys.executable, str(ROOT / "benchmarks" / "t5_bias_lr_scale.py"),
              "--steps", "2", "--out", str(out)]  # fmt: skip
    subprocess.run([*script, "--scales", "1", "30", "--seeds", "0"], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    subprocess.run([*script, "--scales", "30", "--seeds", "1", "--add"], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    result = json.loads(out.read_text())
    assert sorted((r["scale"], r["seed"]) for r in result["runs"]) == [
        (1, 0), (30, 0), (30, 1)]  # fmt: skip
    assert len(result["commands"]) == 2 and result["seeds"] == [0, 1]
    again = subprocess.run([*script, "--scales", "30", "--seeds", "1", "--add"],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert again.returncode != 0 and "already in" in again.stderr
