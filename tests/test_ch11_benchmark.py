"""benchmarks/ch11_nsp_kinds.py: the committed result chapter 11 reads is well formed
(both arms have every run length and seed, each balanced test follows from the accuracies by
kind, every accuracy is a share of 900 pairs), and the script runs briefly."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_book import data_files, masked_lm, nsp_kinds, pretraining

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "ch11_nsp_kinds.json"
needs_real_data = pytest.mark.skipif(
    not os.environ.get(data_files.DATA_ENV), reason=f"${data_files.DATA_ENV} is not set"
)


def check_nsp_kinds(result: dict) -> None:
    cells = sorted((r["negatives"], r["steps"], r["seed"]) for r in result["runs"])
    assert cells == sorted(
        (n, s, k)
        for n in result["negatives"]
        for s in result["steps"]
        for k in result["seeds"]
    )
    n_kind = result["n_heldout"] * len(result["kinds"])  # pairs of each kind
    for run in result["runs"]:
        for split in ("dev", "test"):
            scores = run[split]
            assert set(scores["accuracy"]) == set(masked_lm.NSP_KINDS)
            for accuracy in scores["accuracy"].values():
                assert round(accuracy * n_kind, 6).is_integer()
            kind, coherence = pretraining.kind_and_coherence(scores["accuracy"])
            assert (scores["kind"], scores["coherence"]) == (kind, coherence)
            assert set(scores["auc"]) == set(masked_lm.NSP_KINDS[1:])
            assert all(0 <= a <= 1 for a in scores["auc"].values())
            assert 0 <= scores["natural"]["nsp_accuracy"] <= 1
    summary = nsp_kinds.nsp_kinds_summary(result)
    assert summary["chosen"] in result["steps"]


def test_committed_result_is_well_formed():
    result = json.loads(RESULT.read_text())
    check_nsp_kinds(result)
    assert len(result["seeds"]) >= 3 and result["recipe"]["nsp"]


@needs_real_data
def test_script_runs_briefly(tmp_path):
    out = tmp_path / "nsp.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "ch11_nsp_kinds.py"),
               "--steps", "3", "--seeds", "0", "--n-train", "60", "--n-heldout", "50",
               "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(command, check=True, env=env, capture_output=True)
    result = json.loads(out.read_text())
    check_nsp_kinds(result)
    assert result["steps"] == [3] and result["n_train"] == 60
    assert result["n_heldout"] == 50
