"""benchmarks/: the committed nanoGPT throughput result is well formed, and the script
that measures it runs (briefly) where nanoGPT's model is available (CI has it at
../shared/reference/nanogpt; NANOGPT_DIR overrides)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformer_book import report

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "nanogpt_throughput.py"
RESULT = ROOT / "benchmarks" / "results" / "nanogpt_throughput.json"
# the same benchmark on the same chip, torch and MKL held to AVX2 code (another kind of CPU)
RESULT_AVX2 = ROOT / "benchmarks" / "results" / "nanogpt_throughput_avx2.json"
NANOGPT = Path(os.environ.get("NANOGPT_DIR", ROOT.parent / "shared/reference/nanogpt"))
MODELS = ("gpt.GPT", "nanoGPT")


def check_result(result: dict) -> None:
    """The fields chapter 14 reads, with consistent values."""
    assert result["config"] == dict(
        vocab_size=65, context=64, n_layers=4, n_heads=4, d_model=128, batch_size=12,
        dropout=0.0, bias=False,
    )  # fmt: skip
    assert result["parameters"] == 804_096  # both models, checked equal by the script
    for key in ("tokens_per_s", "tokens_per_cpu_s"):
        assert set(result[key]) == set(MODELS) and all(
            v > 0 for v in result[key].values()
        )
    wall = result["tokens_per_s"]
    assert result["ratio"] == pytest.approx(wall["gpt.GPT"] / wall["nanoGPT"])
    for clock in ("wall", "cpu"):
        lengths = {len(result["repeats"][clock][m]) for m in MODELS}
        assert len(lengths) == 1 and lengths.pop() % 2 == 0  # each first in half
    for key in ("torch", "python", "date", "command", "device", "nanogpt_model_sha256"):
        assert isinstance(result[key], str) and result[key]
    assert result["machine"]["cpu"] and result["machine"]["cores"] >= 1
    assert result["machine"]["cpu_capability"]  # the code path torch's kernels took
    for clock in ("wall", "cpu"):  # the rounds paired: ratio and interval, recomputed
        per = result["repeats"][clock]
        ratio, low, high = report.median_ratio(per["gpt.GPT"], per["nanoGPT"])
        assert result["paired"][clock] == pytest.approx(
            {"ratio": ratio, "low": low, "high": high}
        )
        assert low <= ratio <= high
    assert result["threads"] >= 1 and result["steps_per_repeat"] >= 1
    loop = result["per_tensor_loop"]
    assert set(loop["tokens_per_s"]) == set(MODELS)
    assert loop["ratio"] == pytest.approx(
        loop["tokens_per_s"]["gpt.GPT"] / loop["tokens_per_s"]["nanoGPT"]
    )
    assert result["parameter_tensors"] == {
        "gpt.GPT": 27,
        "nanoGPT": 27,
    }  # q, k, v stacked
    for counts in result["operations_per_step"].values():
        assert counts["foreach"] > 0 and counts["loop"] > 0
    phases = result["phases"]  # each phase's median ms per step, and their ratio
    assert set(phases["ms"]) == set(MODELS)
    for name in ("forward_backward", "clip", "adamw"):
        ms = {m: phases["ms"][m][name] for m in MODELS}
        assert all(v > 0 for v in ms.values())
        assert phases["ratio"][name] == pytest.approx(ms["gpt.GPT"] / ms["nanoGPT"])
        per_round = phases["rounds"]["ms"]  # each round's median, each round's ratio
        assert phases["rounds"]["ratio"][name] == pytest.approx(
            [
                a / b
                for a, b in zip(per_round["gpt.GPT"][name], per_round["nanoGPT"][name])
            ]
        )
        assert len(per_round["gpt.GPT"][name]) == len(
            result["repeats"]["wall"]["nanoGPT"]
        )


def test_committed_results_are_well_formed_and_ran_on_two_code_paths():
    results = [json.loads(path.read_text()) for path in (RESULT, RESULT_AVX2)]
    for result in results:
        check_result(result)
    default, avx2 = (r["machine"] for r in results)
    assert avx2["cpu_capability"] == "AVX2" and default["cpu_capability"] != "AVX2"
    assert avx2["cpu_path_settings"]["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert results[1]["command"].startswith("ATEN_CPU_CAPABILITY=avx2 ")  # repeatable
    assert default["cpu"] == avx2["cpu"]  # the same chip, another code path


@pytest.mark.skipif(
    not (NANOGPT / "model.py").is_file(), reason=f"no nanoGPT model.py in {NANOGPT}"
)
def test_the_script_measures_both_models(tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(SCRIPT), "--nanogpt", str(NANOGPT), "--steps", "2",
           "--repeats", "6", "--warmup", "1", "--threads", "1", "--out", str(out)]  # fmt: skip
    printed = subprocess.run(
        cmd, check=True, capture_output=True, text=True, timeout=600
    )
    assert "ratio" in printed.stdout
    result = json.loads(out.read_text())
    check_result(result)
    assert result["threads"] == 1 and result["steps_per_repeat"] == 2
    assert len(result["repeats"]["wall"]["nanoGPT"]) == 6


@pytest.mark.parametrize("repeats", ["7", "4"])
def test_an_odd_or_too_small_number_of_rounds_is_refused(tmp_path, repeats):
    out = str(tmp_path / "x.json")
    cmd = [sys.executable, str(SCRIPT), "--repeats", repeats, "--out", out]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert f"--repeats must be even and at least 6, got {repeats}" in done.stderr


def test_a_missing_nanogpt_folder_is_named(tmp_path):
    cmd = [sys.executable, str(SCRIPT), "--nanogpt", str(tmp_path), "--out",
           str(tmp_path / "x.json")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and f"no nanoGPT model.py in {tmp_path}" in done.stderr
