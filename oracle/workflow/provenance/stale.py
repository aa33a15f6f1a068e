"""At the start of a run: the existing artifacts the targets need, compared through their
records with the config now, so that results copied without Snakemake's metadata (a fresh
clone, a deleted ``.snakemake``, a results folder linked in) are never passed off as current.

Snakemake decides what to rerun from its own metadata (``.snakemake/metadata``: a rule's
params, input set and code) and from modification times. Without that metadata it reruns only
what is missing or older than its inputs, so a changed setting over copied results runs
nothing. The workflow (its start check, `oracle.workflow.start_check`) therefore hands every job of the
DAG that Snakemake would not run to `stale_reasons`, which finds, per job, from its outputs'
records:

- an output that is missing while its record is still there (a job that failed after writing
  its records, a file deleted by hand), or while the records of files made from it list it as
  an input (a kept model gone with its record: the predictions made from it name it);
- params of the job now that differ from those its record holds (Snakemake's ``params``
  trigger: the rule's scripts read the config only through their params,
  `oracle.workflow.provenance.params`), or a record written before records held params.

Those jobs are rerun, and with them everything downstream. A params difference counts only for
an artifact that is otherwise this run's own: its record names its place, its bytes are the
recorded ones and those its consumers recorded, and its recorded inputs are the files there now.
Anything else is a changed or foreign artifact (a shard of another world or seed put in place,
a model swapped in from another run, a file without a record), which is not silently remade:
the jobs that read it
refuse it with one line naming it and the command that remakes it
(`oracle.workflow.provenance.input_identity`), before Snakemake removes any output.

Code that differs from what made an artifact (its record's ``code.files``) is reported in one
line, not rerun: Snakemake reruns a job whose rule script changed, library code moves on
without invalidating results, and ``audit --strict-code`` flags it (docs/provenance.md). So are
other versions of the packages that shape results than the records name (`package_drift_note`).

Then `overwrite_problems` refuses a run that would overwrite another run's or checkout's
artifact reached through a link (`oracle.workflow.provenance.input_identity.linked_elsewhere`).

Everything here takes plain values (`PlannedJob`); `oracle.workflow.start_check` turns Snakemake's jobs into them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from oracle.errors import DataError
from oracle.io.hashing import file_sha256
from oracle.workflow.provenance.params import params_differ
from oracle.workflow.provenance.input_identity import linked_elsewhere, made_from_problems, place_problems, recorded_sha256
from oracle.workflow.provenance import REPO_ROOT, package_drift, read_record, record_path, resolve_recorded_path

__all__ = ["PlannedJob", "code_drift_note", "script_unchanged", "overwrite_error", "overwrite_problems", "package_drift_note", "report_error", "stale_reasons",
           "stale_summary"]


@dataclass(frozen=True)
class PlannedJob:
    """What the start check needs of one job of the DAG.

    rule:        the rule's name.
    outputs:     the outputs the run keeps (temporary ones left out: they are deleted after use).
    params:      the job's params now (`oracle.workflow.provenance.params.job_params`), None
                 for a rule that writes no record (an alias, ``all``: no script).
    needrun:     whether Snakemake runs it already.
    inputs:      its input files (`report_error` names the first job of a chain to run).
    """

    rule: str
    outputs: tuple[str, ...]
    params: Mapping | None
    needrun: bool
    inputs: tuple[str, ...] = ()


def _record(path: str) -> dict | None:
    """The record of `path` (None when it has none). DataError, one line with the command that
    remakes it, when the record is there but unreadable: an artifact whose record cannot be read
    cannot be checked, and taking it for one without a record would let it pass silently."""
    try:
        return read_record(path, missing_ok=True)
    except DataError as exc:
        raise DataError(f"{exc}; restore it, or remake {path}: snakemake --forcerun {path}") from None


def _output_reasons(path: str, rec: dict | None, params: Mapping,
                    consumers: Mapping[str, set[str]], sha_of, *, settings: bool) -> list[str]:
    if not os.path.exists(path):
        if record_path(path).is_file():
            return [f"{path} is missing beside its record"]
        # its own record went with it (a job killed mid-write): the records of the files made
        # from it still list it, and a kept output they name must come back
        return [f"{path} is missing and the records of files made from it list it"] \
            if os.path.abspath(path) in consumers else []
    if rec is None or not settings or _foreign(path, rec, consumers, sha_of):
        return []  # a file without a record is not this run's: the jobs that read it refuse it
    if "params" not in rec:
        return [f"its record was written before records kept their job's params (record_version "
                f"{rec.get('record_version')})"]
    return params_differ(rec["params"], params)


def _foreign(path: str, rec: Mapping, consumers: Mapping[str, set[str]], sha_of) -> bool:
    """Whether the file at `path` is not this run's own artifact as its record and its
    consumers' records describe it (module docstring): left to the jobs' refusal."""
    # a linked run's artifacts count as its own here: stale ones are forced, and a forced job
    # that would write behind the link stops the run (`overwrite_problems`)
    if place_problems(path, rec, links=False) or made_from_problems(path, rec, sha_of):
        return True
    # what the file is by its own record, against what its consumers recorded (no rehash: a
    # start check that hashed every shard would take minutes; bytes against their own record
    # are checked where they are read)
    seen = consumers.get(os.path.abspath(path), set())
    return bool(seen) and any(h != sha_of(Path(path)) for h in seen)


def _consumer_hashes(records: Mapping[str, dict]) -> dict[str, set[str]]:
    """{absolute path: the sha256 each record that lists it as an input holds for it}."""
    out: dict[str, set[str]] = {}
    for path, rec in records.items():
        for inp, h in (rec.get("inputs") or {}).items():
            out.setdefault(os.path.abspath(resolve_recorded_path(inp, rec, path)), set()).add(str(h))
    return out


def stale_reasons(jobs: Sequence[PlannedJob], *, settings: bool = True) -> dict[int, list[str]]:
    """{index of a job in `jobs`: why its existing outputs are not what it would make now}, for
    the jobs Snakemake does not run already (module docstring). `settings`: compare the params
    (Snakemake's ``params`` rerun trigger)."""
    records = {p: r for job in jobs for p in job.outputs if os.path.exists(p) and (r := _record(p)) is not None}
    consumers = _consumer_hashes(records)
    shas: dict[str, str] = {}

    def sha_of(p: Path) -> str:  # each file's `recorded_sha256` once
        key = os.path.abspath(p)
        if key not in shas:
            rec = records.get(str(p))
            sha = ((rec or {}).get("artifact") or {}).get("sha256")
            shas[key] = str(sha) if sha else recorded_sha256(Path(p))
        return shas[key]

    out: dict[int, list[str]] = {}
    for i, job in enumerate(jobs):
        if job.needrun or job.params is None:
            continue
        reasons: list[str] = []
        for path in job.outputs:
            reasons += _output_reasons(path, records.get(path), job.params, consumers, sha_of, settings=settings)
        if reasons:
            out[i] = list(dict.fromkeys(reasons))
    return out


def stale_summary(jobs: Sequence[PlannedJob], reasons: Mapping[int, list[str]], limit: int = 8) -> list[str]:
    """The lines the run prints about `stale_reasons`: one per distinct reason (most jobs
    first), with how many jobs it reruns and one of their outputs."""
    by_reason: dict[str, list[int]] = {}
    for i, rs in reasons.items():
        for r in rs:
            by_reason.setdefault(r, []).append(i)
    lines = [f"{len(reasons)} job(s) whose outputs were made under other settings than the run has now, or are "
             "missing beside their records (checked through their provenance records), are rerun:"]
    ranked = sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for reason, idx in ranked[:limit]:
        first = jobs[idx[0]]
        where = f"rule {first.rule}" + (f", e.g. {first.outputs[0]}" if first.outputs else "")
        lines.append(f"  {reason}: {len(idx)} job(s) ({where})")
    if len(ranked) > limit:
        lines.append(f"  ... and {len(ranked) - limit} more reason(s)")
    return lines


def _kept_records(jobs: Sequence[PlannedJob]) -> Iterator[dict | None]:
    """The record of every existing output of the jobs Snakemake does not rerun (rules
    with a script only; None where an output has no readable record): what the drift notes read."""
    for job in jobs:
        if job.needrun or job.params is None:
            continue
        for path in job.outputs:
            yield _record(path) if os.path.exists(path) else None


def code_drift_note(jobs: Sequence[PlannedJob], root: Path = REPO_ROOT) -> str | None:
    """The start check's one-line note on the existing outputs (of jobs Snakemake does not
    rerun) that were made by other code: how many, and the repository files that changed since
    (each record's ``code.files`` against the files under `root` now); None when there are
    none. Reported, not rerun (module docstring)."""
    hashes: dict[str, str | None] = {}
    changed: set[str] = set()
    count = 0
    for rec in _kept_records(jobs):
        files = ((rec or {}).get("code") or {}).get("files") or {}
        mine = set()
        for rel, h in files.items():
            if rel not in hashes:
                p = root / rel
                hashes[rel] = file_sha256(p) if p.is_file() else None
            if hashes[rel] != h:
                mine.add(rel)
        if mine:
            count += 1
            changed |= mine
    if not count:
        return None
    names = sorted(changed)
    return (f"note: {count} existing output(s) were made by other code ({', '.join(names[:4])}"
            f"{' ...' if len(names) > 4 else ''}); they are kept, as Snakemake keeps them: "
            "`snakemake --forcerun <rule>` remakes them, `audit --strict-code` flags them")


def script_unchanged(outputs: Iterable[str], script: str | os.PathLike | None, root: Path = REPO_ROOT) -> bool:
    """Whether every output in `outputs` was made by the rule script `script` as it reads now:
    each output exists with a record whose ``code.files`` holds the script (its path relative
    to `root`) with the sha256 of its bytes now. False when any output or record is missing, the
    script lies outside `root`, or no script is given. Snakemake asks this (through
    `oracle.workflow.engine`) where it would rerun a job because the script's modification time
    is newer than the outputs: a fresh clone or a copied results tree changes mtimes, not code."""
    if script is None:
        return False
    try:
        rel = Path(os.path.realpath(script)).relative_to(Path(os.path.realpath(root))).as_posix()
    except ValueError:
        return False
    now = file_sha256(script) if os.path.isfile(script) else None
    outputs = list(outputs)
    if now is None or not outputs:
        return False
    for path in outputs:
        rec = _record(path) if os.path.exists(path) else None
        if ((rec or {}).get("code") or {}).get("files", {}).get(rel) != now:
            return False
    return True


def report_error(jobs: Sequence[PlannedJob], reasons: Mapping[int, list[str]]) -> str | None:
    """Why ``snakemake --report`` would show results that are not this config's, in one line,
    or None: a job of its DAG that Snakemake would run (an output missing, a setting, input or
    rule changed in its metadata) or whose outputs were made under other settings or are missing
    beside their records (`stale_reasons`). The report shows the files as they lie and the
    config as it is now, so either would pair new parameters with old numbers."""
    pending = [i for i, j in enumerate(jobs) if j.needrun and j.outputs]
    if not pending and not reasons:
        return None
    if reasons:
        why = stale_summary(jobs, reasons, limit=1)[1].strip()
    else:
        # name a job whose inputs are all there: where the chain to run starts
        made = {o for i in pending for o in jobs[i].outputs}
        first = next((jobs[i] for i in pending if not made & set(jobs[i].inputs)), jobs[pending[0]])
        why = f"{len(pending)} job(s) are still to run (rule {first.rule}, e.g. {first.outputs[0]})"
    return (f"the report would show results that are not this config's: {why}; run the workflow with this "
            "config first (snakemake --configfile ...), then --report")


def package_drift_note(jobs: Sequence[PlannedJob]) -> str | None:
    """The start check's one-line note on the existing outputs (of jobs Snakemake does not
    rerun) whose records name other versions of the packages that shape results than the
    environment has (`oracle.workflow.provenance.package_drift`); None when there are none.
    Reported, not rerun, as code drift is."""
    drift: dict[str, None] = {}
    count = 0
    for rec in _kept_records(jobs):
        if mine := package_drift((rec or {}).get("packages")):
            count += 1
            drift.update(dict.fromkeys(mine))
    if not count:
        return None
    return (f"note: {count} existing output(s) were made with other package versions ({'; '.join(list(drift)[:4])}"
            f"{' ...' if len(drift) > 4 else ''}); they are kept: `snakemake --forcerun <rule>` remakes them, "
            "`audit --strict-code` flags them")


def overwrite_problems(jobs: Iterable[PlannedJob], run_dir: str | os.PathLike) -> list[str]:
    """One line per output the run would overwrite (its job runs) that is another run's or
    checkout's artifact reached through a link (`linked_elsewhere`); the run's own
    ``config.yaml`` record speaks for a run folder linked as a whole."""
    advice = "copy the results you want to continue (cp -a) instead of linking them, or remove the link"
    folder_record = Path(run_dir) / "config.yaml"
    rec = _record(str(folder_record)) if folder_record.exists() else None
    folder = linked_elsewhere(folder_record, rec) if rec else None
    outputs = [p for job in jobs if job.needrun for p in job.outputs]
    if folder and outputs:
        return [f"{run_dir} leads to another run's results (its config.yaml: {folder}): this run would write "
                f"{len(outputs)} file(s) there, e.g. {outputs[0]}; {advice}"]
    out = []
    for path in outputs:
        r = _record(path) if os.path.exists(path) else None
        why = linked_elsewhere(path, r) if r else None
        if why:
            out.append(f"{path} would be overwritten, but it is another run's artifact: {why}; {advice}")
    return out


def overwrite_error(jobs: Iterable[PlannedJob], run_dir: str | os.PathLike) -> str | None:
    """The one line that stops a run which would overwrite another run's artifacts
    (`overwrite_problems`: the first, and how many more), or None."""
    problems = overwrite_problems(jobs, run_dir)
    if not problems:
        return None
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"DataError: {problems[0]}{more}"
