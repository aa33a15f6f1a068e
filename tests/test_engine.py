"""oracle.workflow.engine: the one module that touches Snakemake's internals (DESIGN.md,
"Provenance" conventions). Its names exist in the installed Snakemake, its hooks fail in one
line where a release stops calling them, and no other file of the workflow reaches past
Snakemake's documented Snakefile language."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from oracle.workflow import engine

REPO = Path(__file__).resolve().parents[1]

#: What a Snakefile may read of `workflow` by its documented name.
DOCUMENTED_WORKFLOW = {"basedir"}
#: Internals by name: none may appear outside the engine module.
PRIVATE = ("_build_dag", "forcefiles", "dag_settings", "_dag", "needrun_jobs", "update_needrun", "overwrite_configfiles",
           "is_main_process", "rerun_triggers", "group_settings", "wildcards_dict", "async_run", "create_report",
           "outputs_older_than_script_or_notebook")


def test_the_installed_snakemake_has_every_required_name():
    assert engine.missing_names() == []


def test_a_release_without_a_required_name_is_named():
    class RenamedDAG:
        needrun = needrun_jobs = jobs = dependencies = forcefiles = None  # update_needrun is gone

    classes = {dotted: engine._class(dotted) for dotted in engine.REQUIRED}
    assert engine.missing_names({**classes, "snakemake.dag.DAG": RenamedDAG}) == ["snakemake.dag.DAG.update_needrun"]
    assert engine.missing_names(classes) == []


def _snakemake_names_used(source: str) -> set[str]:
    """Every attribute the engine module reads of a Snakemake object: of `workflow`, a `job`,
    the DAG `settings`, or a name it imports from a snakemake module (`RerunTrigger.PARAMS`), and
    the names it imports from them (`is_flagged`); methods of Python's own containers aside
    (`forcefiles.update`)."""
    import ast

    tree = ast.parse(source)
    roots = {"workflow", "job", "settings"}
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snakemake"):
            names = {a.asname or a.name for a in node.names}
            roots |= names
            used |= names
    builtin = {name for t in (set, dict, list, tuple, str, frozenset) for name in dir(t)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Call, ast.Subscript)):
                base = base.func if isinstance(base, ast.Call) else base.value
            if isinstance(base, ast.Name) and base.id in roots and node.attr not in builtin:
                used.add(node.attr)
    return used - {"api"}  # `import snakemake.api`: the import order Snakemake needs, not a name read


def test_every_snakemake_name_the_engine_uses_is_required():
    """The engine's contract is complete: a name it reads that `REQUIRED` leaves out would fail
    mid-hook with a traceback instead of at install with one line."""
    used = _snakemake_names_used((REPO / "oracle" / "workflow" / "engine.py").read_text())
    # a class the module imports (RerunTrigger) is required as the owner of its names
    required = {name for owner, names in engine.REQUIRED.items() for name in (*names, owner.rsplit(".", 1)[1])}
    assert {"forcefiles", "targets", "PARAMS", "is_flagged", "group_components", "_build_dag"} <= used
    assert used - required == set()
    # the check sees a name the contract leaves out
    assert _snakemake_names_used("def f(workflow):\n    return workflow.dag.renamed_jobs\n") == {"dag", "renamed_jobs"}


def test_a_name_renamed_in_a_fake_module_stops_install_in_one_line(monkeypatch):
    """A Snakemake whose snakemake.io renamed `is_flagged` (a fake module in its place) is refused
    by `install` with one line naming it, before any hook is set."""
    import types

    import snakemake.api  # noqa: F401 - imported for real first (it imports snakemake.io's names), as in a run
    import snakemake.io

    fake = types.ModuleType("snakemake.io")
    fake.__dict__.update({k: v for k, v in vars(snakemake.io).items() if k != "is_flagged"})
    fake.is_flagged_as = snakemake.io.is_flagged
    monkeypatch.setitem(sys.modules, "snakemake.io", fake)
    assert engine.missing_names() == ["snakemake.io.is_flagged"]
    wf = _FakeWorkflow()
    build_dag = wf._build_dag
    with pytest.raises(engine.EngineError) as exc:
        _install(wf, [])
    message = str(exc.value)
    assert "snakemake.io.is_flagged" in message and "\n" not in message
    assert wf._build_dag == build_dag  # nothing installed
    monkeypatch.undo()
    assert engine.missing_names() == []


def test_the_tested_range_is_what_requirements_pin_and_the_snakefile_states():
    import snakemake

    pin = re.search(r"^snakemake==(\S+)", (REPO / "requirements.txt").read_text(), re.M).group(1)
    assert pin == snakemake.__version__ == engine.TESTED[0]
    assert engine.version_note(pin) is None
    assert "min_version(engine.TESTED[0])" in (REPO / "Snakefile").read_text()
    for outside in ("9.0.0", "9.27.0", engine.TESTED[1], "10.1"):
        note = engine.version_note(outside)
        assert note is not None and outside in note and "\n" not in note


class _FakeDAG:
    def __init__(self):
        self.forcefiles: set[str] = set()


class _FakeWorkflow:
    """What `engine.install` wraps: `execute` builds the DAG through `_build_dag` as Snakemake
    9.27 does, unless `inlined` (a release that no longer calls it)."""

    def __init__(self, inlined=False):
        self.inlined, self.dag, self.dag_settings, self.seen_targets = inlined, None, None, None

    def _build_dag(self):
        self.dag = _FakeDAG()

    def execute(self):
        self.seen_targets = set(self.dag_settings.targets) if self.dag_settings is not None else None
        if self.inlined:
            self.dag = _FakeDAG()
        else:
            self._build_dag()
        return True

    def create_report(self):
        self._build_dag()


def _install(wf, calls, targets=None):
    return engine.install(wf, on_run_dag=lambda: calls.append("run"), on_report_dag=lambda: calls.append("report"),
                          after_execute=lambda: calls.append("after"), targets=targets)


def test_the_hooks_run_once_per_command_in_order():
    wf, calls = _FakeWorkflow(), []
    hooks = _install(wf, calls)
    assert wf.execute() is True
    assert calls == ["run", "after"]
    hooks.verify()  # no error: the check saw the DAG
    wf.create_report()
    assert calls == ["run", "after", "report"]


def test_a_release_that_no_longer_calls_build_dag_fails_in_one_line(capsys):
    wf, calls = _FakeWorkflow(inlined=True), []
    hooks = _install(wf, calls)
    with pytest.raises(SystemExit) as exc:
        wf.execute()
    assert exc.value.code == 1 and calls == []
    err = capsys.readouterr().err.strip()
    assert err.startswith("EngineError: the start check did not run") and "\n" not in err
    with pytest.raises(engine.EngineError):  # what onstart calls before any job of a real run
        hooks.verify()


def test_a_paper_id_target_stands_for_its_files():
    from snakemake.settings.types import DAGSettings

    named = {"fig2": ["results/r/a.pdf", "results/r/a.png"], "table1": ["results/r/t.csv"]}
    assert engine.expand_targets(["fig2", "results/r/x.h5"], named) == {"results/r/a.pdf", "results/r/a.png",
                                                                       "results/r/x.h5"}
    assert engine.expand_targets([], named) == set()
    wf, calls = _FakeWorkflow(), []
    wf.dag_settings = DAGSettings(targets=frozenset({"fig2"}), forcetargets=True)
    _install(wf, calls, targets=lambda t: engine.expand_targets(t, named))
    wf.execute()
    assert wf.seen_targets == {"results/r/a.pdf", "results/r/a.png"} and wf.dag_settings.forcetargets


def test_code_changed_is_decided_by_content_not_by_mtime():
    """Snakemake's mtime test of a rule's script yields an output only where the job's code
    differs by content (`same_code` False); installed twice, it still wraps Snakemake's own."""
    import asyncio

    class FakeJob:  # Snakemake's Job: every output older than the script
        def __init__(self, same: bool):
            self.same = same

        async def outputs_older_than_script_or_notebook(self):
            yield "results/r/out.csv"

    def older(job):
        async def collect():
            return [f async for f in job.outputs_older_than_script_or_notebook()]

        return asyncio.run(collect())

    assert older(FakeJob(True)) == ["results/r/out.csv"]  # Snakemake's own: mtimes decide
    engine.code_by_content(lambda job: job.same, FakeJob)
    assert older(FakeJob(True)) == [] and older(FakeJob(False)) == ["results/r/out.csv"]
    engine.code_by_content(lambda job: False, FakeJob)
    assert older(FakeJob(True)) == ["results/r/out.csv"]


def _workflow_files() -> dict[Path, str]:
    files = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk")), *sorted((REPO / "scripts").rglob("*.py")),
             *sorted((REPO / "oracle").rglob("*.py"))]
    return {p: p.read_text() for p in files if p != REPO / "oracle" / "workflow" / "engine.py"}


def test_no_snakemake_internal_outside_the_engine_module():
    problems = []
    for path, text in _workflow_files().items():
        rel = path.relative_to(REPO)
        code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # comments may name them
        for name in PRIVATE:
            if re.search(rf"(?<!engine)\.{re.escape(name)}\b", code):
                problems.append(f"{rel}: .{name}")
        for attr in re.findall(r"(?<![./\w])workflow\.([A-Za-z_]\w*)", code):
            if path.suffix != ".py" and attr not in DOCUMENTED_WORKFLOW:
                problems.append(f"{rel}: workflow.{attr}")
        for mod in re.findall(r"^\s*(?:from|import)\s+(snakemake[\w.]*)", code, re.M):
            if not (path.name == "Snakefile" and mod == "snakemake.utils"):
                problems.append(f"{rel}: imports {mod}")
    assert problems == []
