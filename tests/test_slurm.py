"""The workflow on a real scheduler: `--profile slurm` against a one-node SLURM.

`test_profile_bundles_classifiers` (fast, no SLURM needed) dry-runs the smoke config through the
profile: the profile parses, and its `group-components` bundles the classifier jobs.

`test_smoke_through_slurm_equals_local_run` (slow) starts SLURM with scripts/ci/start_slurm.sh
(no accounting database, as on many small clusters), runs the smoke config through
`--profile slurm` and, at the same time, without a profile; then checks that every non-local job
went through sbatch and completed, that the classifier jobs were bundled into group jobs, that
the sbatch requests carry the config's `resources:` numbers, and that every number of the two
runs is identical (CPU runs are deterministic).

It skips, naming the reason, when SLURM cannot be started here (not installed, not root, a
foreign slurm.conf, a daemon that fails). Set ORACLE_REQUIRE_SLURM=1 (CI does, once
scripts/ci/install_slurm.sh succeeded) to turn those skips into failures.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np
import pytest
import yaml

from oracle.workflow import plan
from oracle.workflow.plan import resources as res

REPO = Path(__file__).resolve().parents[1]
CI = REPO / "scripts" / "ci"
PROFILE = REPO / "slurm" / "config.yaml"
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
SLURM_CONF = Path("/etc/slurm/slurm.conf")
CONF_MARK = "# written by scripts/ci/start_slurm.sh"
# Keys whose values differ between any two runs (wall-clock measurements).
VOLATILE = re.compile(
    r"(?:^|_)(?:seconds|secs|time|wall|elapsed|duration|date|started|finished|host(?:name)?)"
    r"(?:_|s?$)"
)
RUN_TIMEOUT_S = 900  # the smoke run alongside a local one on 2 cores: ~5 min idle, twice that under load


def _profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def _group_size(group: str) -> int:
    """K of `group-components: [group=K]` in the profile (1 = no bundling)."""
    for item in _profile().get("group-components", []):
        name, _, k = str(item).partition("=")
        if name.strip() == group:
            return int(k)
    return 1


def _smoke_config() -> dict:
    return yaml.safe_load(SMOKE.read_text())


# ----------------------------------------------------------------------------- fast: dry run


def _profile_dry_run(configfile: Path, workdir: Path) -> str:
    """`snakemake --profile slurm --dry-run` of `configfile` in `workdir`; its whole output."""
    proc = subprocess.run(
        [*SNAKEMAKE, "--cores", "all", "--profile", "slurm", "--configfile", str(configfile),
         "--directory", str(workdir), "--dry-run"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_profile_bundles_classifiers(tmp_path: Path) -> None:
    """The profile parses and bundles the smoke run's classifiers (a training job and its
    prediction jobs each) into ceil(n/K) groups."""
    out = _profile_dry_run(SMOKE, tmp_path)
    n_classifier = len(re.findall(r"^\s*rule train_classifier:", out, re.M))
    n_groups = len(re.findall(r"Group job classifiers\b", out))
    k = _group_size("classifiers")
    assert n_classifier >= 2, "the smoke config should train several classifiers"
    assert k > 1, "the profile should bundle classifier jobs (group-components classifiers=K)"
    assert n_groups == math.ceil(n_classifier / k), (n_classifier, n_groups, k)


@pytest.mark.parametrize("preset", sorted((REPO / "presets").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_preset_dry_runs_with_the_profile(preset: Path, tmp_path: Path, place_pretrained) -> None:
    """Each paper preset builds its whole DAG through the SLURM profile without data present,
    and its classifier jobs are bundled into group jobs."""
    cfg = yaml.safe_load(preset.read_text())
    place_pretrained(cfg, tmp_path)  # local weights are checked when the config is read
    out = _profile_dry_run(preset, tmp_path)
    groups = [res.classifier_group(cfg, plan.training_spec(cfg, r["experiment"], r["cell"])["n"])
              for r in plan.classifier_runs(cfg)]
    n_small, n_large = groups.count(res.CLASSIFIER_GROUP), groups.count(res.LARGE_CLASSIFIER_GROUP)
    assert len(re.findall(r"^\s*rule train_classifier:", out, re.M)) == n_small + n_large > 0
    # small-N jobs bundled K per SLURM job; large-N jobs (bundle_max_n) one SLURM job each
    assert len(re.findall(r"Group job classifiers\b", out)) == math.ceil(n_small / _group_size("classifiers"))
    assert len(re.findall(r"Group job classifiers_large\b", out)) == n_large
    assert not (tmp_path / "results").exists()


# ----------------------------------------------------------------------------- SLURM fixture


def _require() -> bool:
    return os.environ.get("ORACLE_REQUIRE_SLURM", "") == "1"


def _unavailable(reason: str) -> None:
    if _require():
        pytest.fail(f"SLURM required (ORACLE_REQUIRE_SLURM=1) but unavailable: {reason}")
    pytest.skip(f"SLURM unavailable: {reason}")


def _ours_running() -> bool:
    """A cluster from start_slurm.sh is up and its node answers."""
    if not (SLURM_CONF.is_file() and CONF_MARK in SLURM_CONF.read_text()):
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(s.strip() in ("idle", "mix", "alloc") for s in out.splitlines())


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[None]:
    """The one-node cluster of scripts/ci: reused if already up, else started and stopped."""
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol")
               if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if missing:
        _unavailable(f"not installed ({', '.join(missing)} missing); "
                     "run scripts/ci/install_slurm.sh")
    if _ours_running():
        yield
        return
    if SLURM_CONF.is_file() and CONF_MARK not in SLURM_CONF.read_text():
        _unavailable(f"{SLURM_CONF} was not written by scripts/ci/start_slurm.sh; "
                     "this test only runs on its own one-node cluster")
    if os.geteuid() != 0:
        _unavailable("starting slurmctld/slurmd needs root (scripts/ci/start_slurm.sh)")
    proc = subprocess.run([str(CI / "start_slurm.sh")], capture_output=True, text=True,
                          timeout=180)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if "FAILED" in ln] or \
            (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1:]
        # daemons that did start must not outlive the test
        subprocess.run([str(CI / "stop_slurm.sh")], capture_output=True, text=True, timeout=120)
        _unavailable(f"scripts/ci/start_slurm.sh exited {proc.returncode}: {lines[0]}")
    try:
        yield
    finally:
        subprocess.run([str(CI / "stop_slurm.sh")], capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- helpers


def _start(args: list[str], log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(args, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _finish(proc: subprocess.Popen, log: Path, what: str) -> str:
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish in {RUN_TIMEOUT_S} s; log tail:\n"
                    + log.read_text()[-4000:])
    text = log.read_text()
    assert proc.returncode == 0, f"{what} exited {proc.returncode}; log tail:\n{text[-4000:]}"
    return text


def _run_id(log_text: str) -> str | None:
    found = re.search(r"SLURM run ID: (\S+)", log_text)
    return found.group(1) if found else None


def _cancel_run(log: Path) -> None:
    """scancel what is left of the run in `log` (its jobs share the run id as job name)."""
    run_id = _run_id(log.read_text()) if log.is_file() else None
    if run_id:
        subprocess.run(["scancel", "--name", run_id], capture_output=True, timeout=30)


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


def _scontrol(jobid: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-o", "show", "job", jobid], capture_output=True,
                         text=True, timeout=30).stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


def _minutes(limit: str) -> int:
    """SLURM time limit `[D-]HH:MM:SS` in minutes."""
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + math.ceil(s / 60)


def _slurm_jobs(workdir: Path) -> dict[str, str]:
    """SLURM job id -> the plugin's log folder (rule_<rule> or group_<group>_<rules>)."""
    jobs = {}
    for log in (workdir / ".snakemake" / "slurm_logs").rglob("*.log"):
        top = log.relative_to(workdir / ".snakemake" / "slurm_logs").parts[0]
        jobs[log.stem] = top
    return jobs


# ----------------------------------------------------------------------------- slow: the run


@pytest.mark.slow
def test_smoke_through_slurm_equals_local_run(slurm_cluster: None, tmp_path: Path) -> None:
    local_dir, slurm_dir = tmp_path / "local", tmp_path / "slurm"
    local_dir.mkdir()
    slurm_dir.mkdir()
    common = ["--cores", "all", "--configfile", str(SMOKE)]
    procs: list[subprocess.Popen] = []
    try:
        # The two runs overlap: the SLURM one spends most of its time waiting on the scheduler.
        local = _start([*SNAKEMAKE, *common, "--directory", str(local_dir)],
                       tmp_path / "local.log")
        procs.append(local)
        slurm = _start(
            [*SNAKEMAKE, *common, "--profile", "slurm", "--directory", str(slurm_dir),
             # quicker polling than a shared cluster wants, and no retries to hide a failure
             "--slurm-init-seconds-before-status-checks", "2",
             "--seconds-between-status-checks", "2", "--retries", "0",
             "--slurm-keep-successful-logs"],
            tmp_path / "slurm.log",
        )
        procs.append(slurm)
        slurm_log = _finish(slurm, tmp_path / "slurm.log", "snakemake --profile slurm")
        local_log = _finish(local, tmp_path / "local.log", "local snakemake")
    finally:
        for proc in procs:  # only the sessions started above
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        _cancel_run(tmp_path / "slurm.log")

    # -- every job that is not a localrule went through sbatch and completed
    run_id = _run_id(slurm_log)
    assert run_id, "no 'SLURM run ID' in the log: did the slurm executor run?"
    queue = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--name", run_id, "--format=%i|%T"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    states = dict(line.split("|") for line in queue.split())
    jobs = _slurm_jobs(slurm_dir)
    assert states and set(states) == set(jobs), (states, jobs)
    assert set(states.values()) == {"COMPLETED"}, states

    submitted = re.findall(r"^\s*rule (\w+):", slurm_log, re.M)
    ran_locally = set(re.findall(r"^\s*localrule (\w+):", slurm_log, re.M))
    all_rules = set(re.findall(r"^\s*localrule (\w+):", local_log, re.M))
    assert all_rules == set(submitted) | ran_locally, (all_rules, submitted, ran_locally)
    assert "oracle_train" in submitted and "train_classifier" in submitted and "predict_classifier" in submitted

    # -- classifiers were bundled (training and prediction together): ceil(n / K) group
    # submissions instead of one per job
    n_classifier = submitted.count("train_classifier")
    n_jobs = n_classifier + submitted.count("predict_classifier")
    groups = [j for j, top in jobs.items() if top.startswith("group_classifiers")]
    assert len(groups) == math.ceil(n_classifier / _group_size("classifiers")) < n_classifier
    assert not any(top in ("rule_train_classifier", "rule_predict_classifier") for top in jobs.values())
    for top in {t for t in jobs.values() if not t.startswith("group_classifiers")}:
        assert top.removeprefix("rule_") in submitted, top

    # -- the sbatch requests carry the config's resources (single jobs) and the group's sum
    resources = _smoke_config()["resources"]
    oracle = [j for j, top in jobs.items() if top == "rule_oracle_train"]
    assert len(oracle) == 1
    info = _scontrol(oracle[0])
    assert _minutes(info["TimeLimit"]) == resources["oracle"]["runtime"], info["TimeLimit"]
    assert info["MinMemoryNode"] == f"{resources['oracle']['mem_mb']}M", info["MinMemoryNode"]
    assert int(info["CPUs/Task"]) == resources["oracle"]["cpus"], info["CPUs/Task"]
    # members run one after another inside a group job: time adds up, memory and CPUs do not
    if len(groups) == 1:
        info = _scontrol(groups[0])
        runtime = resources["classifiers"]["runtime"]
        assert _minutes(info["TimeLimit"]) == n_classifier * runtime + (n_jobs - n_classifier) * min(runtime, 5)
        assert info["MinMemoryNode"] == f"{resources['classifiers']['mem_mb']}M"
        assert int(info["CPUs/Task"]) == resources["classifiers"]["cpus"]

    # -- identical numbers: every JSON (classifier metrics, numbers.json, ...) ...
    local_res = local_dir / "results" / _smoke_config()["run"]
    slurm_res = slurm_dir / "results" / _smoke_config()["run"]
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
