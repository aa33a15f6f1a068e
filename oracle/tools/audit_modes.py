"""The audit's modes that re-execute jobs (`oracle.tools.rebuild`): re-deriving every file
that is computed from the run's results (``--check-numbers``) and rebuilding the chain behind
an artifact (``--rebuild``).

Re-derivation rebuilds the jobs of the derivation rules (`DERIVATION_RULES` and every kind's
``<kind>_collect``) from the run's own inputs: each kind's data files from the classifiers'
metrics, predictions and histories, each table and each numbers part from its data files,
numbers.json and numbers.tex from the parts, claims from numbers.json. A table, data file,
numbers.tex or claims file whose bytes are not what its job makes (a forgery with a re-signed
record) is flagged. A world's constants are not recomputed here (a pass over all its samples):
the shard rows are re-scored instead (`oracle.tools.audit_shards`), and ``--rebuild``
recomputes them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from oracle.tools.rebuild import COLLECT_SUFFIX, Job, chain, rebuild, run_jobs, sample_jobs, summary

__all__ = ["DERIVATION_RULES", "derivation_problems", "rebuild_target"]

#: The rules whose outputs are computed from other results alone (each kind's collect besides).
DERIVATION_RULES = frozenset({"experiment_table", "experiment_numbers", "world_numbers", "validation_table",
                              "validation_numbers", "numbers", "claims"})


def derivation_jobs(run_dir: str | os.PathLike) -> list[Job]:
    """The run's jobs of the derivation rules, and of every ``<kind>_collect``."""
    return [j for j in run_jobs(run_dir).values() if j.rule in DERIVATION_RULES or j.rule.endswith(COLLECT_SUFFIX)]


def derivation_problems(run_dir: str | os.PathLike, configfile: str | os.PathLike, *, cores: int = 1,
                        scratch: str | os.PathLike | None = None, keep: bool = False,
                        log: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """(problems, notes) of re-deriving the run's derived files (module docstring): one problem
    per file whose rebuild is not identical (wall-clock fields and HDF5 times apart)."""
    jobs = derivation_jobs(run_dir)
    if not jobs:
        return [f"{run_dir}: no job of a derivation rule has a record"], []
    outcomes, base = rebuild(jobs, run_dir, configfile, scratch=scratch, cores=cores, keep=keep, log=log)
    problems = [f"{o.artifact}: rebuilding it from its inputs (rule {o.job}) gives another file: {o.detail}"
                for o in outcomes if o.verdict not in ("identical", "same content")]
    counts = summary(outcomes)
    notes = [f"re-derived {len(jobs)} job(s), {len(outcomes)} file(s): "
             + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
             + (f" (scratch folder kept: {base})" if base.exists() else "")]
    return problems, notes


def rebuild_target(target: str | os.PathLike, run_dir: str | os.PathLike, configfile: str | os.PathLike, *,
                   sample: int | None = None, seed: int = 0, cores: int = 1, scratch: str | os.PathLike | None = None,
                   keep: bool = False, log: Callable[[str], None] = print) -> dict:
    """Rebuild the chain behind `target` (or `sample` jobs of it, drawn with `seed`) and compare.

    Returns {"target", "jobs" (rebuilt), "chain" (jobs in the chain), "outcomes": [{job,
    artifact, verdict, detail}], "counts", "scratch", "ok", "lines" (the report as text)}; ok
    when no output is a mismatch."""
    jobs = chain(target, run_jobs(run_dir))
    todo = sample_jobs(jobs, sample, seed) if sample else jobs
    outcomes, base = rebuild(todo, run_dir, configfile, scratch=scratch, cores=cores, keep=keep, log=log)
    counts = summary(outcomes)
    width = max(len(v) for v in counts)
    lines = [f"rebuild of {target}: {len(todo)} of the {len(jobs)} job(s) behind it"
             + (f" (a random sample, seed {seed})" if len(todo) < len(jobs) else "")]
    for o in outcomes:
        lines.append(f"  {o.verdict:<{width}}  {o.artifact}  [{o.job}]" + (f": {o.detail}" if o.detail else ""))
    ok = counts["mismatch"] == 0
    lines.append(f"{len(outcomes)} output(s): " + ", ".join(f"{n} {v}" for v, n in counts.items())
                 + ("" if ok else f"; scratch folder kept: {base}")
                 + (f"; scratch folder: {base}" if ok and Path(base).exists() else ""))
    return {"target": str(target), "jobs": len(todo), "chain": len(jobs),
            "outcomes": [o.__dict__ for o in outcomes], "counts": counts, "scratch": str(base), "ok": ok,
            "lines": lines}
