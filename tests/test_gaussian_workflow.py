"""The analytic Gaussian world through the workflow (DESIGN rule 7): config, DAG and one run.

`oracle.world: gaussian` replaces the flow by two (or K) isotropic Gaussian classes whose Bayes
error has a closed form; everything after the oracle stage is the flow's code path. The run
below is checked against computations that do not use `oracle`: scipy's multivariate normal
density, scipy's normal CDF, numpy's softmax and KL.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml
from scipy import stats
from scipy.special import log_softmax

from oracle.workflow.plan import config as oc
from oracle.workflow import plan
from oracle.workflow.plan.paths import world_file
from oracle.errors import ConfigError
from smoke_session import model_dir

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config.schema.yaml"
SMOKE = REPO / "tests" / "smoke" / "gaussian.yaml"
PRESET = REPO / "presets" / "gaussian2.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def snakemake(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize("path", [SMOKE, PRESET], ids=["smoke", "preset"])
def test_gaussian_configs_validate(path):
    cfg = load(path)
    oc.validate_config(cfg, SCHEMA)
    oc.check_config(cfg)
    assert plan.world_kind(cfg) == "gaussian"
    assert world_file("results/x", cfg) == "results/x/oracle/gaussian_world.pt"


def test_preset_bayes_error_is_in_the_advertised_range():
    g = load(PRESET)["oracle"]["gaussian"]
    assert g["num_classes"] == 2 and (g["channels"], g["image_size"]) == (1, 8)
    assert 0.05 <= stats.norm.cdf(-g["separation"] / 2) <= 0.10


def test_world_defaults_to_flow():
    cfg = load(REPO / "config.yaml")
    assert "world" not in cfg["oracle"] and plan.world_kind(cfg) == "flow"
    assert world_file("results/x", cfg) == "results/x/oracle/flow.pt"


@pytest.mark.parametrize("change,match", [
    (lambda c: c["validation"].update(enabled=True), "'validation.enabled'.*gaussian"),
    (lambda c: c["oracle"].update(checkpoint="ckpt.pt"), "'oracle.checkpoint'.*gaussian"),
    (lambda c: c["worlds"]["base"].update(prior=[0.2, 0.3, 0.5]), "'worlds.base.prior'.*3 entries.*2 classes"),
    (lambda c: c["worlds"].update(skew={"prior": [0.1, 0.2, 0.7]}), "'worlds.skew.prior'.*3 entries.*2 classes"),
    (lambda c: c["oracle"]["gaussian"].update(num_classes=70), "'oracle.gaussian.num_classes'.*64"),
])
def test_cross_key_checks_of_a_gaussian_world(change, match):
    cfg = load(SMOKE)
    change(cfg)
    with pytest.raises(ConfigError, match=match):
        oc.check_config(cfg)


@pytest.mark.parametrize("change,match", [
    (lambda c: c["oracle"].pop("gaussian"), "'oracle'.*'gaussian' is a required property"),
    (lambda c: c["oracle"].update(world="analytic"), "'oracle.world'"),
    (lambda c: c["oracle"]["gaussian"].update(sep=1.0), "'oracle.gaussian'.*unknown key 'sep'"),
    (lambda c: c["oracle"]["gaussian"].update(std=0), "'oracle.gaussian.std'"),
    (lambda c: c["oracle"]["gaussian"].update(num_classes=1), "'oracle.gaussian.num_classes'"),
])
def test_schema_of_a_gaussian_world(change, match):
    cfg = copy.deepcopy(load(SMOKE))
    change(cfg)
    with pytest.raises(ConfigError, match=match):
        oc.validate_config(cfg, SCHEMA)


@pytest.mark.slow
def test_preset_dry_run_has_no_data_or_flow_stage(dag_dry_run):
    dry = dag_dry_run(PRESET.stem)  # the session's one dry run of the preset (tests/conftest.py)
    counts = dry.job_counts()
    cfg = load(PRESET)
    assert dry.config == cfg
    assert counts["oracle_gaussian"] == 1
    for rule in ("data", "oracle_train", "oracle_import", "validation_metrics"):
        assert rule not in counts, rule
    # every world variant is sampled like the base world (job counts in full: test_config)
    worlds = plan.world_specs(cfg)
    assert len(worlds) > 1
    assert counts["sample_shard"] == sum(w["n_shards"] for w in worlds.values())
    assert counts["merge_samples"] == counts["world_constants"] == len(worlds)
    assert counts["train_classifier"] == len(plan.classifier_runs(cfg))
    for rule in ("scaling_collect", "difficulty_collect", "numbers"):
        assert counts[rule] == 1, rule
    assert not (dry.workdir / "results").exists()


# ----------------------------------------------------------------------------- the Gaussian smoke run


@pytest.fixture
def run(gaussian_smoke) -> Path:
    """results/<run> of the session's run of tests/smoke/gaussian.yaml (tests/conftest.py)."""
    return gaussian_smoke


def world_params(run: Path) -> tuple[np.ndarray, float]:
    """Means [K, D] and std read from the oracle stage's file with torch alone."""
    import torch

    blob = torch.load(run / "oracle" / "gaussian_world.pt", weights_only=True)
    return blob["means"].numpy(), float(blob["std"])


def scipy_loglik(x: np.ndarray, means: np.ndarray, std: float) -> np.ndarray:
    flat = x.reshape(len(x), -1).astype(np.float64)
    return np.stack([stats.multivariate_normal(means[k], std ** 2 * np.eye(means.shape[1])).logpdf(flat)
                     for k in range(len(means))], axis=1)


@pytest.mark.slow
def test_no_data_stage_and_the_world_file_has_the_configured_geometry(run):
    g = load(SMOKE)["oracle"]["gaussian"]
    assert not (run / "data").exists() and not (run / "oracle" / "flow.pt").exists()
    means, std = world_params(run)
    assert means.shape == (2, g["channels"] * g["image_size"] ** 2) and std == g["std"]
    assert np.linalg.norm(means[0] - means[1]) == pytest.approx(g["separation"] * g["std"], rel=1e-12)
    assert (run / "oracle" / "gaussian_world.pt.prov.json").exists()


@pytest.mark.slow
def test_shard_loglik_is_the_scipy_density_at_the_stored_x(run):
    cfg = load(SMOKE)
    g = cfg["oracle"]["gaussian"]
    means, std = world_params(run)
    rows, per_class = 0, [[] for _ in means]
    for i in range(cfg["samples"]["n_shards"]):
        with h5py.File(run / "samples" / "base" / f"shard-{i:04d}.h5", "r") as f:
            x, ll, y = f["x"][()], f["loglik"][()], f["source_class"][()]
            assert x.dtype == np.float32 and x.shape[1:] == (g["channels"], g["image_size"], g["image_size"])
            assert ll.dtype == np.float64 and f.attrs["world"] == "GaussianWorld"
        np.testing.assert_allclose(ll, scipy_loglik(x, means, std), rtol=0, atol=1e-8)
        rows += len(x)
        for k in range(len(means)):
            per_class[k].append(x[y == k].reshape(-1, means.shape[1]))
    assert rows == cfg["samples"]["n_total"]
    for k, xs in enumerate(per_class):  # the samples follow the stated law: mean within 5 SE
        xs = np.concatenate(xs)
        np.testing.assert_allclose(xs.mean(0), means[k], atol=5 * std / math.sqrt(len(xs)))


@pytest.mark.slow
def test_monte_carlo_bayes_error_agrees_with_the_closed_form(run):
    world = json.loads((run / "samples" / "base" / "constants.json").read_text())
    entry = world["bayes_error_closed_form"]
    means, std = world_params(run)
    closed = stats.norm.cdf(-np.linalg.norm(means[0] - means[1]) / (2 * std))  # uniform prior, T = 1
    assert entry["value"] == pytest.approx(closed, abs=1e-12) and entry["method"] == "closed_form"
    with h5py.File(run / "samples" / "base" / "all.h5", "r") as f:
        log_p = log_softmax(f["loglik"][()], axis=1)
    err = 1.0 - np.exp(log_p).max(axis=1)
    mc, se = err.mean(), err.std(ddof=1) / math.sqrt(len(err))
    assert entry["monte_carlo"]["mean"] == pytest.approx(mc, rel=1e-12)
    assert entry["monte_carlo"]["se"] == pytest.approx(se, rel=1e-9)
    assert entry["monte_carlo"]["n"] == load(SMOKE)["samples"]["n_total"]
    assert abs(mc - closed) <= 3 * se, (mc, se, closed)
    assert entry["agrees_within_3se"] is True and entry["z"] == pytest.approx((mc - closed) / se, rel=1e-9)
    numbers = json.loads((run / "numbers.json").read_text())
    assert numbers["world.base.bayes_error_closed_form"]["value"] == entry["value"]
    assert numbers["world.base.bayes_error"]["value"] == pytest.approx(mc, rel=1e-12)


@pytest.mark.slow
def test_classifier_evaluation_uses_the_exact_posteriors(run):
    """predictions + metrics of every classifier against posteriors recomputed by scipy at the stored x."""
    cfg = load(SMOKE)
    means, std = world_params(run)
    with h5py.File(run / "samples" / "base" / "all.h5", "r") as f:
        x_all = f["x"][()]
    runs = plan.classifier_runs(cfg)
    assert runs
    for r in runs:
        folder = model_dir(run, r)
        m = json.loads((folder / "metrics" / "base.json").read_text())["metrics"]
        with h5py.File(folder / "predictions" / "base.h5", "r") as f:
            log_q, index = f["log_q"][()], f["index"][()]
        assert len(index) == cfg["splits"]["test_size"]
        log_p = log_softmax(scipy_loglik(x_all[index], means, std), axis=1)
        p = np.exp(log_p)
        aleatoric = -(p * log_p).sum(axis=1).mean()
        epistemic = (p * (log_p - log_q)).sum(axis=1).mean()
        assert m["aleatoric"]["mean"] == pytest.approx(aleatoric, rel=1e-9)
        assert m["epistemic"]["mean"] == pytest.approx(epistemic, rel=1e-9, abs=1e-12)
        assert m["total"]["mean"] == pytest.approx(m["aleatoric"]["mean"] + m["epistemic"]["mean"], rel=1e-12)
        assert m["bayes_accuracy"]["mean"] == pytest.approx(p.max(axis=1).mean(), rel=1e-9)
        # the true calibration error against the closed-form posterior (the analytic world's
        # oracle-only calibration measure, computed here without the pipeline's code)
        q = np.exp(log_q)
        conf, pred = q.max(axis=1), q.argmax(axis=1)
        truth = p[np.arange(len(p)), pred]
        assert m["calibration_pointwise"]["mean"] == pytest.approx(np.abs(conf - truth).mean(), abs=1e-9)
        edges = np.linspace(0, 1, 11)
        which = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, 9)
        binned = sum(abs(conf[which == b].sum() - truth[which == b].sum()) for b in range(10)) / len(conf)
        assert m["ece_posterior"] == pytest.approx(binned, abs=1e-9)


@pytest.mark.slow
def test_labels_experiment_on_the_analytic_world(run):
    """Hard and soft labels end to end: Figure 7, the table, the reliability diagrams and the
    numbers exist; soft-label classifiers train on the exact posterior rows of their samples."""
    cfg = load(SMOKE)
    base = run / "labels" / "labels"
    for name in ("soft_vs_hard", "reliability", "calibration_agreement"):
        assert (base / "figures" / f"{name}.png").stat().st_size > 1000
        assert (base / "figures" / f"{name}.png.prov.json").exists()
    table = (base / "tables" / "label_comparison.csv").read_text().splitlines()
    assert len(table) == 1 + 2 * len(cfg["experiments"]["labels"]["sizes"])
    numbers = json.loads((run / "numbers.json").read_text())
    assert 0 <= numbers["labels.soft_wins"]["value"] <= numbers["labels.n_sizes"]["value"] == 2
    assert numbers["labels.ece_soft_max_n"]["artifact"].endswith("labels/labels/data/runs.csv")
    lab = cfg["experiments"]["labels"]
    assert numbers["labels.converged.test_resnet"]["of"] == 2 * len(lab["sizes"]) * len(lab["seeds"])  # hard and soft
    for mode in ("hard", "soft"):
        folder = model_dir(run, {"experiment": "labels", "arch": "test_resnet", "cell": f"{mode}-N50", "seed": 0})
        hist = json.loads((folder / "history.json").read_text())
        assert hist["labels"] == mode and hist["N"] == 50
        # classifiers.curve_points: 3 -> the curve is scored after 3 epochs, the last among them
        scored = [r["epoch"] for r in hist["history"] if "curve_acc" in r]
        assert scored == hist["curve_epochs"] and len(scored) == 3 and scored[-1] == hist["epochs"]
