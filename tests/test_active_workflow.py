"""The `active` kind through the workflow (tests/smoke/active.yaml, the analytic Gaussian world):
one job per (arch, strategy, seed), their rounds against the world's splits file (initial set,
pool and test set), the collected data, the artifacts with provenance, and the numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "smoke" / "active.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CFG = yaml.safe_load(SMOKE.read_text())
SPEC = CFG["experiments"]["active"]


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2",
                           "--configfile", str(SMOKE), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("active")
    proc = snakemake(work)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work / "results" / CFG["run"]


def rounds_files(run: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for strategy in SPEC["strategies"]:
        for seed in SPEC["seeds"]:
            folder = run / "active" / "active" / "runs" / "test_resnet" / strategy / f"seed{seed}"
            assert not (folder / "resume").exists()  # resume state is removed once the run is done
            assert (folder / "rounds.json.prov.json").exists()
            out[(strategy, seed)] = json.loads((folder / "rounds.json").read_text())
    return out


@pytest.mark.slow
def test_every_run_labels_from_its_pool_and_never_from_the_test_set(run):
    with h5py.File(run / "splits" / "base.h5", "r") as f:
        test = set(f["test"][()].tolist())
        orders = {s: f["order"][f"seed{s}"][()] for s in SPEC["seeds"]}
    labels = [SPEC["initial_size"] + r * SPEC["batch"] for r in range(SPEC["rounds"] + 1)]
    first_round = {}
    for (strategy, seed), blob in rounds_files(run).items():
        rounds = blob["rounds"]
        assert blob["strategy"] == strategy and [r["labelled"] for r in rounds] == labels
        initial = set(orders[seed][: SPEC["initial_size"]].tolist())
        pool = set(orders[seed][SPEC["initial_size"]: SPEC["initial_size"] + SPEC["pool_size"]].tolist())
        picked = [v for r in rounds for v in r["selected"]]
        assert len(picked) == len(set(picked)) == SPEC["rounds"] * SPEC["batch"]
        assert set(picked) <= pool and not set(picked) & (test | initial)
        assert rounds[-1]["selected"] == [] and all(0 <= r["acc"] <= 1 for r in rounds)
        first_round[strategy] = (rounds[0]["acc"], rounds[0]["epistemic"])
    assert len(set(first_round.values())) == 1  # round 0: the same model for every strategy


@pytest.mark.slow
def test_data_artifacts_and_numbers(run):
    files = rounds_files(run)
    rounds = pd.read_csv(run / "active" / "active" / "data" / "rounds.csv")
    corr = pd.read_csv(run / "active" / "active" / "data" / "correlations.csv")
    assert len(rounds) == len(files) * (SPEC["rounds"] + 1)
    assert len(corr) == len(files) * SPEC["rounds"] * 3 * 2  # three scored strategies, two exact parts
    row = rounds[(rounds["strategy"] == "bald") & (rounds["round"] == 1)].iloc[0]
    assert row["acc"] == files[("bald", 0)]["rounds"][1]["acc"]
    for stem in ("tables/rounds.csv", "figures/acquisition_panels.png", "figures/proxy_correlations.png"):
        path = run / "active" / "active" / stem
        assert path.stat().st_size > 0 and Path(f"{path}.prov.json").exists(), stem
    numbers = json.loads((run / "numbers.json").read_text())
    for key in ("gain_ratio_of_means.test_resnet", "target_accuracy.test_resnet", "labels_final",
                "final_accuracy.test_resnet.max_epistemic", "spearman_aleatoric.test_resnet.max_entropy"):
        entry = numbers[f"active.{key}"]
        assert (run.parents[1] / entry["artifact"]).exists(), key
    assert numbers["active.labels_final"]["value"] == SPEC["initial_size"] + SPEC["rounds"] * SPEC["batch"]
    # one classifier per round of every run, each counted once
    assert numbers["active.converged.test_resnet"]["of"] == len(rounds)
    assert numbers["active.converged.test_resnet"]["value"] == int(rounds["converged"].astype(bool).sum())
    acc = rounds[rounds["round"] == SPEC["rounds"]].set_index("strategy")["acc"]
    assert numbers["active.final_accuracy.test_resnet.random"]["value"] == pytest.approx(acc["random"], rel=1e-12)
    assert "\\paperFigEight" in (run / "numbers.tex").read_text()


@pytest.mark.slow
def test_rerun_is_a_no_op(run):
    proc = snakemake(run.parents[1], "-n")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr
