"""Every shell command in README.md's fenced blocks runs (issue 20.5), so the README cannot
drift from the workflow: make targets and Snakemake commands as dry runs (`make -n`,
`snakemake -n`: they need data, a cluster or hours), in a copy of the repository whose default
run is complete (every output present and up to date, made with --touch), where the documented
redraw command must schedule exactly one figure. The SLURM job-count table is regenerated
and compared (scripts/ci/slurm_tables.py --check).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import slurm_tables  # scripts/ci (tests/conftest.py puts it on sys.path)
import yaml
from conftest import DAG_CONFIGS

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHELLS = ("bash", "sh", "shell", "console")
#: How each command is checked: its first word -> kind. A command of another kind fails
#: test_every_readme_command_is_checked: teach `_runnable` how to run it first.
KINDS = {"make": "make", "export": "env", ".venv/bin/snakemake": "snakemake", "tail": "log", "cp": "copy",
         ".venv/bin/python": "python"}
#: Where the README's "Moving or sharing a run" copies a run from; the test puts a copy there.
OLD_CLONE = "/old/clone"
_ASSIGNMENT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")


def _program(command: str) -> str:
    """The command's program, after any leading VAR=value assignments."""
    return _ASSIGNMENT.sub("", command).split()[0]


def shell_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks tagged as shell."""
    return [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S) if m.group(1) in SHELLS]


def commands(block: str) -> list[str]:
    """The commands of a block: comments removed, backslash continuations joined."""
    out, pending = [], ""
    for line in block.splitlines():
        line = re.sub(r"(^|\s+)#.*$", "", line).rstrip()
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        if line.strip():
            out.append(line.strip())
    return out


def _runnable(command: str, old_clone: str = OLD_CLONE) -> str:
    """The command as the test runs it: a dry run where it would need data, a cluster or hours;
    a `tail -f` of a log as nothing (`_log_pattern` checks its path); a `python -m module
    --flag ...` as that module's --help, which must name every flag; a copy from the old clone
    from `old_clone`."""
    env = (m.group(0) if (m := _ASSIGNMENT.match(command)) else "")
    first, _, rest = command[len(env):].partition(" ")
    kind = KINDS[first]
    if kind == "make":
        return f"{env}make -n {rest}"
    if kind == "snakemake":
        return command if re.search(r"(^| )(-n|--dry-run)( |$)", rest) else f"{env}{first} -n {rest}"
    if kind == "log":
        return "true"
    if kind == "python":
        module = re.search(r"-m (\S+)", rest).group(1)
        flags = re.findall(r"(?:^| )(--[a-z-]+)", rest)
        return " && ".join([f"{first} -m {module} --help > /dev/null",
                            *(f"{first} -m {module} --help | grep -- '{f}' > /dev/null" for f in flags)])
    if kind == "copy":
        return command.replace(OLD_CLONE, old_clone)
    return command


def _log_pattern(command: str) -> re.Pattern | None:
    """For `tail -f <log>`: a pattern of the log path, each <placeholder> any one folder name."""
    if _program(command) != "tail":
        return None
    path = command.split()[-1]
    return re.compile("".join("[^/]+" if p.startswith("<") else re.escape(p) for p in re.split(r"(<[^>]+>)", path)) + "$")


def test_every_readme_command_is_checked():
    """Each command in the README is of a kind the slow test knows how to run."""
    cmds = [c for b in shell_blocks(README.read_text()) for c in commands(b)]
    assert len(cmds) >= 8, cmds
    unknown = [c for c in cmds if _program(c) not in KINDS]
    assert not unknown, f"README commands the test cannot run yet: {unknown}"
    assert ".venv/bin/snakemake --cores all --force fig2" in cmds


def _job_counts(out: str) -> dict[str, int]:
    if "Nothing to be done" in out:
        return {}
    block = out.split("Job stats:")[1].split("total")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.fixture(scope="module")
def complete_copy(tmp_path_factory, place_pretrained) -> Path:
    """A copy of the repository (its .venv this interpreter's) whose default run is complete:
    every output of `snakemake --summary` created empty, then brought up to date by --touch."""
    dst = tmp_path_factory.mktemp("readme") / "repo"
    shutil.copytree(REPO, dst, ignore=shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", "__pycache__",
                                                             ".pytest_cache", "*.egg-info"))
    (dst / ".venv").symlink_to(Path(sys.prefix))
    for preset in sorted((dst / "presets").glob("*.yaml")):  # a preset's user-supplied weights: random stand-ins
        place_pretrained(yaml.safe_load(preset.read_text()), dst)
    smk = [str(dst / ".venv/bin/snakemake"), "--cores", "1"]
    summary = subprocess.run([*smk, "--summary"], cwd=dst, env=_env(dst), capture_output=True, text=True, timeout=600)
    assert summary.returncode == 0, summary.stderr[-2000:]
    for line in summary.stdout.splitlines()[1:]:
        path = dst / line.split("\t")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    touch = subprocess.run([*smk, "--touch"], cwd=dst, env=_env(dst), capture_output=True, text=True, timeout=600)
    assert touch.returncode == 0, touch.stderr[-2000:]
    return dst


def _env(copy: Path) -> dict:
    """The environment of a command in the copy: its own `oracle` package first."""
    return {**os.environ, "PYTHONPATH": str(copy)}


def _run(command: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail\n{command}"], cwd=cwd, env=env or _env(cwd),
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_documented_redraw_command_redraws_exactly_one_figure(complete_copy):
    proc = _run(_runnable(".venv/bin/snakemake --cores all --force fig2"), complete_copy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert _job_counts(out) == {"experiment_figure": 1}, out[-3000:]  # the id stands for its files
    assert "scaling/scaling/figures/scaling_panels.png" in out and "epistemic_curves" not in out
    nothing = _run(_runnable(".venv/bin/snakemake --cores all fig2"), complete_copy)
    assert nothing.returncode == 0 and "Nothing to be done" in nothing.stdout + nothing.stderr


@pytest.fixture(scope="module")
def planned_logs(complete_copy) -> list[str]:
    """The log file of every job of the default run (a forced dry run prints them)."""
    proc = _run(".venv/bin/snakemake -n --forceall --cores 1", complete_copy)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logs = re.findall(r"^\s+log: (\S+)", proc.stdout, re.M)
    assert len(logs) > 50, proc.stdout[-2000:]
    return logs


@pytest.fixture(scope="module")
def old_clone(complete_copy, tmp_path_factory) -> Path:
    """Another clone's results, copied with their modification times (what /old/clone stands for)."""
    old = tmp_path_factory.mktemp("old") / "clone"
    old.mkdir()
    subprocess.run(["cp", "-a", str(complete_copy / "results"), str(old)], check=True)
    return old


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(shell_blocks(README.read_text()))))
def test_readme_block_runs(index, complete_copy, planned_logs, old_clone):
    """Each fenced shell block, run line by line in one shell (an `export` carries to the next
    line), every command as a dry run; a log it tails is a log some job of the run writes."""
    block = shell_blocks(README.read_text())[index]
    for c in commands(block):
        if (pattern := _log_pattern(c)) is not None:
            assert any(pattern.match(log) for log in planned_logs), f"{c}: no job writes such a log"
    script = "\n".join(_runnable(c, str(old_clone)) for c in commands(block))
    proc = _run(script, complete_copy, _env(complete_copy))
    assert proc.returncode == 0, f"{script}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    if "make -n demo" in script:
        assert re.search(r"^\S*snakemake --cores all$", proc.stdout, re.M), proc.stdout
    if "make -n test" in script:
        assert re.search(r"^\S*python -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --durations=25 "
                         r"--file-durations=0$", proc.stdout, re.M), proc.stdout
    if "cp -a " in script:  # a run copied from another clone is up to date, with a plain `snakemake -n`
        assert "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-2000:]


@pytest.mark.slow
def test_slurm_job_count_table_is_current(dag_dry_run, tmp_path):
    """The README's SLURM table equals what scripts/ci/slurm_tables.py measures now, from the
    session's dry runs of the same configs (tests/conftest.py; only AFHQ without bundling is
    run here)."""
    dag_name = {path: name for name, path in DAG_CONFIGS.items()}
    for row, config in slurm_tables.CONFIGS.items():
        (tmp_path / f"{row}.txt").write_text(dag_dry_run(dag_name[REPO / config if config else None]).out)
    proc = subprocess.run([sys.executable, str(REPO / "scripts/ci/slurm_tables.py"), "--check",
                           "--dry-runs", str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
