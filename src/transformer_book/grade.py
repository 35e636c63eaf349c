"""Grade a student's chapter notebook: run it, then report each exercise's check.

    python -m transformer_book.grade path/to/submitted.ipynb [--timeout 900]

The notebook is executed with papermill (kernel ``python3``) on the CPU in the
``quick`` profile, in a copy, with a time limit. Every exercise cell (the answer and
its ``checks.check_...`` call) may fail without stopping the run, so one wrong answer
does not hide the others. The table lists each exercise as passed, failed (with the
check's explanation) or error (the exception the answer raised), then a total; the
exit status is 0 only when every exercise passed.

An exercise is a code cell whose source starts with ``checks.check_``; its title is
the nearest ``### Exercise ...`` heading above it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Result", "exercises", "grade", "main", "prepare"]

CHECK = re.compile(r"^\s*checks\.check_(\w+)\(", re.M)
HEADING = re.compile(r"^#+\s*(Exercise\b(?!s)[^\n]*)", re.M)
ALLOW_ERROR = "raises-exception"  # nbclient keeps going after such a cell fails


@dataclass(frozen=True)
class Result:
    """One exercise's outcome: ``status`` is "passed", "failed" or "error"."""

    title: str
    check: str
    status: str
    detail: str


def exercises(nb) -> list[tuple[int, str, str]]:
    """(cell index, title, check name) of every exercise check in the notebook."""
    found, title = [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            title = headings[-1].strip() if headings else title
        elif cell.cell_type == "code" and (m := CHECK.match(cell.source)):
            found.append((i, title or f"check_{m.group(1)}", f"check_{m.group(1)}"))
    return found


def prepare(nb):
    """Clear outputs and let every cell from the first exercise on fail without
    stopping the run (an unanswered stub raises, and the checks after it still run)."""
    checks = exercises(nb)
    first = checks[0][0] if checks else len(nb.cells)
    # the exercise section starts at the heading above the first check
    while first > 0 and not (
        nb.cells[first - 1].cell_type == "markdown"
        and "## Exercises" in nb.cells[first - 1].source
    ):
        first -= 1
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        tags = cell.metadata.setdefault("tags", [])
        if i >= first and ALLOW_ERROR not in tags:
            tags.append(ALLOW_ERROR)
    return nb


def _outcome(cell) -> tuple[str, str]:
    text, error = "", None
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            text += out.get("text", "")
        elif out.get("output_type") == "error":
            error = out
    if error is None:
        if "Correct" in text:
            return "passed", text.strip().splitlines()[-1]
        return "error", "the check printed nothing: was the cell run?"
    message = f"{error.get('evalue', '')}".strip()
    if error.get("ename") in ("ExerciseError", "AssertionError"):
        return "failed", message
    return "error", f"{error.get('ename')}: {message}"


def grade(
    path: str | Path, timeout: float = 900.0, cell_timeout: float = 600.0
) -> list[Result]:
    """Execute a copy of the notebook at ``path`` and return one :class:`Result` per
    exercise. Raises ``ValueError`` when the notebook has no exercise checks and
    ``TimeoutError`` when the run takes longer than ``timeout`` seconds."""
    import nbformat

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no notebook at {path}")
    nb = nbformat.read(path, as_version=4)
    checks = exercises(nb)
    if not checks:
        raise ValueError(
            f"{path} has no exercise checks (cells starting `checks.check_`)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "submitted.ipynb", Path(tmp) / "graded.ipynb"
        nbformat.write(prepare(nb), src)
        cmd = [
            sys.executable, "-m", "papermill", str(src), str(out), "-k", "python3",
            "--cwd", str(path.parent.resolve()), "--no-progress-bar",
            "--execution-timeout", str(int(cell_timeout)),
            "-p", "device", "cpu", "-p", "profile", "quick",
        ]  # fmt: skip
        try:
            subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"{path} did not finish within {timeout:.0f} s; the quick profile of a "
                "chapter takes about a minute on two cores"
            ) from None
        if not out.exists():
            raise RuntimeError(f"papermill could not run {path}")
        graded = nbformat.read(out, as_version=4)
    by_source = {c.source: c for c in graded.cells if c.cell_type == "code"}
    results = []
    for i, title, name in checks:
        cell = by_source.get(nb.cells[i].source)
        status, detail = (
            ("error", "the check cell did not run") if cell is None else _outcome(cell)
        )
        if cell is not None and cell.get("execution_count") is None:
            status, detail = (
                "error",
                "the run stopped before this check (see the notebook)",
            )
        results.append(Result(title, name, status, detail))
    return results


def table(results: list[Result]) -> str:
    """The per-exercise table and the total, as printed by ``main``."""
    width = max(len(r.title) for r in results)
    lines = [f"{'exercise':{width}s}  {'result':7s}  details", "-" * (width + 40)]
    for r in results:
        detail = r.detail if len(r.detail) <= 200 else r.detail[:197] + "..."
        lines.append(f"{r.title:{width}s}  {r.status:7s}  {detail}")
    passed = sum(r.status == "passed" for r in results)
    lines.append(f"total: {passed}/{len(results)} exercises passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_book.grade", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("notebook", help="the submitted .ipynb")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds for the whole run"
    )
    args = parser.parse_args(argv)
    try:
        results = grade(args.notebook, timeout=args.timeout)
    except (ValueError, TimeoutError, RuntimeError) as e:
        print(f"cannot grade: {e}", file=sys.stderr)
        return 2
    print(table(results))
    return 0 if all(r.status == "passed" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
