"""Where a run's time went: Snakemake's benchmark files summed per rule.

Every rule of the workflow writes one benchmark file per job under ``<run>/benchmarks/``, at
``<rule>.tsv`` (a rule without wildcards) or ``<rule>/<wildcards...>.tsv``, so the rule of a
file is its first path component. A file is Snakemake's TSV: a header line with the columns
of :data:`BENCHMARK_COLUMNS` and one line per repetition of the job (``s`` wall seconds,
``max_rss`` MB; ``NA`` where the job ended before its first sample, ``-`` where unmeasured).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.errors import DataError

BENCHMARK_COLUMNS = ("s", "h:m:s", "max_rss", "max_vms", "max_uss", "max_pss", "io_in", "io_out",
                     "mean_load", "cpu_time")
TIMING_COLUMNS = ("rule", "jobs", "total_s", "max_s", "max_rss_mb")


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


def timings_table(root: str | os.PathLike, memory: bool = True) -> pd.DataFrame:
    """Per rule: ``jobs``, ``total_s`` and ``max_s`` (wall seconds, summed and largest over its
    jobs) and ``max_rss_mb`` (largest resident set of one job, MB; NaN if none was sampled),
    slowest rule first, then a row ``total`` over all of them. Empty (columns only) when `root`
    holds no benchmark file. memory=False leaves ``max_rss_mb`` NaN: when the local job server
    ran the jobs, Snakemake measured only the client process of each job, not its work."""
    rows = []
    for rule, paths in benchmark_files(root).items():
        jobs = [read_benchmark(p) for p in paths]
        seconds = np.array([j["s"] for j in jobs])
        rss = np.array([j["max_rss"] if memory else float("nan") for j in jobs])
        rows.append({"rule": rule, "jobs": len(jobs), "total_s": float(seconds.sum()), "max_s": float(seconds.max()),
                     "max_rss_mb": float(np.nanmax(rss)) if np.isfinite(rss).any() else float("nan")})
    df = pd.DataFrame(rows, columns=list(TIMING_COLUMNS))
    if df.empty:
        return df
    df = df.sort_values(["total_s", "rule"], ascending=[False, True], ignore_index=True)
    total = {"rule": "total", "jobs": int(df["jobs"].sum()), "total_s": float(df["total_s"].sum()),
             "max_s": float(df["max_s"].max()),
             "max_rss_mb": float(df["max_rss_mb"].max()) if df["max_rss_mb"].notna().any() else float("nan")}
    return pd.concat([df, pd.DataFrame([total])], ignore_index=True)
