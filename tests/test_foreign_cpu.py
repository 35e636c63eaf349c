"""The "another CPU" of `make test`: tests/foreign_cpu.env must change the last bits of
computations from each of torch's CPU back ends (or nbval could not catch an output that
depends on the machine), and bf16 must still run under it (a chapter shows bf16)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV_FILE = Path(__file__).with_name("foreign_cpu.env")

PROBE = r"""
import hashlib, json
import torch
import torch.nn.functional as F

torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
a, b = torch.randn(256, 512, generator=g), torch.randn(512, 256, generator=g)
x = torch.randn(64, 1000, generator=g)
q = torch.randn(2, 4, 33, 16, generator=g)


def digest(t):
    return hashlib.sha256(t.float().contiguous().numpy().tobytes()).hexdigest()


bf = q.bfloat16()
print(json.dumps({
    "capability": torch.backends.cpu.get_cpu_capability(),
    "matmul": digest(a @ b),                       # MKL sgemm
    "softmax": digest(torch.softmax(x, -1)),       # ATen's vectorised kernels
    "layer_norm": digest(F.layer_norm(x, (1000,))),
    "gelu": digest(F.gelu(x)),                     # oneDNN's eltwise kernel
    "sdpa_bf16": digest(F.scaled_dot_product_attention(bf, bf, bf, is_causal=True)),
    "linear_bf16": digest(F.linear(a.bfloat16(), b.T.bfloat16())),
}))
"""


def foreign_settings(path: Path = ENV_FILE) -> dict[str, str]:
    """KEY=VALUE lines of the settings file; comments and blank lines skipped."""
    settings = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"{path.name}:{n}: expected KEY=VALUE, got {line!r}")
        settings[key] = value
    return settings


def probe(settings: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in foreign_settings()}
    run = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **settings},
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, f"probe failed under {settings}:\n{run.stderr[-2000:]}"
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def results():
    foreign = foreign_settings()
    without_onednn = {k: v for k, v in foreign.items() if k != "DNNL_MAX_CPU_ISA"}
    return probe({}), probe(foreign), probe(without_onednn)


def test_the_settings_file_names_all_three_back_ends():
    assert set(foreign_settings()) == {
        "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "DNNL_MAX_CPU_ISA"
    }  # fmt: skip


def test_a_malformed_line_is_named(tmp_path):
    bad = tmp_path / "bad.env"
    bad.write_text("# fine\nATEN_CPU_CAPABILITY default\n")
    with pytest.raises(ValueError, match="bad.env:2: expected KEY=VALUE"):
        foreign_settings(bad)


def test_aten_runs_its_baseline_kernels_and_the_machine_has_faster_ones(results):
    native, foreign, _ = results
    # torch >= 2.7 names the baseline "DEFAULT", torch 2.6 "NO AVX"
    baseline = ("DEFAULT", "NO AVX")
    assert foreign["capability"] in baseline
    assert native["capability"] not in baseline, "this CPU has no vectorised ATen build"


@pytest.mark.parametrize("computation", ["matmul", "softmax", "layer_norm"])
def test_the_settings_change_the_last_bits(results, computation):
    native, foreign, _ = results
    assert foreign[computation] != native[computation], (
        f"{computation} gives the same bits natively and under {ENV_FILE.name}: "
        "nbval would not see an output that depends on the machine"
    )


def test_the_onednn_setting_moves_onednn_kernels(results):
    _, foreign, without_onednn = results
    assert foreign["gelu"] != without_onednn["gelu"]


def test_bf16_runs_under_the_settings(results):
    """The probe ran bf16 attention and a bf16 matrix product without error."""
    _, foreign, _ = results
    assert foreign["sdpa_bf16"] and foreign["linear_bf16"]
