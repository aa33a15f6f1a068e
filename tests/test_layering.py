"""The import layering of `oracle/` (DESIGN.md, "The library, by what it holds").

Every import counts, wherever it stands: at the top of a module, inside a function (a deferred
import hides a dependency from the reader, not from the design) or under TYPE_CHECKING.

Groups, bottom to top, and the groups each may import (besides itself):

============  ==========================================================================
group         modules                              may import
============  ==========================================================================
shared        oracle, oracle.errors,               --
              oracle.devices, oracle.code_version,
              oracle.progress
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
tools         oracle.tools.*                       every group above
============  ==========================================================================

So the workflow sits directly under scripts/ and rules/: no library group imports it. Inside it
the parts are layered too, bottom to top (`WORKFLOW_PARTS`): plan, provenance, jobs, engine,
start_check; a part imports only the parts below it. The tools
(what inspects a run: audit, run comparison, GPU cost and checks, the findings page) sit beside
it, used from the command line: they may import the whole library and nothing imports them.
Within and across groups the module graph has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SHARED = {"oracle", "oracle.errors", "oracle.devices", "oracle.code_version", "oracle.progress"}
SUBPACKAGES = ("io", "report", "worlds", "measures", "validation", "classifiers", "experiments", "workflow", "tools")
#: The parts of oracle.workflow, bottom to top: each may import only those before it.
WORKFLOW_PARTS = ("plan", "provenance", "jobs", "engine", "start_check")
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
    "tools": {"shared", "io", "report", "world", "measures", "validation", "classifiers", "experiments", "workflow"},
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


def workflow_part(module: str) -> str | None:
    """The part of oracle.workflow (`WORKFLOW_PARTS`) that holds `module`, None for the package
    itself and for modules outside the workflow."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "workflow" else None


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
            a, b = workflow_part(name), workflow_part(target)
            if a and b and WORKFLOW_PARTS.index(b) > WORKFLOW_PARTS.index(a):
                bad.append(f"{name}:{line} -> {target} (workflow.{a} -> workflow.{b})")
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
    assert {workflow_part(m) for m in module_files(REPO)} - {None} == set(WORKFLOW_PARTS)


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


def test_the_check_sees_an_upward_import_inside_the_workflow(tmp_path):
    """A planning module that reaches the tools or a part above it inside the workflow (the
    data-set table read from the GPU cost once was one) is reported."""
    pkg = tmp_path / "oracle"
    for part in ("workflow", "workflow/plan", "workflow/jobs", "tools"):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "workflow" / "jobs" / "run.py").write_text("from oracle.workflow.plan import disk\n")
    (pkg / "tools" / "cost.py").write_text("DATA = {}\n")
    (pkg / "workflow" / "plan" / "disk.py").write_text("def k():\n    from oracle.workflow.jobs import run\n"
                                                      "    from oracle.tools.cost import DATA\n")
    assert upward_imports(tmp_path) == [
        "oracle.workflow.plan.disk:2 -> oracle.workflow.jobs.run (workflow.plan -> workflow.jobs)",
        "oracle.workflow.plan.disk:3 -> oracle.tools.cost (workflow -> tools)"]


def test_no_module_over_500_lines():
    long = {m: n for m, p in module_files(REPO).items() if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


def tools_users(root: Path = REPO) -> list[str]:
    """'file:line' of every import of `oracle.tools` by a part of the pipeline: a rule script
    (scripts/*.py; scripts/tools/, bench/ and ci/ are command-line tools themselves), a rules file
    or the Snakefile."""
    found = []
    for path in sorted((root / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "oracle.tools" or n.startswith("oracle.tools.") for n in names):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    for path in sorted([*(root / "rules").glob("*.smk"), root / "Snakefile"]):
        found += [f"{path.relative_to(root)}:{i}" for i, line in enumerate(path.read_text().splitlines(), 1)
                  if "oracle.tools" in line]
    return found


def test_no_rule_script_imports_the_tools():
    assert tools_users() == []


def test_the_tools_check_can_fail(tmp_path):
    """A rule script or a rules file that imports a tool is reported, and so is a library module."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "rules").mkdir()
    (tmp_path / "Snakefile").write_text("include: 'rules/a.smk'\n")
    (tmp_path / "scripts" / "job.py").write_text("import os\nfrom oracle.tools.audit import audit\n")
    (tmp_path / "rules" / "a.smk").write_text("from oracle.tools import gpu\n")
    assert tools_users(tmp_path) == ["scripts/job.py:2", "rules/a.smk:1"]
    pkg = tmp_path / "oracle"
    (pkg / "tools").mkdir(parents=True)
    for name in ("__init__.py", "tools/__init__.py", "tools/audit.py"):
        (pkg / name).write_text("")
    (pkg / "posterior.py").write_text("from oracle.tools import audit\n")
    assert upward_imports(tmp_path) == ["oracle.posterior:1 -> oracle.tools.audit (world -> tools)"]
