"""`make release`'s archive: unpacked elsewhere, every file matches its MANIFEST digest,
the site opens at index.html, and the wheel installs and imports in a fresh environment."""

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import book as pipeline  # noqa: E402  (scripts/book.py)

pytestmark = pytest.mark.book


def test_release_archive_unpacks_verifies_and_installs(built_book, tmp_path):
    result, html = built_book
    assert result.returncode == 0, result.stderr[-2000:]
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "book.py"),
            "release",
            "--site",
            str(html),
            "--out",
            str(tmp_path / "dist"),
            "--date",
            "2026-12-01",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    archive = tmp_path / "dist" / f"{pipeline.RELEASE_NAME}-2026-12-01.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "elsewhere", filter="data")
    top = tmp_path / "elsewhere" / f"{pipeline.RELEASE_NAME}-2026-12-01"

    rows = (top / "MANIFEST.tsv").read_text().splitlines()[1:]
    listed = {}
    for row in rows:
        digest, size, rel = row.split("\t")
        data = (top / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest and len(data) == int(size), (
            rel
        )
        listed[rel] = digest
    on_disk = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()} - {
        "MANIFEST.tsv"
    }
    assert set(listed) == on_disk, "the MANIFEST lists every file, and only those"

    chapters = [src.stem for src in pipeline.chapters()]
    assert (top / "site" / "index.html").is_file()
    for stem in chapters:
        assert (top / "site" / f"{stem}.html").is_file() or any(
            (top / "site").rglob(f"{stem}.html")
        ), stem
        assert (top / "notebooks" / f"{stem}.ipynb").is_file()
        assert (top / "student" / f"{stem}.ipynb").is_file()
        assert (top / "course" / "source" / stem / f"{stem}.ipynb").is_file()
    for f in pipeline.RELEASE_FILES:
        assert (top / f).read_bytes() == (ROOT / f).read_bytes()

    wheels = list((top / "wheel").glob("transformer_book-*.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(wheels[0])], check=True
    )
    version = subprocess.run(
        [
            python,
            "-c",
            "import transformer_book as t; print(t.__version__, t.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert version.startswith("0.1.0 ") and str(venv) in version
