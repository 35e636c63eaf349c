"""benchmarks/ch12_*: the committed results chapter 12 reads are well formed (every
choice is the best of its own runs, every arm has its seeds), and the scripts that make
them run briefly where the data are (``$TRANSFORMER_BOOK_DATA``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_book import data_files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
needs_real_data = pytest.mark.skipif(
    not os.environ.get(data_files.DATA_ENV), reason=f"${data_files.DATA_ENV} is not set"
)


def check_few_labels(result: dict) -> None:
    s = result["settings"]
    assert {"n_labels", "n_select", "min_words", "seed", "batch_size", "max_len",
            "eval_len", "epochs", "lrs", "seeds", "select_seed", "n_dev"} <= set(s)  # fmt: skip
    steps = s["epochs"] * -(-s["n_labels"] // s["batch_size"])
    assert set(result["selection_runs"]) == set(result["chosen"])
    assert set(result["final_runs"]) == set(result["chosen"]) == set(result["dev"])
    for key, runs in result["selection_runs"].items():
        assert sorted(r["lr"] for r in runs) == sorted(s["lrs"])
        assert all(r["steps"] == steps and r["seed"] == s["select_seed"] for r in runs)
        best = max(r["selection_accuracy"] for r in runs)
        chosen = result["chosen"][key]["lr"]
        assert next(r for r in runs if r["lr"] == chosen)["selection_accuracy"] == best
    for key, runs in result["final_runs"].items():
        assert [r["seed"] for r in runs] == s["seeds"]
        assert all(r["lr"] == result["chosen"][key]["lr"] for r in runs)
        assert all(0 <= r["dev_accuracy"] <= 1 for r in runs)
        assert result["dev"][key]["n"] == len(runs)
    probed = result["probe"]
    assert "skipped" in probed or probed["pooling"] in probed["selection_accuracy"]
    assert 0 < result["majority"]["dev_accuracy"] < 1


def test_committed_few_label_result_is_well_formed():
    result = json.loads((RESULTS / "ch12_few_labels.json").read_text())
    check_few_labels(result)
    assert set(result["chosen"]) == {
        "pre-trained/cls", "pre-trained/mean", "scratch/cls", "scratch/mean"
    }  # fmt: skip
    assert len(result["settings"]["seeds"]) >= 3 and result["settings"]["n_dev"] == 872
    assert result["longer"]["epochs"] > result["settings"]["epochs"]


def test_committed_sst_bert_result_runs_the_same_recipe():
    result = json.loads((RESULTS / "ch12_few_labels_sst_bert.json").read_text())
    minilm = json.loads((RESULTS / "ch12_few_labels.json").read_text())
    check_few_labels(result)
    assert result["encoder"] == "sst-bert"
    assert set(result["chosen"]) == set(minilm["chosen"])
    same = ("n_labels", "n_select", "min_words", "select_min_words", "ngram", "seed",
            "batch_size", "max_len", "eval_len", "epochs", "lrs", "seeds",
            "select_seed", "n_dev")  # fmt: skip
    assert {k: result["settings"][k] for k in same} == {
        k: minilm["settings"][k] for k in same
    }
    assert result["majority"] == minilm["majority"]  # the same phrases and dev
    assert result["longer"]["epochs"] == minilm["longer"]["epochs"]


def test_committed_qa_result_is_well_formed():
    result = json.loads((RESULTS / "ch12_qa_learning_rate.json").read_text())
    assert result["chosen_lr"] == max(result["scores"], key=lambda s: s["f1"])["lr"]
    assert all(0 <= s["exact_match"] <= s["f1"] <= 1 for s in result["scores"])
    assert result["settings"]["steps"] >= 1 and result["dev_questions"] > 0


@needs_real_data
def test_the_few_label_script_runs_one_setting(tmp_path):
    out = tmp_path / "few.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "ch12_few_labels.py"),
           "--poolings", "mean", "--lrs", "1e-3", "--epochs", "1", "--seeds", "0",
           "--longer-epochs", "0", "--n-dev", "20", "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    result = json.loads(out.read_text())
    check_few_labels(result)
    assert set(result["chosen"]) == {"pre-trained/mean", "scratch/mean"}
    assert result["settings"]["n_dev"] == 20 and "longer" not in result


@needs_real_data
def test_the_few_label_script_runs_sst_bert(tmp_path):
    out = tmp_path / "few.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "ch12_few_labels.py"),
           "--encoder", "sst-bert", "--poolings", "cls", "--lrs", "1e-3",
           "--epochs", "1", "--seeds", "0", "--longer-epochs", "0", "--no-probe",
           "--n-dev", "20", "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    result = json.loads(out.read_text())
    assert result["encoder"] == "sst-bert" and "skipped" in result["probe"]
    assert set(result["chosen"]) == {"pre-trained/cls", "scratch/cls"}
