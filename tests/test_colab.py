"""A chapter's first cells run as they would in Colab: the header installs the package
from the repository's git address into an environment that has only torch, and the
chapter then imports it and sets up its run.

Colab comes with torch; here a fresh virtual environment gets the book's pinned torch,
a stand-in ``google.colab`` module, and a local clone of this repository in place of the
GitHub address (the header's own pip command, with only the address swapped).
"""

import os
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import book as pipeline  # noqa: E402  (scripts/book.py)

pytestmark = pytest.mark.colab
CHAPTER = ROOT / "notebooks" / "01_self_attention.py"


def run(*cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_chapter_starts_with_the_generated_header():
    for src in pipeline.chapters():
        first = next(c for c in jupytext.read(src).cells if c.cell_type == "code")
        assert first.source == pipeline.header_source(src), (
            f"{src.name}: run `python scripts/book.py headers`"
        )


def test_a_chapter_installs_and_starts_as_in_colab(tmp_path):
    clone, venv, fake = tmp_path / "repo", tmp_path / "venv", tmp_path / "fake"
    run("git", "clone", "-q", str(ROOT), str(clone))
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    torch_pin = next(
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    run(python, "-m", "pip", "install", "-q", "--upgrade", "pip")  # Colab's is recent
    run(python, "-m", "pip", "install", "-q", torch_pin)  # Colab's preinstalled torch
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text('"""A stand-in."""\n')

    code = [c.source for c in jupytext.read(CHAPTER).cells if c.cell_type == "code"]
    url = pipeline.header_source(CHAPTER).split('repo = "')[1].split('"')[0]
    assert code[0].count(url) == 1
    header = code[0].replace(url, clone.as_uri())
    params = next(i for i, c in enumerate(code) if c.startswith('device = "auto"'))
    script = "\n\n".join(
        ["import google.colab", header, *code[1 : params + 2]]
        + ["import transformer_book; print('package at', transformer_book.__file__)"]
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env.update(PYTHONPATH=str(fake), MPLBACKEND="Agg")
    out = run(python, "-c", script, cwd=tmp_path, env=env)
    assert "device=cpu profile=quick" in out, out
    assert f"package at {venv}" in out, "the package came from the fresh environment"
