"""The package's house rules, read from its import statements: every module has a floor
(CONTRIBUTING.md's "Where each concept lives" names it), imports point down or sideways
on floors 1–2 only, a model never imports another model, and nothing imports in a circle."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "src" / "transformer_book"
MODELS = 3
# CONTRIBUTING.md's table, parsed: floor number -> the modules it lists
ROW = re.compile(r"^\| (\d) — [^|]+\| (.+) \|$", re.M)


def floors() -> dict[str, int]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = {}
    for floor, cell in ROW.findall(text):
        for name in re.findall(r"`([a-z_0-9]+)/?`", cell):
            table[name] = int(floor)
    return table


def imports(path: Path) -> set[str]:
    """The package modules a file imports (relative or absolute)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1 or (node.module or "").startswith("transformer_book"):
            module = (node.module or "").removeprefix("transformer_book").strip(".")
            if module:
                found.add(module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found


MODULES = {
    p.stem if p.suffix else p.name: p
    for p in [
        *PKG.glob("*.py"),
        *(d for d in PKG.iterdir() if (d / "__init__.py").is_file()),
    ]
    if p.stem != "__init__"
}


def test_every_module_has_a_floor_in_contributing():
    table = floors()
    missing = sorted(set(MODULES) - set(table))
    assert not missing, f"add these to CONTRIBUTING.md's floors table: {missing}"
    gone = sorted(set(table) - set(MODULES))
    assert not gone, f"CONTRIBUTING.md lists modules that do not exist: {gone}"


def test_imports_point_down_and_models_do_not_import_models():
    table = floors()
    wrong = []
    for name, path in MODULES.items():
        files = [path] if path.is_file() else list(path.glob("*.py"))
        for dep in set().union(*(imports(f) for f in files)) - {name}:
            if dep not in table:
                continue  # a private helper module, or a name re-exported
            if table[dep] > table[name]:
                wrong.append(
                    f"{name} (floor {table[name]}) imports {dep} (floor {table[dep]})"
                )
            elif table[name] == table[dep] >= MODELS:
                wrong.append(f"{name} imports {dep}: both on floor {table[name]}")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    graph = {
        n: imports(p) & set(MODULES) - {n} for n, p in MODULES.items() if p.is_file()
    }
    state: dict[str, int] = {}

    def visit(node, trail):
        if state.get(node) == 1:
            raise AssertionError("import cycle: " + " -> ".join([*trail, node]))
        if state.get(node) == 2:
            return
        state[node] = 1
        for dep in graph.get(node, ()):
            visit(dep, [*trail, node])
        state[node] = 2

    for node in graph:
        visit(node, [])
