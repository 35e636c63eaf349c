"""benchmarks/ch13_distillation.py: the committed result chapter 13 reads is well
formed (every arm's choice is the best mean dev accuracy of its own runs, every
setting has its seeds, the margins follow from the runs), and the script runs briefly
where the data are (``$TRANSFORMER_BOOK_DATA``)."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_book import data_files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = {
    "probe": ROOT / "benchmarks" / "results" / "ch13_distillation.json",
    "tuned": ROOT / "benchmarks" / "results" / "ch13_distillation_tuned.json",
}
needs_real_data = pytest.mark.skipif(
    not os.environ.get(data_files.DATA_ENV), reason=f"${data_files.DATA_ENV} is not set"
)


def check_distillation(result: dict) -> None:
    by_config: dict[str, list[dict]] = {}
    for r in result["runs"]:
        by_config.setdefault(r["config"], []).append(r)
        assert 0 <= r["dev"] <= 1 and 0 <= r["test"] <= 1
    for config, runs in by_config.items():
        assert sorted(r["seed"] for r in runs) == result["seeds"], config
        mean = statistics.mean(r["dev"] for r in runs)
        assert result["mean_dev"][config] == pytest.approx(mean)
    for arm, config in result["chosen"].items():
        assert config.split(":")[0] == arm
        same_arm = [k for k in by_config if k.split(":")[0] == arm]
        assert result["mean_dev"][config] == max(
            result["mean_dev"][k] for k in same_arm
        )
        assert result["test_at_chosen"][arm] == [r["test"] for r in by_config[config]]
    for name, m in result["margins"].items():
        arm = name.removesuffix("_minus_hard")
        a, h = result["test_at_chosen"][arm], result["test_at_chosen"]["hard"]
        assert m["diff"] == pytest.approx(statistics.mean(a) - statistics.mean(h))
        assert m["outside_2sd"] == (abs(m["diff"]) > 2 * m["sd"])
    for r in result["runs"]:  # a setting names its updates when they are not 60
        steps = r.get("steps", result["steps"])
        assert r["config"].endswith(f"@{steps}") == (steps != 60), r["config"]
    assert result["student_layers"] in [json.loads(k) for k in result["copies"]]
    if "machines" in result:  # one machine per command that contributed runs
        assert len(result["machines"]) == len(result["commands"])
    assert 0 < result["majority_test"] < 1 and 0 < result["teacher"]["test"] <= 1


@pytest.mark.parametrize("teacher", sorted(RESULTS))
def test_committed_distillation_result_is_well_formed(teacher):
    result = json.loads(RESULTS[teacher].read_text())
    check_distillation(result)
    assert result.get("teacher_kind", "probe") == teacher
    assert set(result["chosen"]) == {"hard", "teacher_hard", "soft"}
    assert len(result["seeds"]) >= 3
    assert result["n_transfer"] > 4 * result["n_train"]  # many more than labelled


@needs_real_data
@pytest.mark.parametrize("teacher", sorted(RESULTS))
def test_script_runs_briefly(tmp_path, teacher):
    out = tmp_path / "kd.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "ch13_distillation.py"),
               "--steps", "1", "--seeds", "0", "1", "--out", str(out),
               "--teacher", teacher,
               "--n-transfer", "64",
               "--configs", "hard:1e-4", "soft:1e-4:2"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, check=True, env=env, capture_output=True)
    result = json.loads(out.read_text())
    check_distillation(result)
    assert result["steps"] == 1 and set(result["chosen"]) == {"hard", "soft"}
    assert result["teacher_kind"] == teacher
