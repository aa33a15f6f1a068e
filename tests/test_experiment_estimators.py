"""oracle.experiments.estimators: the models it borrows, its evaluation sets, the estimates,
scores and sets it collects from prediction files (against oracle.measures.accuracy_estimators applied
by hand), its tables, figure and numbers."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from oracle.errors import ConfigError
from oracle.experiments import estimators
from oracle.experiments.columns import data_problems
from oracle.io.predictions import write_predictions
from oracle.measures import accuracy_estimators as est
from oracle.report.numbers import spread_problems
from tests.test_experiment_kinds import DEFAULT
from tests.test_experiment_shift import csv_roundtrip

NOISE = [0.1, 0.3]
WORLDS = ["tau1.5", "skew"]


def config():
    cfg = copy.deepcopy(DEFAULT)
    cfg["worlds"] = {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0},
                     "tau1.5": {"base_temperature": 1.5, "n_total": 1000, "test_size": 500},
                     "skew": {"prior": [0.5, 0.3, 0.2], "n_total": 1000, "test_size": 500}}
    cfg["experiments"] = {
        "sc": {"kind": "scaling", "world": "base", "archs": ["test_resnet", "test_vit"], "sizes": [100, 1000],
               "seeds": [0, 1], "labels": "hard"},
        "est": {"kind": "estimators", "models": "sc", "archs": ["test_resnet"], "sizes": [1000], "seeds": None,
                "noise": NOISE, "worlds": WORLDS}}
    return cfg


def spec():
    cfg = config()
    return estimators.check("est", copy.deepcopy(cfg["experiments"]["est"]), cfg)


def test_check_borrows_the_models_and_names_its_sets():
    s = spec()
    assert s["borrowed_runs"] == [{"experiment": "sc", "arch": "test_resnet", "cell": "N1000", "seed": 0},
                                  {"experiment": "sc", "arch": "test_resnet", "cell": "N1000", "seed": 1}]
    assert estimators.classifier_runs(s) == []
    assert estimators.evaluation_sets(s) == ["base", "base-noise0.1", "base-noise0.3", "tau1.5", "skew"]
    from oracle.workflow import plan

    jobs = plan.prediction_jobs(config())
    specs = plan.experiment_specs(config())
    resnet = plan.model_of({"experiment": "sc", "arch": "test_resnet", "cell": "N1000", "seed": 1}, specs)
    vit = plan.model_of({"experiment": "sc", "arch": "test_vit", "cell": "N1000", "seed": 1}, specs)
    assert (*resnet.values(), "base-noise0.3") in jobs
    assert (*vit.values(), "base-noise0.3") not in jobs  # not selected
    assert len(jobs) == 8 + 2 * 4  # scaling's 8 models on base, and 2 of them on 4 more sets
    skew = plan.split_worlds(config())["skew"]
    assert skew == {"seeds": [], "max_n": 0}  # tested on only


@pytest.mark.parametrize("change,match", [
    (lambda e: e.update(models="nope"), r"'experiments\.est\.models'"),
    (lambda e: e.update(sizes=[7]), r"'experiments\.est\.sizes'"),
    (lambda e: e.update(worlds=["base"]), r"'experiments\.est\.worlds'"),
    (lambda e: e.update(noise=[0.1], worlds=[]), r"at least 3"),
])
def test_check_names_the_bad_key(change, match):
    cfg = config()
    change(cfg["experiments"]["est"])
    with pytest.raises(ConfigError, match=match):
        estimators.check("est", copy.deepcopy(cfg["experiments"]["est"]), cfg)


def _logits(rng, labels, strength):
    z = rng.normal(size=(len(labels), 3))
    z[np.arange(len(labels)), labels] += strength
    return z


@pytest.fixture
def collected(tmp_path):
    s = spec()
    rng = np.random.default_rng(0)
    strength = {"base": 3.0, "base-noise0.1": 2.0, "base-noise0.3": 0.8, "tau1.5": 1.5, "skew": 2.5}
    bayes = {"base": 0.99, "tau1.5": 0.93, "skew": 0.985}
    preds, metrics, raw = [], [], {}
    for run in s["borrowed_runs"]:
        for evalset in estimators.evaluation_sets(s):
            labels = rng.integers(0, 3, 300)
            z = _logits(rng, labels, strength[evalset] + 0.2 * run["seed"])
            log_q = est.log_softmax(z)
            ident = {k: run[k] for k in ("experiment", "arch", "cell", "seed")}
            p = tmp_path / f"p-{run['seed']}-{evalset}.h5"
            write_predictions(p, log_q, np.arange(300), labels, attrs={**ident, "evalset": evalset}, logits=z)
            m = tmp_path / f"m-{run['seed']}-{evalset}.json"
            m.write_text(json.dumps({**ident, "evalset": evalset, "metrics": {
                "acc": {"mean": float(np.mean(log_q.argmax(1) == labels)), "se": 0.01},
                "bayes_accuracy": {"mean": bayes.get(evalset, 0.5), "se": 0.001}}}))
            preds.append(str(p))
            metrics.append(str(m))
            raw[(run["seed"], evalset)] = (z, log_q, labels)
    div = []
    for w, kl in (("tau1.5", 5.3), ("skew", 0.07)):
        d = tmp_path / f"kl-{w}.json"
        d.write_text(json.dumps({"world": w, "closed_form": {"total": kl}, "monte_carlo": {"mean": kl + 0.01, "se": 0.02},
                                 "z": 0.5}))
        div.append(str(d))
    noise = []
    for sigma in NOISE:
        n = tmp_path / f"n{sigma}.json"
        n.write_text(json.dumps({"sigma": sigma, "posterior_shift": {"mean": sigma, "se": 0.001},
                                 "oracle_accuracy_noisy": {"mean": 1 - sigma, "se": 0.01}}))
        noise.append(str(n))
    data = estimators.collect(s, {"predictions": preds, "metrics": metrics, "divergences": div, "noise": noise})
    return s, csv_roundtrip(data, tmp_path), raw, bayes


def test_estimates_are_the_estimators_applied_to_each_file(collected):
    s, data, raw, _ = collected
    e = data["estimates"]
    assert len(e) == 2 * 5 * len(est.METHODS)
    for seed in (0, 1):
        z0, lq0, y0 = raw[(seed, "base")]
        thr = est.fit_atc(lq0, y0)  # ATC's threshold: the clean in-distribution set of the same model
        for evalset in estimators.evaluation_sets(s):
            z, lq, y = raw[(seed, evalset)]
            want = est.estimate_all(z, lq, thr)
            got = e[(e["seed"] == seed) & (e["evalset"] == evalset)].set_index("method")
            for method, value in want.items():
                assert got.loc[method, "estimate"] == pytest.approx(value, abs=1e-12)
                assert got.loc[method, "accuracy"] == pytest.approx(np.mean(lq.argmax(1) == y), abs=1e-12)
    noisy = e[e["shift"] == "noise"]
    assert noisy["bayes_accuracy"].isna().all()  # x' is not a draw from a world: no Bayes accuracy


def test_scores_over_the_shifted_sets(collected):
    s, data, _, _ = collected
    e, sc = data["estimates"], data["scores"]
    for seed in (0, 1):
        for method in est.METHODS:
            sub = e[(e["seed"] == seed) & (e["method"] == method) & (e["shift"] != "clean")]
            assert len(sub) == 4  # the clean set is not scored
            row = sc[(sc["seed"] == seed) & (sc["method"] == method) & (sc["target"] == "accuracy")].iloc[0]
            assert row["r2"] == pytest.approx(est.r2(sub["estimate"], sub["accuracy"]), abs=1e-12)
            assert row["spearman"] == pytest.approx(est.spearman(sub["estimate"], sub["accuracy"]), abs=1e-12)
            assert math.isnan(row["mae"]) != est.METHODS[method][1]
            exact = sc[(sc["seed"] == seed) & (sc["method"] == method) & (sc["target"] == "bayes_accuracy")].iloc[0]
            assert exact["n"] == 2 and math.isnan(exact["r2"])  # two variants: too few points for a fit


def test_sets_tables_numbers_and_figure(collected, tmp_path):
    s, data, raw, bayes = collected
    sets = data["sets"].set_index("evalset")
    acc = {k: np.mean([np.mean(raw[(sd, k)][1].argmax(1) == raw[(sd, k)][2]) for sd in (0, 1)]) for k in sets.index}
    assert sets.loc["tau1.5", "kl_exact"] == 5.3 and sets.loc["base", "kl_exact"] == 0.0
    assert math.isnan(sets.loc["base-noise0.1", "kl_exact"]) and sets.loc["base-noise0.3", "posterior_shift"] == 0.3
    assert sets.loc["tau1.5", "drop_pp"] == pytest.approx(100 * (acc["base"] - acc["tau1.5"]), abs=1e-9)
    share = (bayes["base"] - bayes["tau1.5"]) / (acc["base"] - acc["tau1.5"])
    assert sets.loc["tau1.5", "irreducible_share"] == pytest.approx(share, rel=1e-9)
    t = estimators.table("estimator_scores", data, s)
    assert list(t["Method"]) == [label for label, _ in est.METHODS.values()]
    mean_r2 = data["scores"].query("method == 'mano' and target == 'accuracy'")["r2"].mean()
    assert t.loc[0, "R²"] == pytest.approx(mean_r2, abs=1e-12)
    t2 = estimators.table("shifted_sets", data, s)
    assert list(t2["Set"]) == estimators.evaluation_sets(s)
    nums = estimators.numbers(data, s, {"estimates": "e.csv", "scores": "s.csv", "sets": "t.csv"})
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    assert nums["r2.mano"]["value"] == pytest.approx(mean_r2) and nums["n_models"]["value"] == 2
    assert "mae.mano" not in nums and nums["mae.atc_mc"]["unit"] == "fraction"
    assert nums["kl_exact.tau1.5"]["value"] == 5.3 and "bayes_accuracy.base-noise0.1" not in nums
    paths = estimators.figure("estimates_vs_accuracy", data, s, tmp_path / "fig")
    assert paths["png"].read_bytes().startswith(b"\x89PNG")


def test_predictions_without_logits_are_refused(tmp_path):
    s = spec()
    p = tmp_path / "p.h5"
    write_predictions(p, est.log_softmax(np.zeros((3, 3))), np.arange(3), np.zeros(3, int),
                      attrs={"arch": "test_resnet", "cell": "N1000", "seed": 0, "evalset": "base"})
    from oracle.errors import DataError

    with pytest.raises(DataError, match="no logits"):
        estimators.collect(s, {"predictions": [str(p)], "metrics": []})


def test_data_columns_are_described(collected):
    """Every column estimators's collect writes is in the column dictionary (docs/outputs.md) and nothing else is."""
    problems = data_problems("estimators", {name: list(frame.columns) for name, frame in collected[1].items()})
    assert not problems, problems
