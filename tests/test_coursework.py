"""Coursework: the nbgrader course made from the chapters, and the one-command grader."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from transformer_book import grade

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import book as pipeline  # noqa: E402

SOURCES = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
FIRST = SOURCES[0]  # the shortest chapter to run


def test_answer_fills_the_stub_function():
    stub = 'def f(x, y):\n    """Add."""\n    # YOUR CODE HERE\n    raise NotImplementedError\n'
    solution = "def f(x, y):\n    z = x + y\n    return z\n"
    assert pipeline.nbgrader_answer(stub, solution) == (
        'def f(x, y):\n    """Add."""\n    ### BEGIN SOLUTION\n    z = x + y\n'
        "    return z\n    ### END SOLUTION"
    )


def test_answer_keeps_helpers_and_top_level_answers():
    stub = "def g(x):\n    raise NotImplementedError\n"
    solution = (
        "import math\n\n\ndef h(x):\n    return 2 * x\n\n\ndef g(x):\n    return h(x)\n"
    )
    merged = pipeline.nbgrader_answer(stub, solution)
    assert merged.startswith("### BEGIN SOLUTION\nimport math\ndef h(x):")
    namespace = {}
    exec(merged, namespace)  # noqa: S102 - our own solution text
    assert namespace["g"](3) == 6
    top = pipeline.nbgrader_answer(
        "answer = None\nraise NotImplementedError\n", "answer = 42\n"
    )
    assert top == "answer = None\n### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION"
    with pytest.raises(ValueError, match="no `raise NotImplementedError`"):
        pipeline.nbgrader_answer("x = 1", "x = 2")


@pytest.mark.parametrize("src", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_chapter_converts_to_an_nbgrader_source(src):
    nb = pipeline.nbgrader_notebook(src)
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(answers) == len(tests) == len(grade.exercises(nb)) >= 2
    for cell in answers:
        compile(cell.source, src.name, "exec")  # the merged answer is valid Python
        assert cell.source.count("### BEGIN SOLUTION") == cell.source.count(
            "### END SOLUTION"
        )
    assert all(
        t.metadata["nbgrader"]["locked"] and t.metadata["nbgrader"]["points"]
        for t in tests
    )
    assert not any("solution" in c.metadata.get("tags", []) for c in nb.cells)


@pytest.mark.grading
def test_nbgrader_releases_the_stubs_and_locks_the_checks(tmp_path):
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "book.py"), "nbgrader", FIRST.stem[:2],
         "--course", str(tmp_path)],
        check=True, capture_output=True,
    )  # fmt: skip
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    nbgrader = shutil.which("nbgrader", path=env["PATH"])
    run = subprocess.run([nbgrader, "generate_assignment", FIRST.stem], cwd=tmp_path, env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    released = nbformat.read(
        tmp_path / "release" / FIRST.stem / f"{FIRST.stem}.ipynb", 4
    )
    source = nbformat.read(tmp_path / "source" / FIRST.stem / f"{FIRST.stem}.ipynb", 4)
    answers = [
        c for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")
    ]
    assert answers and all("raise NotImplementedError()" in c.source for c in answers)
    assert not any("BEGIN SOLUTION" in c.source for c in released.cells)
    solved = [c for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")]
    for given, full in zip(answers, solved):
        body = full.source.split("### BEGIN SOLUTION")[-1].split("### END SOLUTION")[0]
        kept = [line.strip() for line in body.splitlines() if line.strip()]
        assert not any(line in given.source for line in kept if len(line) > 8), (
            "answers leak"
        )
        signature = re.search(r"def \w+\(.*\):", full.source)
        assert signature is None or signature.group(0) in given.source
    checks = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(checks) == len(answers) and all(
        c.metadata["nbgrader"]["locked"] for c in checks
    )


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    """The chapter's solution edition, its student edition, and one wrong answer."""
    tmp = tmp_path_factory.mktemp("grade")
    solution = nbformat.read(FIRST.with_suffix(".ipynb"), 4)
    student = nbformat.from_dict(solution)
    student.cells = [
        c for c in student.cells if "solution" not in c.metadata.get("tags", [])
    ]
    wrong = nbformat.from_dict(solution)
    first_solution = next(
        i for i, c in enumerate(wrong.cells) if "solution" in c.metadata.get("tags", [])
    )
    name = re.search(r"def (\w+)\(", wrong.cells[first_solution].source).group(1)
    wrong.cells.insert(
        first_solution + 1,
        nbformat.v4.new_code_cell(
            f"def {name}(*args, **kwargs):\n    return args[0] * 0"
        ),
    )
    paths = {}
    for key, nb in (("solution", solution), ("student", student), ("wrong", wrong)):
        paths[key] = tmp / f"{key}.ipynb"
        nbformat.write(nb, paths[key])
    return paths


def _grade(path):
    run = subprocess.run([sys.executable, "-m", "transformer_book.grade", str(path)],
                         capture_output=True, text=True, cwd=ROOT / "book")  # fmt: skip
    return run.returncode, run.stdout + run.stderr


@pytest.mark.grading
def test_grader_passes_the_solution_edition(editions):
    code, out = _grade(editions["solution"])
    n = len(grade.exercises(nbformat.read(editions["solution"], 4)))
    assert code == 0, out
    assert f"total: {n}/{n} exercises passed" in out


@pytest.mark.grading
def test_grader_fails_every_exercise_of_the_untouched_student_edition(editions):
    code, out = _grade(editions["student"])
    assert code == 1, out
    assert "total: 0/" in out
    rows = [line for line in out.splitlines() if "  failed  " in line]
    assert rows and all("is not written yet" in row for row in rows), out


@pytest.mark.grading
def test_grader_explains_one_wrong_answer(editions):
    code, out = _grade(editions["wrong"])
    print(out)  # the table, for the closing note
    assert code == 1, out
    failed = [line for line in out.splitlines() if "  failed  " in line]
    passed = [line for line in out.splitlines() if "  passed  " in line]
    assert len(failed) == 1 and len(passed) >= 1, out
    assert "not written yet" not in failed[0], "the check explains what is wrong"


def test_grader_rejects_a_notebook_without_exercises(tmp_path):
    empty = tmp_path / "empty.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), empty
    )
    with pytest.raises(ValueError, match="has no exercise checks"):
        grade.grade(empty)
    with pytest.raises(ValueError, match="no notebook at"):
        grade.grade(tmp_path / "missing.ipynb")
