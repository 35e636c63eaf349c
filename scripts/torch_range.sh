#!/usr/bin/env bash
# scripts/torch_range.sh VERSION [PIP_SPEC...]: the package's tests on another torch.
#
#   scripts/torch_range.sh 2.14.1                       # the newest torch pip offers here
#   scripts/torch_range.sh 2.6.0                        # the lowest that pyproject.toml declares
#   KEEP=1 scripts/torch_range.sh 2.4.1 transformers==5.14.1   # extra pins, environment kept
#
# For VERSION: a fresh virtual environment outside the repository
# ($TORCH_RANGE_DIR/torch-VERSION, default /tmp) with Python 3.11; torch==VERSION
# installed first and pinned (pip's torch for Linux is the CUDA build, ~1 GB plus its
# nvidia-* wheels; it runs on a CPU-only machine too), then requirements.txt without its
# torch pin, requirements-nodeps.txt without dependencies, any PIP_SPEC given (pins that
# an older torch needs, e.g. a reference library's older release), and this repository
# (editable, no dependencies). Then `make check`'s selection of the tests (the slow tiers
# and the notebooks' re-execution left out) on one thread, and the outcome (versions,
# counts, failing tests, seconds) recorded under VERSION in
# benchmarks/results/torch_range.json. The environment is deleted afterwards unless
# KEEP=1; REUSE=1 keeps an environment that is already there (no install). TESTS (default
# "tests") names the test files to run, PYTEST_ARGS (e.g. "-n 2") more pytest options.
#
# On a shared machine, TEST_NICE=19 runs the tests (not the installs, mostly network
# and disk) at the lowest CPU priority: under `nice`, and with the process session's
# autogroup niced too (Linux). setsid gives the run a session of its own:
#   TEST_NICE=19 setsid scripts/torch_range.sh 2.14.1
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
version=${1:?usage: scripts/torch_range.sh TORCH_VERSION [PIP_SPEC...]}
shift
extra=("$@")
PYTHON=${PYTHON:-python3.11}
venv=${TORCH_RANGE_DIR:-/tmp}/torch-$version
result=$ROOT/benchmarks/results/torch_range.json
selection="not (book or browser or distributed or grading or dataset or colab)"
log=$(mktemp -d)

export HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 TOKENIZERS_PARALLELISM=false
export TRANSFORMER_BOOK_PROGRESS=0 OMP_NUM_THREADS=1 TRANSFORMER_BOOK_MAX_THREADS=1
if [ -z "${TRANSFORMER_BOOK_DATA:-}" ] && [ -d ../shared/data ]; then
  export TRANSFORMER_BOOK_DATA="$(cd ../shared/data && pwd)"
fi

start=$(date +%s)
py=$venv/bin/python
if [ "${REUSE:-0}" = 1 ] && [ -x "$py" ]; then
  echo "[torch $version] reusing $venv"
else
  rm -rf "$venv"
  $PYTHON -m venv "$venv"
  pip_install() {  # quiet, less the warnings of a pip configured with local indexes
    set +e
    "$py" -m pip install -q "$@" 2>&1 | grep -v 'is ignored: it is neither a file nor a directory'
    local s=${PIPESTATUS[0]}
    set -e
    return "$s"
  }
  pip_install --upgrade pip
  pip_install "torch==$version"
  pip_install -r <(grep -v -E '^torch==' requirements.txt)
  pip_install --no-deps -r requirements-nodeps.txt
  if [ ${#extra[@]} -gt 0 ]; then pip_install "${extra[@]}"; fi
  pip_install --no-deps -e .
fi
# the extra pins must not have moved torch
$py - "$version" <<'EOF'
import sys, torch
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
EOF
installed=$(( $(date +%s) - start ))
echo "[torch $version] installed in $installed s ($(du -sh "$venv" | cut -f1))"

start=$(date +%s)
nice=()
if [ -n "${TEST_NICE:-}" ]; then
  echo "$TEST_NICE" > /proc/self/autogroup 2>/dev/null || true
  nice=(nice -n "$TEST_NICE")
fi
set +e
# shellcheck disable=SC2086
"${nice[@]}" $py -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} -m "$selection" \
  --junitxml="$log/junit.xml" ${TESTS:-tests} 2>&1 | tee "$log/pytest.txt" | tail -n 40
status=${PIPESTATUS[0]}
set -e
tested=$(( $(date +%s) - start ))
echo "[torch $version] tests in $tested s"

$py - "$version" "$result" "$log" "$installed" "$tested" "${TESTS:-tests} -m \"$selection\"" "${extra[@]}" <<'EOF'
"""Merge this run into benchmarks/results/torch_range.json (one entry per version)."""
import datetime, importlib.metadata as md, json, os, platform, sys
import xml.etree.ElementTree as ET
from pathlib import Path

version, result, log, installed, tested, selection, *extra = sys.argv[1:]
suite = ET.parse(Path(log) / "junit.xml").getroot()
counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
failures, skips = [], {}
for case in suite.iter("testcase"):
    name = f"{case.get('classname')}::{case.get('name')}"
    kinds = [child.tag for child in case]
    if "failure" in kinds or "error" in kinds:
        kind = "failed" if "failure" in kinds else "error"
        counts[kind] += 1
        msg = next(c for c in case if c.tag in ("failure", "error")).get("message", "")
        failures.append({"test": name, "kind": kind, "message": msg.splitlines()[0][:300] if msg else ""})
    elif "skipped" in kinds:
        counts["skipped"] += 1
        why = next(c for c in case if c.tag == "skipped").get("message", "")[:200]
        skips[why] = skips.get(why, 0) + 1
    else:
        counts["passed"] += 1
import torch
entry = {
    "torch": torch.__version__,
    "cuda_build": torch.version.cuda,
    "python": platform.python_version(),
    "packages": {p: md.version(p) for p in ("numpy", "transformers", "safetensors", "pytest")},
    "extra_pins": extra,
    "selection": selection,
    "counts": counts,
    "ok": counts["failed"] == 0 and counts["error"] == 0 and counts["passed"] > 0,
    "failures": failures,
    "skip_reasons": skips,
    "install_s": int(installed),
    "tests_wall_s": int(tested),
    "machine": {"cores": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 1)},
    "date": datetime.date.today().isoformat(),
    "command": " ".join(["scripts/torch_range.sh", version, *extra]),
}
path = Path(result)
data = json.loads(path.read_text()) if path.exists() else {"runs": {}}
data["runs"][version] = entry
data["runs"] = dict(sorted(data["runs"].items(), key=lambda kv: [int(x) for x in kv[0].split(".")]))
path.write_text(json.dumps(data, indent=1) + "\n")
print(f"[torch {version}] {counts} -> {path}")
EOF

if [ "${KEEP:-0}" != 1 ]; then rm -rf "$venv"; fi
rm -rf "$log"
exit "$status"
