"""Where a run's time went: Snakemake's benchmark files summed per rule.

Every rule of the workflow writes one benchmark file per job under ``<run>/benchmarks/``, at
``<rule>.tsv`` (a rule without wildcards) or ``<rule>/<wildcards...>.tsv``, so the rule of a
file is its first path component. A file is Snakemake's TSV: a header line with the columns
of :data:`BENCHMARK_COLUMNS` and one line per repetition of the job (``s`` wall seconds,
``max_rss`` MB; ``NA`` where the job ended before its first sample, ``-`` where unmeasured).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.errors import DataError

BENCHMARK_COLUMNS = ("s", "h:m:s", "max_rss", "max_vms", "max_uss", "max_pss", "io_in", "io_out",
                     "mean_load", "cpu_time")
TIMING_COLUMNS = ("rule", "jobs", "job_s", "max_job_s", "max_rss_mb")


def read_benchmark(path: str | os.PathLike) -> dict[str, float]:
    """One job's benchmark file -> ``{"s": wall seconds, "max_rss": MB}``: the mean wall time
    over the file's repetitions and the largest resident set (NaN when never sampled)."""
    try:
        df = pd.read_csv(path, sep="\t", na_values=["NA", "-"])
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable Snakemake benchmark file ({exc})") from None
    missing = [c for c in ("s", "max_rss") if c not in df.columns]
    if missing or df.empty:
        raise DataError(f"{path}: benchmark file lacks column(s) {missing} or rows; expected {', '.join(BENCHMARK_COLUMNS)}")
    seconds = pd.to_numeric(df["s"], errors="coerce")
    if seconds.isna().any():
        raise DataError(f"{path}: column s holds a value that is not a number of seconds")
    rss = pd.to_numeric(df["max_rss"], errors="coerce")
    return {"s": float(seconds.mean()), "max_rss": float(rss.max()) if rss.notna().any() else float("nan")}


def benchmark_files(root: str | os.PathLike) -> dict[str, list[Path]]:
    """Every ``*.tsv`` under `root`, grouped by rule (the first path component, module docstring)."""
    root = Path(root)
    groups: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*.tsv")):
        rule = path.relative_to(root).parts[0].removesuffix(".tsv")
        groups.setdefault(rule, []).append(path)
    return groups


def timings_table(root: str | os.PathLike, memory: bool = True, rss: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per rule: ``jobs``, ``job_s`` and ``max_job_s`` (job-seconds: wall seconds of its jobs,
    summed and largest) and ``max_rss_mb`` (largest resident set of one job, MB; NaN if none
    was sampled), slowest rule first, then a row ``total`` over all of them. Empty (columns
    only) when `root` holds no benchmark file. memory=False: the local job server ran the
    jobs, so Snakemake measured only each job's client, not its work; ``max_rss_mb`` is then
    the rule's value in `rss` (`read_rss_records`: the server records every job it runs), and
    for a rule `rss` lacks, whose jobs ran inline (flow training, data), the benchmark's; NaN
    everywhere without `rss`."""
    rows = []
    for rule, paths in benchmark_files(root).items():
        jobs = [read_benchmark(p) for p in paths]
        seconds = np.array([j["s"] for j in jobs])
        if memory or (rss is not None and rule not in rss):
            rss_mb = np.array([j["max_rss"] for j in jobs])
        else:
            rss_mb = np.array([(rss or {}).get(rule, float("nan"))])
        rows.append({"rule": rule, "jobs": len(jobs), "job_s": float(seconds.sum()), "max_job_s": float(seconds.max()),
                     "max_rss_mb": float(np.nanmax(rss_mb)) if np.isfinite(rss_mb).any() else float("nan")})
    df = pd.DataFrame(rows, columns=list(TIMING_COLUMNS))
    if df.empty:
        return df
    df = df.sort_values(["job_s", "rule"], ascending=[False, True], ignore_index=True)
    total = {"rule": "total", "jobs": int(df["jobs"].sum()), "job_s": float(df["job_s"].sum()),
             "max_job_s": float(df["max_job_s"].max()),
             "max_rss_mb": float(df["max_rss_mb"].max()) if df["max_rss_mb"].notna().any() else float("nan")}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)


# --------------------------------------------------------------------------- the run's wall time
#
# Job-seconds (``job_s``) add up jobs that ran side by side, so they exceed the wall time of a
# parallel run. A benchmark file is written when its job ends, so its modification time is the
# job's end and ``mtime - s`` its start: the run's wall time is read from the same files.


def job_intervals(root: str | os.PathLike) -> list[tuple[float, float]]:
    """``(start, end)`` in epoch seconds of every job with a benchmark file under `root`
    (end: the file's modification time; start: end minus its wall seconds)."""
    out = []
    for paths in benchmark_files(root).values():
        for path in paths:
            end = path.stat().st_mtime
            out.append((end - read_benchmark(path)["s"], end))
    return out


#: A pause longer than this (seconds) with no job running separates two invocations: within one,
#: Snakemake starts the next job within seconds of the one it waited for.
INVOCATION_GAP_S = 60.0


def wall_time(intervals: list[tuple[float, float]], gap_s: float = INVOCATION_GAP_S) -> dict[str, float]:
    """``span_s``: first job start to last job end; ``busy_s``: the time at least one job ran
    (the span less the gaps, e.g. between two invocations that made the results);
    ``last_s``: first start to last end of the last invocation's jobs (the jobs after the last
    pause longer than `gap_s` with no job running), ``last_jobs`` their number: after one
    redrawn figure, that figure's job alone, not the run that made everything else. NaN (and
    0 jobs) when there is no interval."""
    if not intervals:
        return {"span_s": float("nan"), "busy_s": float("nan"), "last_s": float("nan"), "last_jobs": 0}
    ordered = sorted(intervals)
    busy, (cur_start, cur_end) = 0.0, ordered[0]
    last_start, last_jobs = ordered[0][0], 1
    for start, end in ordered[1:]:
        if start > cur_end + gap_s:
            last_start, last_jobs = start, 0
        last_jobs += 1
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    end = max(e for _, e in ordered)
    return {"span_s": end - ordered[0][0], "busy_s": busy, "last_s": end - last_start, "last_jobs": last_jobs}


# --------------------------------------------------------------------------- the critical path
#
# The longest chain of jobs, each waiting for the outputs of the one before, bounds the wall
# time from below whatever the number of cores. The jobs and their dependencies are read from
# the provenance records (``<artifact>.prov.json``, oracle.workflow.provenance): a job is a
# (rule, wildcards) pair, its outputs the artifacts of its records, its inputs their ``inputs``,
# its seconds the records' ``wall_time_s`` (the script's body: process start-up is not in it).


def provenance_jobs(root: str | os.PathLike) -> dict[str, dict]:
    """Every job that left a provenance record under `root`: name -> ``{"rule", "seconds",
    "outputs": set of artifact ids, "inputs": set of input ids}`` (ids as the records write
    them: paths relative to the working directory). The name is ``rule[key=value, ...]``."""
    import json

    from oracle.io.hashing import RECORD_SUFFIX

    jobs: dict[str, dict] = {}
    for path in sorted(Path(root).rglob(f"*{RECORD_SUFFIX}")):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: not a readable provenance record ({exc})") from None
        wildcards = rec.get("wildcards") or {}
        name = rec["rule"] + (f"[{', '.join(f'{k}={v}' for k, v in sorted(wildcards.items()))}]" if wildcards else "")
        job = jobs.setdefault(name, {"rule": rec["rule"], "wildcards": {str(k): str(v) for k, v in wildcards.items()},
                                     "seconds": 0.0, "timed_by": "script", "outputs": set(), "inputs": set()})
        job["seconds"] = max(job["seconds"], float(rec.get("wall_time_s") or 0.0))
        job["outputs"].add(rec["id"])
        job["inputs"].update(rec.get("inputs") or {})
    return jobs


def _benchmark_matches(parts: tuple[str, ...], values: list[str]) -> bool:
    """Whether the benchmark path components `parts` (below the rule's folder, without .tsv)
    spell the wildcard `values`: each component one value behind a literal prefix without
    digits (``seed{seed}``, ``shard-{shard}``, ``kl_from_{reference}``)."""
    if len(parts) != len(values):
        return False
    left = sorted(values, key=len, reverse=True)
    for part in parts:
        hit = next((v for v in left if part.endswith(v) and not any(c.isdigit() for c in part[:len(part) - len(v)])),
                   None)
        if hit is None:
            return False
        left.remove(hit)
    return True


def time_jobs_by_benchmarks(jobs: dict[str, dict], root: str | os.PathLike) -> None:
    """Replace each job's ``seconds`` (script time) by its benchmark file's wall seconds, which
    include process start-up, where exactly one file of its rule under `root` spells its
    wildcards (`_benchmark_matches`); ``timed_by`` says which. In place."""
    files = {rule: [(p.relative_to(Path(root) / rule).with_suffix("").parts if p.parent != Path(root) else (), p)
                    for p in paths] for rule, paths in benchmark_files(root).items()}
    for job in jobs.values():
        values = list(job["wildcards"].values())
        hits = [p for parts, p in files.get(job["rule"], []) if _benchmark_matches(parts, values)]
        if len(hits) == 1:
            job["seconds"], job["timed_by"] = read_benchmark(hits[0])["s"], "benchmark"


def critical_path(jobs: dict[str, dict]) -> tuple[float, list[str]]:
    """The chain of jobs with the largest summed ``seconds`` in which each job reads an output
    of the one before (an input inside an output directory counts); ``(seconds, [job names,
    first to last])``, ``(0.0, [])`` without jobs. `jobs` as `provenance_jobs` returns them."""
    producer = {out: name for name, job in jobs.items() for out in job["outputs"]}

    def parents(name: str) -> set[str]:
        found = set()
        for inp in jobs[name]["inputs"]:
            for cand in (inp, *(p.as_posix() for p in Path(inp).parents)):
                if cand in producer and producer[cand] != name:
                    found.add(producer[cand])
                    break
        return found

    # Kahn's order (no recursion, so a long chain cannot hit the recursion limit): a job is
    # timed once every job it reads from is; jobs left over lie on a cycle.
    ups = {name: parents(name) for name in jobs}
    downs: dict[str, list[str]] = {name: [] for name in jobs}
    for name, ps in ups.items():
        for p in ps:
            downs[p].append(name)
    waiting = {name: len(ps) for name, ps in ups.items()}
    ready = sorted(name for name, n in waiting.items() if n == 0)
    best: dict[str, tuple[float, list[str]]] = {}
    while ready:
        top = ready.pop()
        chains = [best[p] for p in ups[top]]
        before = max(chains, key=lambda c: (c[0], c[1])) if chains else (0.0, [])
        best[top] = (before[0] + jobs[top]["seconds"], [*before[1], top])
        for child in downs[top]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(best) < len(jobs):
        stuck = sorted(set(jobs) - set(best))[0]
        raise DataError(f"provenance records form a cycle through job {stuck}")
    if not best:
        return 0.0, []
    return max(best.values(), key=lambda c: (c[0], c[1]))


# --------------------------------------------------------------------------- memory under the job server
#
# Under the local job server a job's work runs in a child forked by the server, outside the
# process that Snakemake's benchmark measures. The server reads each child's peak resident set
# when it reaps it (``os.wait4``), and `oracle.workflow.jobs.run_job` writes it next to the
# job's log, as ``<log>.usage.json`` (`oracle.workflow.jobs.server.delegate`):
#     {"rule": "<rule name>", "max_rss_mib": <float>, "user_s": ..., "system_s": ..., "wall_s": ...}
# `timings_table(memory=False)` then takes each rule's memory from these files.

USAGE_SUFFIX = ".usage.json"


def usage_record_path(log: str | os.PathLike) -> Path:
    """Where the job server's usage record of the job whose log is `log` lies: ``<log>.usage.json``."""
    p = Path(log)
    return p.with_name(p.name + USAGE_SUFFIX)


def read_rss_records(root: str | os.PathLike) -> dict[str, float]:
    """Per rule, the largest ``max_rss_mib`` of the ``*.usage.json`` records under `root` (MiB,
    the unit of Snakemake's benchmark ``max_rss``); records without a rule are skipped."""
    import json

    out: dict[str, float] = {}
    for path in sorted(Path(root).rglob(f"*{USAGE_SUFFIX}")):
        try:
            rec = json.loads(path.read_text())
            if "rule" not in rec:
                continue
            rule, mb = str(rec["rule"]), float(rec["max_rss_mib"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataError(f"{path}: not a job usage record ({exc}); expected {{\"rule\", \"max_rss_mib\"}}") from None
        out[rule] = max(out.get(rule, mb), mb)
    return out


#: How the note under the timing table that states the run's wall time begins (`timing_notes`
#: writes it, `recorded_timing` reads it back).
WALL_NOTE = "- Wall time: "


def timing_notes(table: pd.DataFrame, wall: Mapping[str, float], path_s: float, chain: list[str],
                 jobs: Mapping[str, Mapping] | None = None) -> str:
    """The lines under the timing table: job-seconds against the run's wall time (`wall_time`)
    and its critical path (`critical_path`; each job's seconds from `jobs` when given)."""
    total = table[table["rule"] == "total"]
    lines = []
    if len(total):
        lines.append(f"- Job-seconds: {float(total['job_s'].iloc[0]):.1f} s over {int(total['jobs'].iloc[0])} jobs "
                     "(summed over jobs that ran side by side: not the wall time).")
    if np.isfinite(wall.get("last_s", float("nan"))):
        n = wall['last_jobs']
        lines.append(f"{WALL_NOTE}{wall['last_s']:.1f} s, the jobs of the last invocation ({n} job{'s' if n != 1 else ''} "
                     f"after the last pause of over {INVOCATION_GAP_S:.0f} s with no job running).")
        if wall["last_s"] < wall["span_s"] - 1.0:
            lines.append(f"- Earlier invocations made the other results: over all jobs, {wall['span_s']:.1f} s "
                         f"from the first job's start to the last job's end, jobs running during "
                         f"{wall['busy_s']:.1f} s of it.")
    if chain:
        steps = [f"{name} {float(jobs[name]['seconds']):.1f} s" if jobs else name for name in chain]
        script = [name for name in chain if jobs and jobs[name].get("timed_by") == "script"]
        how = (f"; {len(script)} of them timed by their script alone, without process start-up" if script else "")
        lines.append(f"- Critical path (the longest chain of jobs, each waiting for the one before): {path_s:.1f} s "
                     f"over {len(chain)} jobs{how}: {' -> '.join(steps)}.")
    return "\n".join(lines)


def recorded_timing(run: str | os.PathLike) -> dict[str, float]:
    """What a finished run folder recorded of its time when it ended: ``wall_s``, the wall time
    of its last invocation (seconds; the `WALL_NOTE` line of its timings.md) and ``job_s``, its
    job-seconds (the ``total`` row of its timings.csv); NaN where the run has no such file or
    line (a run made before the timings rule, or one without benchmarks). Read from what the run
    wrote, not from the benchmark files' modification times, which a copied folder loses.
    DataError naming the file when a line or row is there but holds no number."""
    run = Path(run)
    out = {"wall_s": float("nan"), "job_s": float("nan")}
    md, csv = run / "timings.md", run / "timings.csv"
    if md.is_file():
        for line in md.read_text(encoding="utf-8").splitlines():
            if line.startswith(WALL_NOTE):
                try:
                    out["wall_s"] = float(line[len(WALL_NOTE):].split(" s", 1)[0])
                except ValueError:
                    raise DataError(f"{md}: the line {line[:60]!r} holds no number of seconds") from None
    if csv.is_file():
        try:
            table = pd.read_csv(csv)
            total = table.loc[table["rule"] == "total", "job_s"]
            out["job_s"] = float(total.iloc[0]) if len(total) else float("nan")
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"{csv}: not a timing table with columns rule, job_s ({exc})") from None
    return out
