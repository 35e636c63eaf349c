"""The rendered book: jupyter-book builds book/ with warnings as errors."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_book_builds_without_warnings(tmp_path):
    jb = Path(sys.executable).with_name("jupyter-book")
    result = subprocess.run(
        [
            str(jb),
            "build",
            str(ROOT),
            "-W",
            "-n",
            "--keep-going",
            "--path-output",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    html = tmp_path / "_build" / "html"
    assert (html / "index.html").exists()
    for page in ["book/status.html", "book/references.html"] + [
        f"book/{p.stem}.html"
        for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    ]:
        assert (html / page).exists(), f"{page} was not rendered"
    status = (html / "book" / "status.html").read_text()
    assert "quick" in status and "seconds" in status
