"""Shared fixtures: the book rendered once per test session, all-MiniLM-L6-v2 loaded
once, and every figure a test opened closed after it (so that no test draws on another
test's current axes)."""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # only if the test used pyplot
    if plt is not None:
        plt.close("all")


@pytest.fixture(scope="session")
def built_book(tmp_path_factory):
    """Run ``jupyter-book build`` with warnings as errors; return (result, html folder).

    Built once per test run: under pytest-xdist every worker has its own session, so
    the first worker to ask builds into a folder they share and the others wait for it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # the folder of the whole run, not the worker's own
        shared = tmp_path_factory.getbasetemp().parent
    else:
        shared = tmp_path_factory.getbasetemp()
    out = shared / "book"
    with FileLock(str(shared / "book.lock")):
        if (out / "result.pickle").is_file():
            result = pickle.loads((out / "result.pickle").read_bytes())
        else:
            result = _build(out)
            (out / "result.pickle").write_bytes(pickle.dumps(result))
    return result, out / "_build" / "html"


def _build(out: Path) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run(
        [
            str(jb),
            "build",
            str(ROOT),
            "-W",
            "-n",
            "--keep-going",
            "--path-output",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 in the book's BERT and its tokenizer, loaded once (test_bert,
    test_minilm_weights, test_sentence_similarity)."""
    from transformer_book import minilm_weights

    return minilm_weights.from_pretrained(), minilm_weights.pretrained_tokenizer()
