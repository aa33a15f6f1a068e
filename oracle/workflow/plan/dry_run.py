"""The one-screen plan a dry run ends with: what the run would submit and request, beside it the
projected GPU-hours of docs/gpu.md where this config is a preset as shipped (and how many times
the flow's job is resubmitted at its time limit), how long its longest job may take, the disk its
samples will fill and the inputs still missing.

`plan_summary(requests, ...)` turns the jobs a dry run would run (`JobRequest`, one per job, as
the Snakefile's start hook reads them from Snakemake's DAG) into the lines printed after
Snakemake's own job table. The disk is that of the sample rows the jobs write (`job_rows`),
at `oracle.workflow.plan.disk.row_bytes(config)` each: the only outputs whose size grows with the data (float32 images
and float64 log-likelihoods).

Units: runtimes in minutes (Snakemake's `runtime` resource), hours in the printed totals. Standard library only (the Snakefile imports the planning modules while it
builds the DAG).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from oracle.errors import ConfigError
from oracle.world_specs import world_specs

#: The projected cost of each preset as shipped, by `config_fingerprint`: written with docs/gpu.md's
#: table by scripts/tools/gpu_cost_table.py (`oracle.tools.gpu.cost.projection`; its FLOP counting
#: takes minutes, so a dry run reads the numbers instead of counting them).
PROJECTION_FILE = Path(__file__).with_name("gpu_projection.json")


def config_fingerprint(config: Mapping) -> str:
    """sha256 (hex) of a validated config with its defaults filled in, as canonical JSON: equal
    for the same settings however the file spelled them."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def projection_for(config: Mapping, path: str | os.PathLike = PROJECTION_FILE) -> dict | None:
    """The projection of `path` ({preset: `oracle.tools.gpu.cost.projection`}) whose config is
    `config` (same `config_fingerprint`), with its preset's name under ``preset``; None when none
    is (a config other than a preset as shipped). ConfigError naming the file when unreadable."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{str(path)!r}: unreadable GPU projection ({exc}); "
                          "rerun scripts/tools/gpu_cost_table.py") from None
    key = config_fingerprint(config)
    for preset, entry in (data.get("presets") or {}).items():
        if entry.get("config_sha256") == key:
            return {**entry, "preset": preset}
    return None


@dataclass(frozen=True)
class JobRequest:
    """One job of the plan as a scheduler sees it.

    rule: the Snakemake rule. stage: what it belongs to (its rules file: classifiers, samples,
    ...). group: its Snakemake group (None: submitted alone); the
    connected jobs of a group form one component, and the profile's group-components bundle
    that many components into one submission (`submissions`). local: runs where Snakemake runs (a
    local rule), not submitted. runtime_min: the `runtime` resource (minutes). cpus, gpus (per
    node), nodes, mem_mb: its other resources. rows: sample rows it writes (a shard, a noisy
    test set; `job_rows`).
    """

    rule: str
    stage: str
    group: str | None
    local: bool
    runtime_min: float
    cpus: int = 1
    gpus: int = 0
    nodes: int = 1
    mem_mb: int = 0
    rows: int = 0


@dataclass(frozen=True)
class Submission:
    """One scheduler submission: a job alone or a group job whose members run one after
    another (the profile's `group_slot`: its time limit is the sum of theirs, its CPUs, GPUs
    and memory their maxima)."""

    rules: tuple[str, ...]
    runtime_min: float
    cpus: int
    gpus: int
    nodes: int

    @property
    def gpu_hours(self) -> float:
        return self.runtime_min / 60 * self.gpus * self.nodes

    @property
    def cpu_hours(self) -> float:
        return self.runtime_min / 60 * self.cpus * self.nodes

    @property
    def name(self) -> str:
        if len(self.rules) == 1:
            return self.rules[0]
        counts = Counter(self.rules)
        return "group of " + ", ".join(f"{n} {r}" for r, n in counts.most_common())


def job_request(config: Mapping, rule: str, rules_file: str, group: str | None, resources: Mapping,
                wildcards: Mapping[str, str], local_rules: Iterable[str]) -> JobRequest:
    """The `JobRequest` of one job from what Snakemake knows of it: its rule, the file that
    defines the rule (the stage: rules/classifiers.smk -> "classifiers", the Snakefile ->
    "targets"), its group, its evaluated resources (`runtime` minutes, `cpus_per_task` or
    `_cores`, `gpu` or `gres` "gpu:<n>", `nodes`, `mem_mb`; missing ones count as none) and
    wildcards. A rule of `local_rules` outside a group runs where Snakemake runs."""
    gres = str(resources.get("gres") or "")
    gpus = int(resources.get("gpu") or 0) or (int(gres.rsplit(":", 1)[1]) if gres.startswith("gpu:") else 0)
    stage = os.path.splitext(os.path.basename(rules_file))[0].replace("Snakefile", "targets")
    return JobRequest(rule, stage, group=group, local=rule in set(local_rules) and group is None,
                      runtime_min=float(resources.get("runtime") or 0),
                      cpus=int(resources.get("cpus_per_task") or resources.get("_cores") or 1), gpus=gpus,
                      nodes=int(resources.get("nodes") or 1), mem_mb=int(resources.get("mem_mb") or 0),
                      rows=job_rows(config, rule, wildcards))


def _components(requests: Sequence[JobRequest], edges: Iterable[tuple[int, int]]) -> dict[str, list[list[int]]]:
    """Per group, its connected components (lists of request indices, in request order): jobs of
    one group joined by an edge (a dependency) run in one group job."""
    parent = list(range(len(requests)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        if requests[a].group is not None and requests[a].group == requests[b].group:
            parent[root(a)] = root(b)
    comps: dict[str, dict[int, list[int]]] = {}
    for i, r in enumerate(requests):
        if r.group is not None and not r.local:
            comps.setdefault(r.group, {}).setdefault(root(i), []).append(i)
    return {g: list(c.values()) for g, c in comps.items()}


def submissions(requests: Sequence[JobRequest], edges: Iterable[tuple[int, int]] = (),
                group_components: Mapping[str, int] | None = None) -> list[Submission]:
    """The submissions of the non-local jobs: one per job outside a group; per group, its
    connected components (`edges`: dependencies between requests, by index) bundled
    ``group_components[group]`` (default 1) at a time, as Snakemake forms group jobs."""
    subs = [Submission((r.rule,), r.runtime_min, r.cpus, r.gpus, r.nodes)
            for r in requests if not r.local and r.group is None]
    for group, comps in _components(requests, edges).items():
        k = max(1, int((group_components or {}).get(group, 1)))
        for start in range(0, len(comps), k):
            members = [requests[i] for comp in comps[start:start + k] for i in comp]
            subs.append(Submission(tuple(m.rule for m in members), sum(m.runtime_min for m in members),
                                   max(m.cpus for m in members), max(m.gpus for m in members),
                                   max(m.nodes for m in members)))
    return subs


def job_rows(config: Mapping, rule: str, wildcards: Mapping[str, str]) -> int:
    """Sample rows a job of `rule` writes: a shard of `sample_shard` its share of the world's
    n_total (`oracle.workflow.plan.flows.shard_sizes`), a noisy test set (`noisy_test_set`) the
    world's test_size; 0 for every other rule."""
    from oracle.workflow.plan.flows import shard_sizes

    if rule not in ("sample_shard", "noisy_test_set"):
        return 0
    spec = world_specs(config)[wildcards["world"]]
    if rule == "sample_shard":
        return shard_sizes(int(spec["n_total"]), int(spec["n_shards"]))[int(wildcards["shard"])]
    return int(spec["test_size"] or config["splits"]["test_size"])


def _hours(x: float) -> str:
    return f"{x:,.1f}" if x >= 0.1 or x == 0 else f"{x:.2g}"


def _size(n: int) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"


def _gpu_h(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else _hours(x)  # as docs/gpu.md's table rounds them


def resubmissions(wall_h: float, limit_h: float) -> int:
    """Times a job that needs `wall_h` hours is resubmitted when each submission is killed at its
    `limit_h` time limit and resumes where it stopped: ceil(wall / limit) - 1, at least 0."""
    if limit_h <= 0:
        raise ValueError(f"limit_h={limit_h!r}: a time limit must be positive")
    return max(0, math.ceil(round(wall_h / limit_h, 9)) - 1)


def projection_lines(subs: Sequence[Submission], projection: Mapping | None) -> list[str]:
    """The plan's lines on the projection (`projection_for`; None: none for this config) beside the
    GPU-hours requested: the run's projected GPU-hours per GPU type and, for the flow's training job,
    its projected hours against its time limit and the resubmissions that takes."""
    if not sum(s.gpu_hours for s in subs):
        return []
    if projection is None:
        return ["  projected: none for this config (docs/gpu.md projects each preset as shipped; "
                "scripts/tools/gpu_cost_table.py)"]
    (first, h), *rest = projection["gpu_hours"]
    gpu_h = ", ".join([f"{_gpu_h(h)} GPU-hours on {first}", *(f"{_gpu_h(h)} on {name}" for name, h in rest)])
    lines = [f"  projected (docs/gpu.md for presets/{projection['preset']}.yaml: FLOPs at "
             f"{projection['utilisation']:.0%} of peak, not measured): {gpu_h}"]
    flow = projection.get("flow")
    for sub in (s for s in subs if s.rules == ("oracle_train",)):
        if not flow or sub.runtime_min <= 0:
            continue
        limit = sub.runtime_min / 60
        walls = ", ".join(f"{h:,.1f} h on {flow['gpus']} {name}" for name, h in flow["wall_h"])
        again = ", ".join(f"{resubmissions(h, limit)} on {name}" for name, h in flow["wall_h"])
        lines.append(f"  oracle_train: projected {walls} against its {limit:,.1f} h time limit: resubmitted {again} "
                     f"(it resumes from its checkpoint; the profile's retries must cover that)")
    return lines


def plan_summary(requests: Sequence[JobRequest], edges: Iterable[tuple[int, int]] = (), *,
                 group_components: Mapping[str, int] | None = None,
                 row_bytes: int | None = None, missing: Sequence[str] = (),
                 projection: Mapping | None = None) -> list[str]:
    """The lines of the dry run's plan (module docstring): jobs by rule, submissions under a
    cluster executor (local rules run where Snakemake runs), GPU- and CPU-hours requested (each
    submission's time limit x its GPUs or CPUs x nodes: what the scheduler reserves, an upper
    bound on what the run uses) and beside them the projection (`projection_lines`), the longest
    submission, the disk of the sample rows the jobs write (`row_bytes` each; None: not known
    before the data are read) and the missing inputs (`missing`: one line each)."""
    lines = ["", "Plan of this run (dry run):"]
    if not requests:
        return [*lines, "  nothing to do: every output is up to date"]
    stages: dict[str, Counter] = {}
    for r in requests:
        stages.setdefault(r.stage, Counter())[r.rule] += 1
    lines.append(f"  jobs: {len(requests)}, by stage (rules file):")
    width = max(map(len, stages))
    for stage, rules in sorted(stages.items(), key=lambda kv: -sum(kv[1].values())):
        lines.append(f"    {stage:<{width}} {sum(rules.values()):>6}  " + ", ".join(f"{r} {n}" for r, n in rules.most_common()))
    subs = submissions(requests, edges, group_components)
    n_local = sum(r.local for r in requests)
    grouped = sum(len(s.rules) > 1 for s in subs)
    components = ", ".join(f"{g}={k}" for g, k in (group_components or {}).items()) or "none"
    lines.append(f"  as cluster jobs (--profile slurm: sbatch): {len(subs)} submissions, {grouped} of them group jobs "
                 f"(group-components: {components}); {n_local} jobs run where Snakemake runs (local rules)")
    if subs:
        gpu, cpu = sum(s.gpu_hours for s in subs), sum(s.cpu_hours for s in subs)
        longest = max(subs, key=lambda s: s.runtime_min)
        lines.append(f"  requested (time limit x GPUs or CPUs): {_hours(gpu)} GPU-hours, {_hours(cpu)} CPU-hours")
        lines.extend(projection_lines(subs, projection))
        lines.append(f"  longest submission: {longest.name}, time limit {longest.runtime_min:,.0f} min "
                     f"({longest.runtime_min / 60:,.1f} h)")
    rows = Counter()
    for r in requests:
        rows[r.rule] += r.rows
    if not sum(rows.values()):
        lines.append("  disk: no sample files to write")
    elif row_bytes is None:
        lines.append(f"  disk: {sum(rows.values()):,} sample rows; their size is known once the data stage has "
                     f"read the data")
    else:
        parts = ", ".join(f"{rule} {_size(n * row_bytes)}" for rule, n in rows.most_common() if n)
        lines.append(f"  disk: about {_size(sum(rows.values()) * row_bytes)} of sample files ({sum(rows.values()):,} "
                     f"rows of {row_bytes:,} B: {parts}; models, predictions and tables not counted)")
    if missing:
        lines.append(f"  missing inputs ({len(missing)}): the run stops before a job that reads one")
        lines.extend(f"    {m}" for m in missing)
    else:
        lines.append("  missing inputs: none")
    return lines
