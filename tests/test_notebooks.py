"""The book's notebooks: pairs in sync, executed edition fresh, conventions kept.

nbval (configured in pyproject.toml) separately re-executes every book/*.ipynb and
compares its outputs; these tests check what nbval cannot see.
"""

import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import book as pipeline  # noqa: E402  (scripts/book.py)

SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
IDS = [p.stem for p in SOURCES]


def cells(nb, drop_injected=True):
    """(type, source, tags) of every cell, ignoring outputs and papermill's injected parameters."""
    out = []
    for c in nb.cells:
        tags = list(c.metadata.get("tags", []))
        if drop_injected and "injected-parameters" in tags:
            continue
        out.append(
            (
                c.cell_type,
                c.source.strip(),
                sorted(t for t in tags if t != "papermill-error-cell-tag"),
            )
        )
    return out


def test_there_are_chapters():
    assert len(SOURCES) >= 2


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_pair_in_sync(src):
    paired = src.with_suffix(".ipynb")
    assert paired.exists(), f"{paired} missing: run `python scripts/book.py sync`"
    assert cells(jupytext.read(src)) == cells(nbformat.read(paired, as_version=4)), (
        f"{src.name} and {paired.name} differ: run `python scripts/book.py sync`"
    )


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_book_edition_is_fresh_and_executed(src):
    built = ROOT / "book" / f"{src.stem}.ipynb"
    assert built.exists(), (
        f"{built} missing: run `python scripts/book.py execute {src.stem[:2]}`"
    )
    nb = nbformat.read(built, as_version=4)
    assert cells(nb) == cells(jupytext.read(src)), (
        f"{built.name} is stale: re-execute {src.stem[:2]}"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), "some cells were never executed"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], (
        "an executed cell raised"
    )
    injected = [
        c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])
    ]
    assert len(injected) == 1 and 'profile = "quick"' in injected[0].source, (
        "the committed edition is the quick profile"
    )
    meta = nb.metadata["transformer_book"]
    assert meta["profile"] == "quick" and meta["device"] == "cpu"


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_parameters_cell(src):
    nb = jupytext.read(src)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged `parameters`"
    assert re.search(r'^device = "auto"', params[0].source, re.M)
    assert re.search(r'^profile = "auto"', params[0].source, re.M)


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_colab_cell_uses_the_configured_repository(src):
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    first_code = next(c for c in jupytext.read(src).cells if c.cell_type == "code")
    assert "google.colab" in first_code.source, (
        "the first code cell is the guarded Colab install"
    )
    assert f'repo = "{url}"' in first_code.source, (
        f"the Colab cell must install from {url} (_config.yml)"
    )


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_exercises_have_stub_solution_and_check(src):
    nb = jupytext.read(src)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Exercises" in md
    code = [c for c in nb.cells if c.cell_type == "code"]
    n_checks = 0
    for i, c in enumerate(code):
        if re.match(r"checks\.check_\w+\(", c.source.strip()):
            n_checks += 1
            sol, stub = code[i - 1], code[i - 2]
            assert "solution" in sol.metadata.get("tags", []), (
                f"the cell before {c.source!r} must be a solution"
            )
            assert "hide-cell" in sol.metadata.get("tags", []), (
                "solutions are collapsed in the book"
            )
            assert "NotImplementedError" in stub.source, (
                f"the cell before the solution of {c.source!r} is a stub"
            )
    assert 2 <= n_checks <= 4, f"{n_checks} self-checking exercises; expected 2 to 4"


def ignored_cells(nb):
    return [
        c
        for c in nb.cells
        if c.cell_type == "code" and pipeline.IGNORE_TAG in c.metadata.get("tags", [])
    ]


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_uncompared_outputs_are_asserted_or_measured(src):
    for c in ignored_cells(jupytext.read(src)):
        assert pipeline.ASSERTS.search(c.source) or pipeline.MEASURES.search(
            c.source
        ), (
            "this cell's output is not compared (nbval-ignore-output), so it must assert "
            "the claim its output supports (or be a timing/memory measurement):\n"
            + c.source[:400]
        )


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_code_lines_fit_the_page(src):
    # every line of a code cell is rendered in the code column, comments included
    too_long = [
        line
        for c in jupytext.read(src).cells
        if c.cell_type == "code"
        for line in c.source.splitlines()
        if len(line) > 88
    ]
    assert not too_long, (
        f"{len(too_long)} code lines over 88 characters are cut off on the page, "
        f"the first: {too_long[0]!r}"
    )


@pytest.mark.parametrize("src", SOURCES, ids=IDS)
def test_diagrams_have_alt_text(src):
    for c in jupytext.read(src).cells:
        if c.cell_type == "code" and re.search(r"\bdiagrams\.\w+\.\w+\(", c.source):
            alt = c.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt) >= 20, (
                "a cell that draws a diagram needs alt text describing it in its "
                f"metadata, mystnb={{'image': {{'alt': ...}}}}:\n{c.source[:300]}"
            )


def test_every_chapter_is_in_the_toc():
    toc = (ROOT / "_toc.yml").read_text()
    for src in SOURCES:
        assert f"book/{src.stem}" in toc, f"{src.stem} is not listed in _toc.yml"


def test_only_the_quick_cpu_edition_is_written_into_book():
    """book/ is the committed edition that nbval checks; a full or GPU run must not
    overwrite it (it would fail the next `make test`)."""
    assert pipeline.edition_folder("quick", "cpu") == ROOT / "book"
    for profile, device in (("full", "cuda"), ("full", "cpu"), ("quick", "cuda")):
        folder = pipeline.edition_folder(profile, device)
        assert folder == ROOT / "editions" / f"{profile}-{device}"


def test_status_page_is_up_to_date():
    assert (ROOT / "book" / "status.md").read_text() == pipeline.status_markdown(), (
        "book/status.md is stale: run `python scripts/book.py status`"
    )


def test_student_edition_drops_solutions(tmp_path):
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "book.py"),
            "student",
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
    )
    for src in SOURCES:
        nb = nbformat.read(tmp_path / f"{src.stem}.ipynb", as_version=4)
        tags = [t for c in nb.cells for t in c.metadata.get("tags", [])]
        assert "solution" not in tags
        sources = [c.source for c in nb.cells]
        assert any("NotImplementedError" in s for s in sources), "the stubs stay"
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_chapter_12_quotes_the_chapter_5_edition_beside_it():
    """Chapter 12 compares its tagger with chapter 5's, whose span F1 it cannot compute
    (a reader runs one chapter): the number it quotes is the one chapter 5's executed
    edition prints, so re-executing chapter 5 elsewhere makes this fail until the
    quote is updated."""
    ch12 = next(ROOT.glob("notebooks/12_*.py")).read_text()
    quoted = re.search(r"^ch05_f1, ch05_steps = ([0-9.]+),", ch12, re.M)
    assert quoted, "chapter 12 no longer quotes chapter 5's span F1: update this test"
    book = nbformat.read(next(ROOT.glob("book/05_*.ipynb")), as_version=4)
    printed = re.search(r"span F1 ([0-9.]+) >= target", "".join(
        o.get("text", "") for c in book.cells if c.cell_type == "code"
        for o in c.get("outputs", []) if o.get("output_type") == "stream"
    ))  # fmt: skip
    assert printed, "chapter 5 no longer prints its test span F1 as before"
    assert f"{float(quoted.group(1)):.3f}" == printed.group(1)
