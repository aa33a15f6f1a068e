"""Prove an artifact by rebuilding it: re-execute the jobs behind it in a scratch folder and
compare what they make with the run's files (``audit <artifact> --rebuild``).

The run's jobs are read from its provenance records (`run_jobs`: one job per rule and wildcards,
with its outputs and recorded inputs). The jobs to rebuild (the whole chain behind an artifact,
`chain`, or a random sample of it) get a scratch working directory holding, from the run, every
input they read that none of them makes (copied, or hard-linked when large and on the same
file system, with its record and modification time) and a link to each relative path the
config names (raw data, checkpoints). One ``snakemake`` call with the run's effective config
then makes exactly those jobs' outputs (``--allowed-rules``, the ``code`` rerun trigger off as
for a moved run), and each output is compared with the run's (`oracle.tools.artifact_diff`).

A job whose inputs were themselves rebuilt reads the rebuilt files, so rebuilding a whole chain
re-executes it from the raw data; where a rebuilt input differed, the outputs made from it say so.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oracle.errors import DataError
from oracle.io.hashing import RECORD_SUFFIX
from oracle.tools.artifact_diff import VERDICTS, compare_artifacts
from oracle.workflow.plan.paths import RESULTS
from oracle.workflow.provenance.input_identity import config_paths, in_results
from oracle.workflow.plan.resources import COLLECT_SUFFIX
from oracle.workflow.provenance import REPO_ROOT, read_record, record_path, resolve_recorded_path

__all__ = ["COLLECT_SUFFIX", "Job", "Outcome", "chain", "rebuild", "run_jobs", "sample_jobs", "summary"]

#: Rules never rebuilt: what they write measures the run itself (its timings).
NOT_REBUILT = frozenset({"timings"})
#: Files at least this large are hard-linked into the scratch folder when it shares their file system.
LINK_BYTES = 16 << 20
_SKIP = {"logs", "benchmarks", "ckpt"}


@dataclass
class Job:
    """One job of a run, as its outputs' records describe it."""

    rule: str
    wildcards: dict
    outputs: list[Path] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)  # recorded inputs and referenced files, resolved

    @property
    def key(self) -> str:
        return job_key(self.rule, self.wildcards)

    def label(self) -> str:
        wc = " ".join(f"{k}={v}" for k, v in self.wildcards.items())
        return f"{self.rule}" + (f" ({wc})" if wc else "")


@dataclass
class Outcome:
    """What rebuilding one output gave."""

    job: str
    artifact: str
    verdict: str
    detail: str


def job_key(rule: str, wildcards: Mapping) -> str:
    return json.dumps([rule, dict(sorted((str(k), str(v)) for k, v in wildcards.items()))])


def run_jobs(run_dir: str | os.PathLike) -> dict[str, Job]:
    """Every job of the run in `run_dir` (``results/<run>``) that has a record, by `job_key`."""
    root = Path(run_dir)
    jobs: dict[str, Job] = {}
    for side in sorted(root.rglob(f"*{RECORD_SUFFIX}")):
        if _SKIP.intersection(side.relative_to(root).parts):
            continue
        art = side.with_name(side.name[: -len(RECORD_SUFFIX)])
        try:
            rec = read_record(art)
        except DataError:
            continue
        job = jobs.setdefault(job_key(rec.get("rule", "?"), rec.get("wildcards") or {}),
                              Job(str(rec.get("rule")), dict(rec.get("wildcards") or {})))
        job.outputs.append(art)
        for inp in list(rec.get("inputs") or {}) + list((rec.get("extra") or {}).get("references", [])):
            p = resolve_recorded_path(inp, rec, art)
            if p not in job.inputs:
                job.inputs.append(p)
    return jobs


def _producers(jobs: Mapping[str, Job]) -> dict[str, Job]:
    return {os.path.abspath(o): j for j in jobs.values() for o in j.outputs}


def chain(target: str | os.PathLike, jobs: Mapping[str, Job]) -> list[Job]:
    """The jobs behind `target` (its own job first, then every job whose output it was made
    from, transitively), each once, upstream last."""
    made_by = _producers(jobs)
    first = made_by.get(os.path.abspath(target))
    if first is None:
        raise DataError(f"{target} has no provenance record in its run: nothing to rebuild")
    out, queue, seen = [], [first], {first.key}
    while queue:
        job = queue.pop(0)
        out.append(job)
        for inp in job.inputs:
            up = made_by.get(os.path.abspath(inp))
            if up is not None and up.key not in seen:
                seen.add(up.key)
                queue.append(up)
    return out


def sample_jobs(jobs: Sequence[Job], k: int, seed: int) -> list[Job]:
    """`k` jobs of `jobs` drawn at random (all of them when k >= their number)."""
    if k >= len(jobs):
        return list(jobs)
    return random.Random(seed).sample(list(jobs), k)


def _place(src: Path, dst: Path) -> None:
    """Put the run's file (or folder) `src` at `dst` with its record, keeping modification times."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=shutil.copy2)
    else:
        try:
            if src.stat().st_size < LINK_BYTES:
                raise OSError("small: copied")
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    side = record_path(src)
    if side.is_file():
        shutil.copy2(side, record_path(dst))


def _run_relative(path: Path, run_dir: Path) -> Path:
    return Path(os.path.abspath(path)).relative_to(os.path.abspath(run_dir))


def rebuild(jobs: Sequence[Job], run_dir: str | os.PathLike, configfile: str | os.PathLike, *,
            scratch: str | os.PathLike | None = None, cores: int = 1, keep: bool = False,
            log=print) -> tuple[list[Outcome], Path]:
    """Re-execute `jobs` of the run in `run_dir` in a scratch working directory (module
    docstring) and compare each output with the run's. Returns the outcomes (one per output,
    jobs in order) and the scratch folder (removed unless `keep` or something failed).

    configfile: the run's effective config (``<run>/config.yaml``). scratch: where the scratch
    folder is made (default the system's temporary folder; put it on the run's file system to
    hard-link large inputs). cores: Snakemake's --cores. log: where progress lines go.
    """
    run_dir = Path(run_dir)
    jobs = [j for j in jobs if j.rule not in NOT_REBUILT]
    if not jobs:
        raise DataError("no job to rebuild (timings are never rebuilt: they measure the run)")
    workdir = Path(os.path.abspath(run_dir)).parent.parent  # <workdir>/results/<run>
    base = Path(tempfile.mkdtemp(prefix="oracle-rebuild-", dir=scratch))
    here = base / RESULTS / run_dir.name
    targets = {os.path.abspath(o) for j in jobs for o in j.outputs}
    placed: set[str] = set()
    for job in jobs:
        for inp in job.inputs:
            src = Path(inp)
            if os.path.abspath(src) in targets or not in_results(src) or not src.exists():
                continue
            if os.path.abspath(src) not in placed:
                placed.add(os.path.abspath(src))
                _place(src, here / _run_relative(src, run_dir))
    config = _load(configfile)
    for named in config_paths(config, workdir):
        try:
            rel = Path(os.path.abspath(named)).relative_to(workdir)
        except ValueError:
            continue  # an absolute path outside the checkout is read where it lies
        link = base / rel
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.abspath(named))
    rules = sorted({j.rule for j in jobs})
    outputs = [str(Path(RESULTS) / run_dir.name / _run_relative(o, run_dir)) for j in jobs for o in j.outputs]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "-d", str(base),
           "--configfile", os.path.abspath(configfile), "--cores", str(cores), "--rerun-triggers", "mtime", "params",
           "input", "software-env", "--allowed-rules", *rules, "--", *outputs]
    log(f"rebuilding {len(jobs)} job(s) ({', '.join(rules)}) in {base}")
    proc = subprocess.run(cmd, cwd=base, capture_output=True, text=True)
    (base / "rebuild.log").write_text(proc.stdout + proc.stderr)
    outcomes = _compare(jobs, run_dir, here)
    failed = proc.returncode != 0 or any(o.verdict == "mismatch" for o in outcomes)
    if proc.returncode != 0:
        errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "Error" in ln][:3]
        log(f"snakemake exited with status {proc.returncode} (log: {base / 'rebuild.log'}): " + " | ".join(errors))
    if not keep and not failed:
        shutil.rmtree(base, ignore_errors=True)
    return outcomes, base


def _load(configfile: str | os.PathLike) -> dict:
    from oracle.workflow.plan.config import effective_config

    return effective_config(configfile)


def _compare(jobs: Sequence[Job], run_dir: Path, here: Path) -> list[Outcome]:
    verdict_of: dict[str, str] = {}
    outcomes = []
    for job in _upstream_first(jobs):
        differing = [str(i) for i in job.inputs if VERDICTS.index(verdict_of.get(os.path.abspath(i), "identical")) > 1]
        for out in job.outputs:
            verdict, detail = compare_artifacts(out, here / _run_relative(out, run_dir))
            if verdict == "mismatch" and differing:
                detail += f" (made from a rebuilt input that differs too: {differing[0]})"
            verdict_of[os.path.abspath(out)] = verdict
            outcomes.append(Outcome(job.label(), _shown(out), verdict, detail))
    return outcomes


def _upstream_first(jobs: Sequence[Job]) -> list[Job]:
    made_by = {os.path.abspath(o): j.key for j in jobs for o in j.outputs}
    done: set[str] = set()
    order: list[Job] = []
    pending = list(jobs)
    while pending:
        ready = [j for j in pending if all(made_by.get(os.path.abspath(i)) in done | {None, j.key} for i in j.inputs)]
        ready = ready or pending[:1]  # a cycle cannot happen; never stall
        for j in ready:
            order.append(j)
            done.add(j.key)
            pending.remove(j)
    return order


def _shown(path: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def summary(outcomes: Iterable[Outcome]) -> dict[str, int]:
    """How many outputs got each verdict."""
    out = {v: 0 for v in VERDICTS}
    for o in outcomes:
        out[o.verdict] += 1
    return out
