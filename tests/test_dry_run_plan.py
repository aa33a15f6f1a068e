"""The dry run's one-screen plan (oracle.workflow.plan.dry_run, printed by rules/common.smk after
Snakemake's own dry-run output): submissions counted as Snakemake forms group jobs, hours as
time limit x GPUs or CPUs, the disk of the sample rows in the shard format, missing inputs.

Fast: the unit cases, and the session's profile dry runs of every config (tests/conftest.py),
whose plan must agree with Snakemake's own job table and group jobs.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import yaml

from oracle.errors import ConfigError
from oracle.experiments import PACKAGES
from oracle.io.shards import ShardWriter
from oracle.workflow.plan import dry_run
from oracle.workflow.plan.disk import row_bytes
from oracle.workflow.plan import resources as res
from oracle.workflow.plan.config import effective_config, fill_defaults, full_schema
from conftest import DAG_CONFIGS, REPO


def _job(rule, group=None, local=False, runtime=10, cpus=1, gpus=0, nodes=1, rows=0):
    return dry_run.JobRequest(rule, "stage", group=group, local=local, runtime_min=runtime, cpus=cpus, gpus=gpus,
                              nodes=nodes, rows=rows)


def test_group_jobs_bundle_connected_components_k_at_a_time():
    """5 classifiers (a training job and 2 prediction jobs each, joined by dependencies) in group
    "g" with group-components g=2: 3 group jobs of 2, 2 and 1 classifiers, each asking for the sum
    of its members' time limits; a job outside any group is one submission; a local one none."""
    jobs, edges = [], []
    for c in range(5):
        t = len(jobs)
        jobs.append(_job("train", "g", runtime=30, gpus=1, cpus=4))
        for _ in range(2):
            edges.append((len(jobs), t))
            jobs.append(_job("predict", "g", runtime=5, gpus=1, cpus=2))
    jobs += [_job("flow", runtime=600, gpus=4, nodes=2, cpus=8), _job("table", local=True, runtime=999)]
    subs = dry_run.submissions(jobs, edges, {"g": 2})
    assert len(subs) == 1 + math.ceil(5 / 2)
    grouped = sorted((s for s in subs if len(s.rules) > 1), key=lambda s: -len(s.rules))
    assert [len(s.rules) for s in grouped] == [6, 6, 3]
    assert [s.runtime_min for s in grouped] == [80, 80, 40] and all(s.cpus == 4 and s.gpus == 1 for s in grouped)
    # hours: time limit x GPUs (or CPUs) x nodes, summed over submissions, by a brute-force loop
    gpu_h = sum(j.runtime_min / 60 * j.gpus * j.nodes for j in jobs if not j.local)
    assert sum(s.gpu_hours for s in subs) == pytest.approx(gpu_h)
    assert sum(s.cpu_hours for s in subs) == pytest.approx(600 / 60 * 8 * 2 + (80 + 80 + 40) / 60 * 4)
    # without group-components every component is its own group job
    assert len(dry_run.submissions(jobs, edges)) == 1 + 5


def test_plan_lines_name_the_longest_job_the_disk_and_the_missing_inputs():
    jobs = [_job("sample_shard", runtime=120, rows=1000), _job("sample_shard", runtime=120, rows=500),
            _job("oracle_train", runtime=2880, gpus=8), _job("claims", local=True)]
    text = "\n".join(dry_run.plan_summary(jobs, row_bytes=360, missing=["image_folder data data/afhq (config key data.root)"]))
    assert "jobs: 4" in text and "3 submissions" in text and "1 jobs run where Snakemake runs" in text
    assert "longest submission: oracle_train, time limit 2,880 min (48.0 h)" in text
    assert f"{8 * 2880 / 60:,.1f} GPU-hours" in text
    assert "about 540.0 kB of sample files (1,500 rows of 360 B" in text
    assert "missing inputs (1)" in text and "data/afhq (config key data.root)" in text
    assert "disk: 1,500 sample rows; their size is known once" in "\n".join(dry_run.plan_summary(jobs))
    assert dry_run.plan_summary([])[-1].endswith("every output is up to date")


def test_resubmissions_count_the_time_limits_a_resumed_job_needs_beyond_its_first():
    assert [dry_run.resubmissions(h, 48.0) for h in (17.6, 48.0, 55.7, 96.0, 96.1, 0.0)] == [0, 0, 1, 1, 2, 0]
    with pytest.raises(ValueError, match="limit_h=0"):
        dry_run.resubmissions(10.0, 0)


#: A projection as `oracle.tools.gpu.cost.projection` writes it (numbers of docs/gpu.md's afhq256).
PROJECTION = {"preset": "afhq256", "utilisation": 0.4, "gpu_hours": [["H100 SXM", 142.9], ["A100 SXM", 452.8]],
              "flow": {"gpus": 8, "wall_h": [["H100 SXM", 17.6], ["A100 SXM", 55.7]]}}


def test_the_plan_puts_the_projection_beside_the_request_and_counts_the_flows_resubmissions():
    """Issue 48 item 9: the GPU-hours projected for the preset beside those requested, and the
    flow's projected hours against its time limit: one resubmission on A100s at 55.7 h vs 48 h."""
    jobs = [_job("oracle_train", runtime=2880, gpus=8), _job("sample_shard", runtime=240, gpus=1)]
    lines = dry_run.plan_summary(jobs, projection=PROJECTION)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  requested"))
    assert f"{(8 * 2880 + 240) / 60:,.1f} GPU-hours" in lines[at]
    assert lines[at + 1] == ("  projected (docs/gpu.md for presets/afhq256.yaml: FLOPs at 40% of peak, not measured): "
                             "143 GPU-hours on H100 SXM, 453 on A100 SXM")
    assert lines[at + 2].startswith("  oracle_train: projected 17.6 h on 8 H100 SXM, 55.7 h on 8 A100 SXM against its "
                                    "48.0 h time limit: resubmitted 0 on H100 SXM, 1 on A100 SXM")
    # a 72 h limit holds the A100 projection in one submission
    longer = dry_run.plan_summary([_job("oracle_train", runtime=72 * 60, gpus=8)], projection=PROJECTION)
    assert any("resubmitted 0 on H100 SXM, 0 on A100 SXM" in ln for ln in longer)
    # no projection for this config: said so where GPUs are requested; a CPU-only plan says nothing
    assert any(ln.startswith("  projected: none for this config") for ln in dry_run.plan_summary(jobs))
    assert not any("projected" in ln for ln in dry_run.plan_summary([_job("data", runtime=60, cpus=4)]))
    # the flow already trained: the projection stays, its resubmission line goes
    assert not any("oracle_train:" in ln for ln in dry_run.plan_summary(jobs[1:], projection=PROJECTION))


def test_a_projection_is_found_by_the_configs_fingerprint(tmp_path):
    cfg = _config(REPO / "presets" / "afhq256.yaml")
    path = tmp_path / "projection.json"
    assert dry_run.projection_for(cfg, path) is None  # no file: no projection
    entry = {k: v for k, v in PROJECTION.items() if k != "preset"}
    path.write_text(json.dumps({"presets": {"mine": {**entry, "config_sha256": dry_run.config_fingerprint(cfg)}}}))
    key = dry_run.config_fingerprint(cfg)
    assert dry_run.projection_for(cfg, path) == {**entry, "config_sha256": key, "preset": "mine"}
    changed = {**cfg, "resources": {**cfg["resources"], "oracle": {**cfg["resources"]["oracle"], "runtime": 4320}}}
    assert dry_run.projection_for(changed, path) is None  # another config: not the preset's projection
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"projection\.json'.*unreadable GPU projection"):
        dry_run.projection_for(cfg, path)


@pytest.mark.parametrize("preset", ["afhq256", "imagenet64", "imagenet128"])
def test_the_shipped_projection_is_each_presets_and_docs_gpu_mds(preset):
    """The projection file holds each preset as shipped (a preset changed without rerunning
    scripts/tools/gpu_cost_table.py fails here, in a second, not only in its slow --check) and the
    totals docs/gpu.md's table prints."""
    found = dry_run.projection_for(effective_config(REPO / "presets" / f"{preset}.yaml"))
    assert found is not None and found["preset"] == preset
    doc = (REPO / "docs" / "gpu.md").read_text()
    totals = " | ".join(f"**{h:,.0f}**" if h >= 100 else f"**{h:,.1f}**" for _, h in found["gpu_hours"])
    row = f"| **{preset}** | **total** |"
    assert row in doc and f"| {totals} |" in doc.split(row)[1].splitlines()[0]


def _config(path):
    cfg = yaml.safe_load((path or REPO / "config.yaml").read_text())
    fill_defaults(cfg, full_schema(REPO / "config.schema.yaml"))
    return cfg


def test_row_bytes_is_the_shard_formats_bytes_per_row(tmp_path):
    """The bytes per row of `oracle.workflow.plan.disk.row_bytes` are those of a shard written by the real writer: the
    datasets' bytes over rows (the file adds HDF5's own overhead beside them)."""
    import h5py

    cfg = _config(None)  # digits: 1 x 8 x 8, K = 10
    k, shape, n = 10, (1, 8, 8), 50
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.1] * k, "label_temperature": 1.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(tmp_path / "s.h5", k, shape, attrs) as w:
        w.write(np.zeros((n, *shape), np.float32), np.zeros(n, np.int64), np.zeros(n, np.int64),
                np.zeros((n, k)), np.arange(n))
    with h5py.File(tmp_path / "s.h5") as f:
        data_bytes = sum(f[name].dtype.itemsize * int(np.prod(f[name].shape)) for name in f
                         if isinstance(f[name], h5py.Dataset) and f[name].shape and f[name].shape[0] == n)
    assert row_bytes(cfg) * n == data_bytes
    # a preset whose data decide K: AFHQ's 3 classes at 256 px; an npz's shape is unknown until read
    afhq = _config(REPO / "presets" / "afhq256.yaml")
    assert row_bytes(afhq) == 3 * 256 * 256 * 4 + 3 * 8 + 3 * 8
    npz = {**afhq, "run": "mine", "data": {**afhq["data"], "kind": "npz", "image_size": None}}
    assert row_bytes(npz) is None
    # K unknown before the data are read: counted as 2, a lower bound
    assert row_bytes({**npz, "data": {**npz["data"], "image_size": 16}}) == 3 * 16 * 16 * 4 + 2 * 8 + 3 * 8


@pytest.mark.parametrize("name", list(DAG_CONFIGS))
def test_every_dry_run_ends_with_a_plan_that_agrees_with_snakemake(name, dag_dry_run):
    """The plan comes last; its job count is Snakemake's; its submissions are the jobs Snakemake
    would submit (every job minus the local rules, with each printed group job counted once);
    its disk is the rows of the shards and noisy test sets to write, in the shard format."""
    dry = dag_dry_run(name)
    plan = dry.out[dry.out.rindex("Plan of this run (dry run):"):]
    assert dry.out.rstrip().endswith(plan.rstrip()) and plan.count("\n") < 30, plan
    counts = dry.job_counts()
    assert f"jobs: {sum(counts.values())}," in plan
    cfg = _config(DAG_CONFIGS[name])
    local = set(res.local_rules(dry.config, PACKAGES))
    group_jobs = len(re.findall(r"Group job \w+ \(", dry.out))
    grouped = sum(counts.get(r, 0) for r in ("train_classifier", "predict_classifier"))
    alone = sum(n for r, n in counts.items() if r not in local) - grouped
    assert f"{alone + group_jobs} submissions, {group_jobs} of them group jobs" in plan
    rows = sum(int(s) for s in re.findall(r"(\d+) rows of", plan.replace(",", "")))
    if counts.get("sample_shard"):
        from oracle.world_specs import world_specs

        worlds = world_specs(cfg)
        noisy_worlds = re.findall(r"rule noisy_test_set:\n(?:\s+\w+: .*\n)*?\s+wildcards: world=([^,\s]+)", dry.out)
        assert len(noisy_worlds) == counts.get("noisy_test_set", 0)
        expected = sum(int(w["n_total"]) for w in worlds.values()) + sum(
            int(worlds[w]["test_size"] or cfg["splits"]["test_size"]) for w in noisy_worlds)
        assert rows == expected, plan
    if name == "afhq256":
        assert "missing inputs (" in plan and "(config key data.root)" in plan
        # Snakemake's config is the preset's as the projection tool read it: the projection is found
        assert "  projected (docs/gpu.md for presets/afhq256.yaml" in plan and "1 on A100 SXM" in plan, plan
    if name == "default":
        assert "missing inputs: none" in plan
