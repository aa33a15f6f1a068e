"""The workflow on a real scheduler: `--profile slurm` against a one-node SLURM.

`test_profile_bundles_classifiers` and `test_every_preset_dry_runs_with_the_profile` (fast, no
SLURM needed) read the session's dry runs through the profile (tests/conftest.py): the profile
parses, and its `group-components` bundles the classifier jobs.

`test_smoke_through_slurm_equals_local_run` (slow) starts SLURM with scripts/ci/start_slurm.sh
(no accounting database, as on many small clusters) and runs the session's smoke config
(tests/smoke_session.py: validation on, a second world, `bundle_max_n` between the two sizes)
through `--profile slurm`; the session's local run of the same config is the other half. It
checks that every non-local job went through sbatch and completed (flow training, shards,
validation, classifiers among them), that the cheap analysis rules ran where Snakemake ran and
none went through sbatch, that scripts/ci/slurm_job_count.sh predicted the submissions, that the
small classifiers were bundled and the large ones submitted one group job each, that the sbatch
requests carry the config's `resources:` numbers, and that every number of the two runs is
identical (CPU runs are deterministic).

It skips, naming the reason, when SLURM cannot be started here (not installed, not root, a
foreign slurm.conf, a daemon that fails). Set ORACLE_REQUIRE_SLURM=1 (CI does, once
scripts/ci/install_slurm.sh succeeded) to turn those skips into failures.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np
import pytest
import yaml
from smoke_session import minutes

from oracle.experiments import PACKAGES
from oracle.workflow import plan
from oracle.workflow.plan import resources as res

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "slurm" / "config.yaml"
# Keys whose values differ between any two runs (wall-clock measurements).
VOLATILE = re.compile(
    r"(?:^|_)(?:seconds|secs|time|timings|wall|elapsed|duration|date|started|finished|host(?:name)?)"
    r"(?:_|s?$)"
)


def _profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def _group_size(group: str) -> int:
    """K of `group-components: [group=K]` in the profile (1 = no bundling)."""
    for item in _profile().get("group-components", []):
        name, _, k = str(item).partition("=")
        if name.strip() == group:
            return int(k)
    return 1


# ----------------------------------------------------------------------------- fast: dry run


def test_profile_bundles_classifiers(dag_dry_run) -> None:
    """The profile parses and bundles the smoke run's classifiers (a training job and its
    prediction jobs each) into ceil(n/K) groups (the session's profile dry run of the smoke
    config, tests/conftest.py)."""
    out = dag_dry_run("smoke/config").out
    n_classifier = len(re.findall(r"^\s*rule train_classifier:", out, re.M))
    n_groups = len(re.findall(r"Group job classifiers\b", out))
    k = _group_size("classifiers")
    assert n_classifier >= 2, "the smoke config should train several classifiers"
    assert k > 1, "the profile should bundle classifier jobs (group-components classifiers=K)"
    assert n_groups == math.ceil(n_classifier / k), (n_classifier, n_groups, k)


@pytest.mark.parametrize("preset", sorted((REPO / "presets").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_preset_dry_runs_with_the_profile(preset: Path, dag_dry_run) -> None:
    """Each paper preset builds its whole DAG through the SLURM profile without data present,
    and its classifier jobs are bundled into group jobs (the session's profile dry run of the
    preset, tests/conftest.py, with the preset's random pretrained weights in place)."""
    cfg = yaml.safe_load(preset.read_text())
    dry = dag_dry_run(preset.stem)
    assert dry.config == cfg
    out = dry.out
    # one job per model (two experiments asking for the same model share it: plan.model_of)
    runs = [m["runs"][0] for m in plan.classifier_models(cfg).values()]
    groups = [res.classifier_group(cfg, plan.training_spec(cfg, r["experiment"], r["cell"])["n"]) for r in runs]
    n_small, n_large = groups.count(res.CLASSIFIER_GROUP), groups.count(res.LARGE_CLASSIFIER_GROUP)
    assert len(re.findall(r"^\s*rule train_classifier:", out, re.M)) == n_small + n_large > 0
    # small-N jobs bundled K per SLURM job; large-N jobs (bundle_max_n) one SLURM job each
    assert len(re.findall(r"Group job classifiers\b", out)) == math.ceil(n_small / _group_size("classifiers"))
    assert len(re.findall(r"Group job classifiers_large\b", out)) == n_large
    assert not (dry.workdir / "results").exists()


@pytest.mark.parametrize("name", ["default", *(p.stem for p in sorted((REPO / "presets").glob("*.yaml")))])
def test_cheap_analysis_rules_run_where_snakemake_runs(name, dag_dry_run) -> None:
    """Under the profile the tables, figures, numbers, claims and collect jobs are local rules
    (resources.analysis.local, default true), every one of them a rule of the workflow; the
    rules that read the samples (world_constants) or train are not. With the switch off there
    are none (tests/test_slurm.py's run through SLURM checks where they really ran)."""
    dry = dag_dry_run(name)
    cfg = dry.config
    local = res.local_analysis_rules(cfg, PACKAGES)
    assert "local" not in cfg["resources"]["analysis"] and set(res.ANALYSIS_RULES) < set(local)
    assert not {"world_constants", "validation_metrics", "train_classifier", "sample_shard"} & set(local)
    # Snakemake warns, and the list is stale, when a name is not a rule of the Snakefile
    assert "localrules directive specifies rules that are not present" not in dry.out
    counts = dry.job_counts()
    if name == "default":  # every kind and the validation: each rule of the list has jobs
        assert set(local) <= set(counts), set(local) - set(counts)
    on_the_host = sum(counts.get(r, 0) for r in local)
    assert on_the_host >= sum(counts[r] for r in ("experiment_table", "experiment_figure", "numbers", "claims")) > 0
    off = copy.deepcopy(cfg)
    off["resources"]["analysis"]["local"] = False
    assert res.local_analysis_rules(off, PACKAGES) == []


# ----------------------------------------------------------------------------- slow: the run


def _numbers(obj: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """Every numeric leaf of a JSON document as (path, value), wall-clock keys left out."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not VOLATILE.search(str(key)):
                yield from _numbers(value, f"{path}/{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _numbers(value, f"{path}/{i}")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, obj


def _classifier_limits(cfg: dict) -> dict[str, list[int]]:
    """group -> the time limit (minutes) of each classifier of that group: its training job's
    runtime plus one prediction job's per evaluation set."""
    n_max = plan.largest_training_size(cfg)
    out: dict[str, list[int]] = {}
    for run in plan.classifier_runs(cfg):
        n = plan.training_spec(cfg, run["experiment"], run["cell"])["n"]
        minutes_ = res.classifier_runtime(cfg, n, n_max) + \
            len(plan.evaluation_sets(cfg, run["experiment"])) * res.prediction_runtime(cfg)
        out.setdefault(res.classifier_group(cfg, n), []).append(minutes_)
    return out


@pytest.mark.slow
def test_smoke_through_slurm_equals_local_run(smoke_run, smoke_slurm_run) -> None:
    cfg = smoke_slurm_run.config
    assert cfg == smoke_run.config
    slurm_log, local_log = smoke_slurm_run.log, smoke_run.log

    # -- every job that is not a localrule went through sbatch and completed
    assert smoke_slurm_run.run_id, "no 'SLURM run ID' in the log: did the slurm executor run?"
    states, jobs = smoke_slurm_run.states, smoke_slurm_run.jobs
    assert states and set(states) == set(jobs), (states, jobs)
    assert set(states.values()) == {"COMPLETED"}, states

    submitted = re.findall(r"^\s*rule (\w+):", slurm_log, re.M)
    ran_locally = set(re.findall(r"^\s*localrule (\w+):", slurm_log, re.M))
    all_rules = set(re.findall(r"^\s*localrule (\w+):", local_log, re.M))
    assert all_rules == set(submitted) | ran_locally, (all_rules, submitted, ran_locally)
    # the work went through sbatch: flow training, the shards, the validation and the classifiers
    assert {"oracle_train", "sample_shard", "validation_metrics", "train_classifier", "predict_classifier"} <= \
        set(submitted), submitted

    # -- the cheap analysis rules ran where Snakemake ran (resources.analysis.local, on by default)
    analysis = set(res.local_analysis_rules(cfg, PACKAGES)) & all_rules
    assert {"experiment_table", "experiment_figure", "experiment_numbers", "scaling_collect", "world_numbers",
            "numbers", "claims", "validation_table", "validation_nn_distances", "validation_numbers"} <= analysis
    assert analysis <= ran_locally and not analysis & set(submitted), (analysis, submitted)
    # ... and scripts/ci/slurm_job_count.sh, which the SLURM tables are made of, counted the submissions
    count = subprocess.run(["bash", str(REPO / "scripts/ci/slurm_job_count.sh"), str(smoke_slurm_run.configfile)],
                           cwd=REPO, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "SNAKEMAKE": str(Path(sys.executable).with_name("snakemake")),
                                "PYTHON": sys.executable})
    assert count.returncode == 0, count.stderr[-3000:]
    assert f" sbatch_submissions={len(states)} " in count.stdout, (count.stdout, len(states))

    # -- classifiers were bundled (training and prediction together): the small-N ones ceil(n / K)
    # per group submission instead of one per job, the large-N ones (resources.classifiers.
    # bundle_max_n) one group job each
    limits = _classifier_limits(cfg)
    n_small, n_large = len(limits[res.CLASSIFIER_GROUP]), len(limits[res.LARGE_CLASSIFIER_GROUP])
    assert submitted.count("train_classifier") == n_small + n_large
    small = [j for j, top in jobs.items() if top.startswith(f"group_{res.CLASSIFIER_GROUP}_")
             and not top.startswith(f"group_{res.LARGE_CLASSIFIER_GROUP}_")]
    large = [j for j, top in jobs.items() if top.startswith(f"group_{res.LARGE_CLASSIFIER_GROUP}_")]
    assert len(small) == math.ceil(n_small / _group_size("classifiers")) < n_small, (small, n_small)
    assert len(large) == n_large > 0, (large, n_large)
    assert not any(top in ("rule_train_classifier", "rule_predict_classifier") for top in jobs.values())
    for top in {t for t in jobs.values() if not t.startswith("group_classifiers")}:
        assert top.removeprefix("rule_") in submitted, top

    # -- the sbatch requests carry the config's resources (single jobs) and the group's sum
    resources = cfg["resources"]
    oracle = [j for j, top in jobs.items() if top == "rule_oracle_train"]
    assert len(oracle) == 1
    info = smoke_slurm_run.requests[oracle[0]]
    assert minutes(info["TimeLimit"]) == resources["oracle"]["runtime"], info["TimeLimit"]
    assert info["MinMemoryNode"] == f"{resources['oracle']['mem_mb']}M", info["MinMemoryNode"]
    assert int(info["CPUs/Task"]) == resources["oracle"]["cpus"], info["CPUs/Task"]
    # members run one after another inside a group job: time adds up, memory and CPUs do not
    requests = smoke_slurm_run.requests
    assert submitted.count("predict_classifier") == len(plan.prediction_jobs(cfg))
    if len(small) == 1:
        assert minutes(requests[small[0]]["TimeLimit"]) == sum(limits[res.CLASSIFIER_GROUP])
    assert sorted(minutes(requests[j]["TimeLimit"]) for j in large) == sorted(limits[res.LARGE_CLASSIFIER_GROUP])
    for j in small + large:
        assert requests[j]["MinMemoryNode"] == f"{resources['classifiers']['mem_mb']}M"
        assert int(requests[j]["CPUs/Task"]) == resources["classifiers"]["cpus"]

    # -- identical numbers: every JSON (classifier metrics, numbers.json, ...) ...
    local_res, slurm_res = smoke_run.results, smoke_slurm_run.results
    # (.usage.json: the local job server's measure of a job, beside its log; SLURM runs jobs inline)
    jsons = sorted(p.relative_to(local_res) for p in local_res.rglob("*.json")
                   if not p.name.endswith((".prov.json", ".usage.json")))
    assert any(p.parent.name == "metrics" for p in jsons) and Path("numbers.json") in jsons
    for rel in jsons:
        a = dict(_numbers(json.loads((local_res / rel).read_text())))
        b = dict(_numbers(json.loads((slurm_res / rel).read_text())))
        assert a.keys() == b.keys(), rel
        diff = {k: (a[k], b[k]) for k in a if a[k] != b[k]
                and not (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k]))}
        assert not diff, f"{rel}: local vs SLURM differ at {diff}"
    # every HDF5 dataset: images, shard log-likelihoods, splits, classifier predictions
    h5s = sorted(p.relative_to(local_res) for p in local_res.rglob("*.h5"))
    assert any(p.match("samples/*/shard-*.h5") for p in h5s)
    assert any(p.parent.name == "predictions" for p in h5s)
    for rel in h5s:
        with h5py.File(local_res / rel, "r") as fa, h5py.File(slurm_res / rel, "r") as fb:
            names: list[str] = []
            fa.visititems(lambda name, obj: names.append(name)
                          if isinstance(obj, h5py.Dataset) else None)
            assert names, rel
            for name in names:
                a, b = fa[name][()], fb[name][()]
                same = (np.array_equal(a, b, equal_nan=True) if np.asarray(a).dtype.kind in "fc"
                        else np.array_equal(a, b))
                assert same, f"{rel}:{name} differs between the local and the SLURM run"
