"""benchmarks/kv_cache_speed.py: the script runs (briefly) and its result holds what
chapter 09 reads, consistent with itself: the cached and uncached runs wrote the same
tokens, the floor's ratios are each round's seconds over the floor's, the run that
keeps oneDNN for one token is read against the cached run beside it, and the reference
decoder (transformers' GPT-2) has the book's model's size and its ratios its rounds'."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "kv_cache_speed.py"
RESULT = ROOT / "benchmarks" / "results" / "kv_cache_speed.json"


def check_result(result: dict) -> None:
    assert result["same_tokens"]
    ref = result["reference"]
    assert ref["same_tokens"] and ref["parameters"] == result["parameters"]
    assert ref["rounds"] == pytest.approx(
        [u / c for u, c in zip(ref["runs"]["uncached"]["wall"],
                               ref["runs"]["cached"]["wall"])]
    )  # fmt: skip
    runs, floor = result["rounds"]["runs"], result["floor"]
    for mode in ("cached", "uncached"):
        walls = runs[mode]["wall"]
        assert floor["rounds"][mode] == pytest.approx(
            [t / f for t, f in zip(walls, floor["runs"]["wall"])]
        )
    bare = result["bare"]  # the same tokens with the operations alone
    assert bare["same_tokens"]
    assert bare["rounds"]["speedup"] == pytest.approx(
        [u / b for u, b in zip(runs["uncached"]["wall"], bare["runs"]["wall"])]
    )
    assert bare["rounds"]["structure_share"] == pytest.approx(
        [1 - b / c for b, c in zip(bare["runs"]["wall"], runs["cached"]["wall"])]
    )
    onednn = result["onednn"]  # the cached run with oneDNN kept for one token
    assert onednn["same_tokens"]
    assert onednn["rounds"]["saving"] == pytest.approx(
        [1 - c / o for c, o in zip(runs["cached"]["wall"], onednn["runs"]["wall"])]
    )
    calls = onednn["one_token_gelu_calls"]  # one per layer and one-token step
    assert calls == result["config"]["n_layers"] * (result["new_tokens"] - 1)
    extra = statistics.median(onednn["runs"]["wall"]) - statistics.median(
        runs["cached"]["wall"]
    )
    assert onednn["extra_us_per_call"] == pytest.approx(1e6 * extra / calls)
    gelu = onednn["gelu_call_us"]  # one call alone: warm, and after a layer's bytes
    assert gelu["sweep_bytes"] == 4 * 12 * result["config"]["d_model"] ** 2
    for case in ("warm", "cold"):
        assert set(gelu[case]) == {"oneDNN", "torch"}
        assert all(us > 0 for us in gelu[case].values())
    assert onednn["rounds"]["speedup"] == pytest.approx(
        [u / o for u, o in zip(runs["uncached"]["wall"], onednn["runs"]["wall"])]
    )
    ceiling = statistics.median(floor["rounds"]["uncached"])
    assert floor["ceiling"]["median"] == pytest.approx(ceiling)


def test_the_script_measures_cached_uncached_and_the_floor(tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(SCRIPT), "--repeats", "2", "--new-tokens", "8",
           "--step-repeats", "1", "--threads", "1",
           "--out", str(out)]  # fmt: skip
    printed = subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert "ceiling" in printed.stdout
    result = json.loads(out.read_text())
    assert result["new_tokens"] == 8
    assert len(result["rounds"]["runs"]["cached"]["wall"]) == 2
    check_result(result)


def test_committed_result_is_consistent():
    result = json.loads(RESULT.read_text())
    check_result(result)
    # what chapter 09 says of it (a brief run on a busy machine need not show it)
    assert result["speedup"]["wall"]["min"] > 1  # the cache is faster in every round
