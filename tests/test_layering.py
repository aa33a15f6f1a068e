"""The import layering of `oracle/` (DESIGN.md, "The library, by what it holds").

Every import counts, wherever it stands: at the top of a module, inside a function (a deferred
import hides a dependency from the reader, not from the design) or under TYPE_CHECKING.

Groups, bottom to top, and the groups each may import (besides itself):

============  ==========================================================================
group         modules                              may import
============  ==========================================================================
shared        oracle, oracle.errors,               --
              oracle.devices, oracle.code_version
io            oracle.io.*                          shared
report        oracle.report.*                      shared, io
world         every other top-level module,        shared, io
              oracle.worlds.*
measures      oracle.measures.*                    shared, io, report, world
validation    oracle.validation.*                  shared, io, report, world, measures
classifiers   oracle.classifiers.*                 shared, io, world, measures
experiments   oracle.experiments.*                 shared, io, report, world, measures,
                                                   validation, classifiers
workflow      oracle.workflow.*                    every group above
============  ==========================================================================

So the workflow sits directly under scripts/ and rules/: no library group imports it. Within
and across groups the module graph has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SHARED = {"oracle", "oracle.errors", "oracle.devices", "oracle.code_version"}
SUBPACKAGES = ("io", "report", "worlds", "measures", "validation", "classifiers", "experiments", "workflow")
ALLOWED = {
    "shared": set(),
    "io": {"shared"},
    "report": {"shared", "io"},
    "world": {"shared", "io"},
    "measures": {"shared", "io", "report", "world"},
    "validation": {"shared", "io", "report", "world", "measures"},
    "classifiers": {"shared", "io", "world", "measures"},
    "experiments": {"shared", "io", "report", "world", "measures", "validation", "classifiers"},
    "workflow": {"shared", "io", "report", "world", "measures", "validation", "classifiers", "experiments"},
}


def module_files(root: Path) -> dict[str, Path]:
    """{dotted module name: file} of every module of `root`/oracle."""
    out = {}
    for path in sorted((root / "oracle").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """{oracle module imported by `name`: line of its first import}, every import of the file
    (top level, inside functions, under TYPE_CHECKING), relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from oracle.x import y` imports the module oracle.x.y when there is one
            found += [(f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module, node.lineno)
                      for a in node.names]
    out: dict[str, int] = {}
    for target, line in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.setdefault(target, line)
    return out


def group(module: str) -> str:
    """The layer group of a dotted oracle module name (module docstring)."""
    if module in SHARED:
        return "shared"
    sub = module.split(".")[1]
    if sub in SUBPACKAGES:
        return "world" if sub == "worlds" else sub
    return "world"


def import_graph(root: Path = REPO) -> dict[str, dict[str, int]]:
    """{module: {imported oracle module: line}} of every module of `root`/oracle."""
    modules = module_files(root)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def upward_imports(root: Path = REPO) -> list[str]:
    """'importer:line -> imported (group -> group)' for every import the table forbids."""
    bad = []
    for name, targets in import_graph(root).items():
        for target, line in targets.items():
            g, h = group(name), group(target)
            if g != h and h not in ALLOWED[g]:
                bad.append(f"{name}:{line} -> {target} ({g} -> {h})")
    return sorted(bad)


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds a cycle)."""
    graph = {name: sorted(targets) for name, targets in import_graph(root).items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graph has ~100 nodes
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(components)


def test_every_module_has_a_group():
    assert set(ALLOWED) == {group(m) for m in module_files(REPO)}


def test_no_upward_imports():
    assert upward_imports() == []


def test_no_import_cycles():
    assert import_cycles() == []


def test_the_checks_see_deferred_imports(tmp_path):
    """The checks can fail: an import inside a function of the library that reaches the
    workflow, and a two-module loop, are both reported."""
    pkg = tmp_path / "oracle"
    (pkg / "workflow").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "workflow" / "__init__.py").write_text("")
    (pkg / "workflow" / "plan.py").write_text("x = 1\n")
    (pkg / "a.py").write_text("def f():\n    from oracle.workflow.plan import x\n    from . import b\n")
    (pkg / "b.py").write_text("from oracle import a\n")
    assert upward_imports(tmp_path) == ["oracle.a:2 -> oracle.workflow.plan (world -> workflow)"]
    assert import_cycles(tmp_path) == [["oracle.a", "oracle.b"]]


def test_no_module_over_500_lines():
    long = {m: n for m, p in module_files(REPO).items() if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}
