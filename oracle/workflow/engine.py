"""Every name of Snakemake this workflow uses beyond the documented Snakefile language, in one
place: the `workflow` and DAG attributes the Snakefile and the start check
(`oracle.workflow.start_check`) read, the job attributes, the settings and helpers of Snakemake's
own modules they need, the three methods the start check wraps (`Workflow._build_dag`, `execute`,
`create_report`: Snakemake has no hook between building the DAG and deciding what to run), and
the job's mtime test of its rule script (`Job.outputs_older_than_script_or_notebook`), which
`code_by_content` makes a test of content, so a copied run reruns nothing.

Tested with Snakemake `TESTED` (requirements.txt pins it; the Snakefile's ``min_version`` states
its lower end). A release that renames one of `REQUIRED` stops the run at install, in one line
(`missing_names`); a release that keeps the names but no longer calls them where this module
expects (say, one that inlines ``_build_dag`` into ``execute``) stops it at ``onstart`` or after
the dry run, in one line (`Hooks.verify`), instead of silently skipping the start check.

Nothing here knows what the checks do: `oracle.workflow.start_check` passes them in. Snakemake is imported
only inside the functions that need its classes, so the module imports without it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from oracle.errors import OracleError

__all__ = ["TESTED", "REQUIRED", "EngineError", "Hooks", "version_note", "missing_names", "install",
           "is_main_process", "configfiles_given", "mark_local", "dry_run", "touch_run", "params_trigger", "dag_jobs",
           "pending_jobs", "needs_run", "force_rerun", "dependencies", "group_components", "job_rule",
           "job_has_script", "job_script", "job_outputs", "job_inputs", "job_params", "job_request_fields",
           "expand_targets", "LOCK_HOLDER", "note_lock_holder", "lock_holder_text", "code_by_content"]

#: The Snakemake releases this workflow's tests ran with: [lowest, first untested).
TESTED = ("9.27.1", "9.28")

#: Every Snakemake name this module uses, by the class or module that must have it: what the
#: workflow reads or replaces (tests/test_engine.py checks that the code below uses no other).
REQUIRED: dict[str, tuple[str, ...]] = {
    "snakemake.workflow.Workflow": (
        "_build_dag", "execute", "create_report", "dag", "dag_settings", "dryrun", "touch", "rerun_triggers",
        "async_run", "group_settings", "overwrite_configfiles", "is_main_process", "localrules"),
    "snakemake.dag.DAG": ("needrun", "needrun_jobs", "update_needrun", "jobs", "dependencies", "forcefiles"),
    "snakemake.jobs.Job": ("rule", "input", "output", "params", "resources", "group", "wildcards_dict",
                           "outputs_older_than_script_or_notebook"),
    "snakemake.rules.Rule": ("name", "script", "snakefile"),
    "snakemake.settings.types.DAGSettings": ("targets",),
    "snakemake.settings.types.GroupSettings": ("group_components",),
    "snakemake.settings.enums.RerunTrigger": ("PARAMS",),
    "snakemake.io": ("is_flagged",),
    "snakemake.exceptions": ("LockException",),
}


class EngineError(OracleError):
    """Snakemake does not offer what this workflow relies on (a renamed internal, a hook that did
    not run)."""


def _version_key(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def version_note(version: str | None = None) -> str | None:
    """One line when the running Snakemake (`version`, default the installed one) lies outside
    `TESTED`, else None. Below the range the Snakefile's ``min_version`` already refuses; above it
    the run goes on, its hooks verified (`Hooks.verify`)."""
    if version is None:
        import snakemake

        version = snakemake.__version__
    low, high = TESTED
    if _version_key(version) < _version_key(low) or _version_key(version) >= _version_key(high):
        return (f"Note: Snakemake {version} is outside the range this workflow is tested with ({low} to before {high}; "
                f"requirements.txt): its start check is verified as the run starts (oracle/workflow/engine.py)")
    return None


def _class(dotted: str) -> Any:
    """The class or module `dotted` names in Snakemake; None when this release has none."""
    import importlib
    import sys

    import snakemake.api  # noqa: F401 - snakemake.workflow imports only after the api (a cycle of theirs)

    if dotted in sys.modules:
        return sys.modules[dotted]
    module, name = dotted.rsplit(".", 1)
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def missing_names(classes: Mapping[str, Any] | None = None) -> list[str]:
    """The `REQUIRED` names the classes and modules lack ("snakemake.dag.DAG.needrun"), [] when all
    are there. `classes`: {dotted name: class or module}, default Snakemake's own. An attribute set
    in ``__init__`` (not on the class) counts when the class's ``__init__`` or annotations name
    it; every name of a class or module that is gone is missing."""
    missing = []
    for dotted, names in REQUIRED.items():
        owner = classes[dotted] if classes is not None else _class(dotted)
        missing += [f"{dotted}.{name}" for name in names if owner is None or not _has(owner, name)]
    return missing


def _has(cls: Any, name: str) -> bool:
    if not isinstance(cls, type):  # a module
        return hasattr(cls, name)
    if any(name in vars(k) or name in getattr(k, "__annotations__", {}) for k in cls.__mro__):
        return True
    import inspect

    init = getattr(cls, "__init__", None)
    try:
        source = inspect.getsource(init) if init is not None else ""
    except (OSError, TypeError):
        return False
    return f"self.{name} =" in source or f"self.{name}:" in source


@dataclasses.dataclass
class Hooks:
    """What `install` set up on one workflow object, and what has run since."""

    workflow: Any
    mode: list[str] = dataclasses.field(default_factory=list)
    checked: list[str] = dataclasses.field(default_factory=list)

    def verify(self) -> None:
        """EngineError unless the DAG hook of the command now running has run: called by the
        Snakefile's ``onstart`` (before any job) and after a dry run."""
        if self.mode and self.mode[-1] not in self.checked:
            raise EngineError(
                f"the start check did not run after Snakemake built the DAG ({self.mode[-1]}): this Snakemake "
                f"release no longer calls Workflow._build_dag where oracle/workflow/engine.py expects it "
                f"(tested: {TESTED[0]} to before {TESTED[1]}); install the version requirements.txt pins")


def install(workflow: Any, *, on_run_dag: Callable[[], None], on_report_dag: Callable[[], None],
            after_execute: Callable[[], None], targets: Callable[[Iterable[str]], set[str]] | None = None,
            same_code: Callable[[Any], bool] | None = None) -> Hooks:
    """Wrap `workflow` so that `on_run_dag` runs right after ``execute`` (a run or a dry run) has
    built its DAG and before Snakemake decides what to run, `on_report_dag` after
    ``create_report`` has built its DAG, and `after_execute` once ``execute`` returns. Other
    commands that build a DAG (--unlock, --summary) are left alone.

    targets: maps the command line's targets to the ones to build (`expand_targets`), applied
             before ``execute`` builds its DAG, so ``--force`` forces what they name.
    same_code: asked of a job whose rule script is newer (mtime) than one of its outputs, where
             Snakemake would rerun it for "code changed": True keeps the job (the script's
             content is the one that made the outputs; `code_by_content`).
    EngineError (one line) when this Snakemake lacks a name the workflow needs."""
    if missing := missing_names():
        raise EngineError(f"this Snakemake lacks {', '.join(missing)} (oracle/workflow/engine.py; tested: "
                          f"{TESTED[0]} to before {TESTED[1]}); install the version requirements.txt pins")
    hooks = Hooks(workflow)
    execute, build_dag, create_report = workflow.execute, workflow._build_dag, workflow.create_report

    def build_dag_checked():
        build_dag()
        if hooks.mode and hooks.mode[-1] not in hooks.checked:
            hooks.checked.append(hooks.mode[-1])
            (on_run_dag if hooks.mode[-1] == "execute" else on_report_dag)()

    def execute_checked(*args, **kwargs):
        hooks.mode.append("execute")
        settings = workflow.dag_settings
        if targets is not None and settings is not None:
            workflow.dag_settings = dataclasses.replace(settings, targets=frozenset(targets(settings.targets)))
        try:
            result = execute(*args, **kwargs)
        except Exception as exc:
            _refuse_locked(exc)
            raise
        if workflow.dag is not None:  # a DAG was built: the check must have seen it
            _verified(hooks)
        after_execute()
        return result

    def create_report_checked(*args, **kwargs):
        hooks.mode.append("report")
        result = create_report(*args, **kwargs)
        _verified(hooks)
        return result

    workflow._build_dag = build_dag_checked
    workflow.execute = execute_checked
    workflow.create_report = create_report_checked
    if workflow._build_dag is not build_dag_checked or workflow.execute is not execute_checked:
        raise EngineError("Snakemake's Workflow did not accept the start check's hooks (oracle/workflow/engine.py)")
    if same_code is not None:
        code_by_content(same_code)
    return hooks


# ----------------------------------------------------------------------------- the lock
#: Who holds Snakemake's lock on the working directory: Snakemake's lock files name the locked
#: files, not the process, and its LockException suggests --unlock whether or not that run still
#: lives. Written by `note_lock_holder` (the Snakefile's ``onstart``, once the lock is taken) into
#: Snakemake's lock folder, which a run's end and --unlock remove with it.
LOCK_HOLDER = Path(".snakemake") / "locks" / "oracle-holder.json"


def _start_time(pid: int) -> int | None:
    """Start time (clock ticks since boot) of live process `pid`; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[19])


def note_lock_holder(path: Path = LOCK_HOLDER) -> None:
    """Record this process (pid, start time, host) as the holder of the working directory's lock."""
    import json
    import os
    import socket

    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "start": _start_time(os.getpid()),
                                   "host": socket.gethostname()}) + "\n")
        tmp.replace(path)


def lock_holder_text(path: Path = LOCK_HOLDER) -> str:
    """What to do about a locked working directory: who holds the lock (`note_lock_holder`),
    whether that process still runs, then what to do (wait or --unlock)."""
    import json
    import socket

    try:
        holder = json.loads(path.read_text())
        pid, start, host = int(holder["pid"]), holder.get("start"), str(holder.get("host"))
    except (OSError, ValueError, KeyError, TypeError):
        return ("the lock's holder did not leave its process id (a run of another workflow or version): if no "
                "snakemake runs in this folder (ps -ef | grep snakemake), `snakemake --unlock` removes the lock")
    if host != socket.gethostname():
        return (f"the lock is held by Snakemake process {pid} on host {host}, not this one: whether it still runs "
                f"cannot be told from here; `snakemake --unlock` only once it has ended there")
    if _start_time(pid) is not None and _start_time(pid) == start:
        return (f"the lock is held by Snakemake process {pid}, which is still running: wait for it, or stop it "
                f"(kill {pid}); do not --unlock a live run (two runs would write the same files)")
    return (f"the lock was held by Snakemake process {pid}, which is no longer running (killed): "
            "`snakemake --unlock` (same --configfile) removes its stale lock; then rerun")


def _refuse_locked(exc: Exception) -> None:
    """A LockException of ``execute`` as one line naming the lock's holder and whether it runs."""
    import os
    import sys

    from snakemake.exceptions import LockException

    if isinstance(exc, LockException):
        print(f"LockException: {os.getcwd()} is locked; {lock_holder_text()}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None

def code_by_content(same_code: Callable[[Any], bool], job_class: type | None = None) -> None:
    """Make Snakemake's "code changed" trigger content-based: its mtime test (an output older
    than the rule's script, ``Job.outputs_older_than_script_or_notebook``, which fires for every
    job of a fresh clone or a copied results tree) yields only where `same_code(job)` is False.
    An edited script still reruns its jobs (its bytes differ from those the outputs' records
    hold); Snakemake's own metadata check of the code, where metadata exist, is left as it is.
    `job_class`: default Snakemake's ``Job``. Idempotent; EngineError when the hook did not take."""
    if job_class is None:
        from snakemake.jobs import Job

        job_class = Job
    name = "outputs_older_than_script_or_notebook"
    older = getattr(job_class, name)
    older = getattr(older, "_by_mtime", older)  # installed before: wrap Snakemake's own, once

    async def outputs_older_by_content(self):
        found = [f async for f in older(self)]
        if found and not same_code(self):
            for f in found:
                yield f

    outputs_older_by_content._by_mtime = older
    setattr(job_class, name, outputs_older_by_content)
    if getattr(job_class, name) is not outputs_older_by_content:
        raise EngineError(f"Snakemake's Job did not accept the content check of its code ({name}; "
                          "oracle/workflow/engine.py)")


def _verified(hooks: Hooks) -> None:
    # inside Snakemake's own call: a traceback would bury the one line that says what to do
    import sys

    try:
        hooks.verify()
    except EngineError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def expand_targets(targets: Iterable[str], named: Mapping[str, list[str]]) -> set[str]:
    """`targets` with each name of `named` (a paper id: ``fig2``) replaced by its files, so
    ``snakemake --force fig2`` forces those files through Snakemake's own ``--force``."""
    out: set[str] = set()
    for t in targets:
        out.update(named.get(t, [t]))
    return out


# ----------------------------------------------------------------------------- the workflow
def is_main_process(workflow: Any) -> bool:
    """True in the invocation the user started (not a cluster job re-reading the Snakefile)."""
    return bool(workflow.is_main_process)


def configfiles_given(workflow: Any) -> bool:
    """True when the command line gave ``--configfile`` (it replaces the embedded default)."""
    return bool(workflow.overwrite_configfiles)


def dry_run(workflow: Any) -> bool:
    """True in ``snakemake -n``."""
    return bool(workflow.dryrun)


def touch_run(workflow: Any) -> bool:
    """True in ``snakemake --touch`` (no job runs, no input is read)."""
    return bool(workflow.touch)


def params_trigger(workflow: Any) -> bool:
    """True when changed params make Snakemake rerun a job (``--rerun-triggers`` includes params)."""
    from snakemake.settings.enums import RerunTrigger

    return RerunTrigger.PARAMS in workflow.rerun_triggers


def mark_local(workflow: Any, rules: Iterable[str]) -> None:
    """Run `rules` where Snakemake runs, not as cluster jobs: the ``localrules:`` directive for a
    list computed from the config (the directive itself takes only literal names)."""
    workflow.localrules(*rules)


def group_components(workflow: Any) -> dict[str, int]:
    """``--group-components``: {group: jobs per submission}."""
    return dict(workflow.group_settings.group_components)


# ----------------------------------------------------------------------------- the DAG
def dag_jobs(workflow: Any) -> list:
    """Every job of the DAG just built (the ones to run and the ones up to date)."""
    return list(workflow.dag.jobs)


def pending_jobs(workflow: Any) -> list:
    """The jobs of the DAG that will run."""
    return list(workflow.dag.needrun_jobs())


def needs_run(workflow: Any, job: Any) -> bool:
    """Whether Snakemake will run `job`."""
    return bool(workflow.dag.needrun(job))


def force_rerun(workflow: Any, files: Iterable[str]) -> None:
    """Rerun the jobs that make `files` and everything after them, as ``--force`` on those files
    would: added to the DAG's forced files, then what needs to run is worked out again."""
    workflow.dag.forcefiles.update(files)
    workflow.async_run(workflow.dag.update_needrun())


def dependencies(workflow: Any, job: Any) -> list:
    """The jobs whose outputs `job` reads."""
    return list(workflow.dag.dependencies[job])


# ----------------------------------------------------------------------------- a job
def job_rule(job: Any) -> str:
    """The name of the rule of `job`."""
    return str(job.rule.name)


def job_has_script(job: Any) -> bool:
    """Whether `job` runs a script (and so writes records): False for an alias rule or `all`."""
    return bool(job.rule.script)


def job_script(job: Any) -> str | None:
    """The path of the rule script of `job` (its ``script:`` resolved against the rules file
    that names it), None for a rule without one."""
    import os

    script = job.rule.script
    if not script:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(str(job.rule.snakefile)), str(script)))


def job_outputs(job: Any, *, temp: bool = True) -> tuple[str, ...]:
    """The output paths of `job`; temp=False leaves out ``temp()`` outputs (deleted after use)."""
    from snakemake.io import is_flagged

    return tuple(str(f) for f in job.output if temp or not is_flagged(f, "temp"))


def job_inputs(job: Any) -> tuple[str, ...]:
    """The input paths of `job`."""
    return tuple(str(f) for f in job.input)


def job_params(job: Any) -> Any:
    """The params of `job` as Snakemake computed them for it now (read by attribute)."""
    return job.params


def job_request_fields(job: Any) -> dict[str, Any]:
    """What `oracle.workflow.plan.dry_run.job_request` reads of a job: rule, its rules file,
    group, resources and wildcards."""
    return {"rule": job_rule(job), "snakefile": job.rule.snakefile, "group": job.group, "resources": job.resources,
            "wildcards": job.wildcards_dict}
