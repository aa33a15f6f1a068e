"""oracle.experiments.difficulty: the curve from the worlds' constants files, its table, figure
and numbers; and the whole chain on Gaussian worlds against the closed-form Bayes error
Phi(-Delta / (2 tau))."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import yaml

from oracle.errors import ConfigError, DataError
from oracle.experiments import difficulty
from oracle.experiments.columns import data_problems
from oracle.measures.two_way import two_way_from_summaries
from oracle.report.numbers import spread_problems
from tests.test_experiment_kinds import DEFAULT
from tests.test_experiment_shift import csv_roundtrip

TAUS = {"tau0.5": 0.5, "base": 1.0, "tau2": 2.0}


def constants_file(tmp_path, world, tau, bayes, closed=None):
    out = {"world": world, "prior": [0.5, 0.5], "label_temperature": 1.0, "base_temperature": tau,
           "all": {"n": 1000, "num_classes": 2, "aleatoric": {"mean": 2 * bayes, "se": 0.01},
                   "bayes_accuracy": {"mean": 1 - bayes, "se": 0.002}, "bayes_error": {"mean": bayes, "se": 0.002},
                   "mutual_information": {"bits": 1 - 3 * bayes, "se": 0.01, "normalized": 1 - 3 * bayes, "h_y_bits": 1.0}}}
    if closed is not None:
        out["bayes_error_closed_form"] = {"value": closed, "method": "closed_form", "z": (bayes - closed) / 0.002,
                                          "monte_carlo": {"mean": bayes, "se": 0.002, "n": 1000},
                                          "agrees_within_3se": abs(bayes - closed) <= 0.006}
    path = tmp_path / f"{world}.json"
    path.write_text(json.dumps(out))
    return path


def spec():
    return {"kind": "difficulty", "worlds": list(TAUS), "base_temperatures": dict(TAUS)}


def test_collect_table_numbers_and_figure(tmp_path):
    bayes = {"tau0.5": 0.001, "base": 0.02, "tau2": 0.15}
    closed = {"tau0.5": 0.0012, "base": 0.021, "tau2": 0.149}
    # written in another order than the spec's: the curve follows the spec
    paths = [constants_file(tmp_path, w, TAUS[w], bayes[w], closed[w]) for w in ("tau2", "base", "tau0.5")]
    data = csv_roundtrip(difficulty.collect(spec(), {"constants": [str(p) for p in paths]}), tmp_path)
    curve = data["curve"]
    assert list(curve["world"]) == list(TAUS)
    assert np.allclose(curve["bayes_error"], [bayes[w] for w in TAUS])
    assert np.allclose(curve["closed_form_z"], [(bayes[w] - closed[w]) / 0.002 for w in TAUS])
    t = difficulty.table("difficulty_vs_tau", data, spec())
    assert list(t["tau"]) == [0.5, 1.0, 2.0]
    assert np.allclose(t["Bayes error (%)"], [100 * bayes[w] for w in TAUS])
    assert np.allclose(t["Closed form (%)"], [100 * closed[w] for w in TAUS])
    nums = difficulty.numbers(data, spec(), {"curve": "curve.csv"})
    assert spread_problems(nums) == []  # every mean over seeds: std, se, se_over, n_seeds
    assert nums["bayes_error.tau2"]["value"] == pytest.approx(0.15) and nums["bayes_error.tau2"]["se"] == 0.002
    assert nums["bayes_error_closed_form.base"]["value"] == pytest.approx(0.021)
    assert nums["bayes_error_increases_with_tau"]["value"] == 1
    assert nums["aleatoric_floor.base"]["unit"] == "nats" and nums["mutual_information.base"]["unit"] == "bits"
    paths = difficulty.figure("difficulty_curve", data, spec(), tmp_path / "curve")
    assert paths["png"].read_bytes().startswith(b"\x89PNG")
    # no closed form anywhere: the table drops those columns, the numbers have none
    (tmp_path / "plain").mkdir()
    plain = [constants_file(tmp_path / "plain", w, TAUS[w], bayes[w]) for w in TAUS]
    data = csv_roundtrip(difficulty.collect(spec(), {"constants": [str(p) for p in plain]}), tmp_path / "plain")
    t = difficulty.table("difficulty_vs_tau", data, spec())
    assert "Closed form (%)" not in t.columns
    assert not any(k.startswith("bayes_error_closed_form") for k in difficulty.numbers(data, spec(), {"curve": "c"}))


def test_check_names_bad_worlds():
    entry = {"kind": "difficulty", "worlds": ["base", "no_such"]}
    with pytest.raises(ConfigError, match=r"'experiments\.d\.worlds': no world named 'no_such'"):
        difficulty.check("d", dict(entry), DEFAULT)
    with pytest.raises(ConfigError, match="at least two distinct"):
        difficulty.check("d", {"kind": "difficulty", "worlds": ["base"]}, DEFAULT)
    assert difficulty.classifier_runs({}) == [] and difficulty.evaluation_sets({}) == []
    with pytest.raises(ConfigError):
        difficulty.training_spec({}, "N1")


def test_gaussian_worlds_against_the_closed_form(tmp_path):
    """The chain the workflow runs (sample -> log p(x|k) -> constants) on tau variants of a
    two-class Gaussian world, against Phi(-Delta / (2 tau)) (DESIGN rule 7)."""
    import torch

    from oracle.measures.world_constants import closed_form_comparison, world_constants
    from oracle.posterior import log_likelihoods, log_posterior
    from oracle.worlds import GaussianWorld

    means = np.zeros((2, 8))
    means[0, 0], means[1, 0] = -1.0, 1.0  # Delta = 2 / std at tau = 1
    paths = []
    for world, tau in TAUS.items():
        w = GaussianWorld(means, std=0.8, base_temperature=tau)
        x, _ = w.sample(20000, torch.Generator().manual_seed(int(10 * tau)))
        lp = log_posterior(log_likelihoods(w, x.to(torch.float32)), w.prior).numpy()
        c = {"world": world, "prior": [0.5, 0.5], "label_temperature": 1.0, "base_temperature": tau,
             "all": world_constants(lp, w.prior.numpy())}
        c["bayes_error_closed_form"] = closed_form_comparison(w, c["all"])
        assert c["bayes_error_closed_form"]["value"] == pytest.approx(0.5 * math.erfc(1 / (0.8 * tau) / math.sqrt(2)))
        path = tmp_path / f"{world}.json"
        path.write_text(json.dumps(c))
        paths.append(str(path))
    data = difficulty.collect(spec(), {"constants": paths})
    assert (data["curve"]["closed_form_z"].abs() < 3).all(), data["curve"]
    assert difficulty.numbers(data, spec(), {"curve": "c"})["bayes_error_increases_with_tau"]["value"] == 1


def test_the_gaussian_preset_has_a_difficulty_curve():
    from pathlib import Path

    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "presets" / "gaussian2.yaml").read_text())
    entries = [e for e in cfg["experiments"].values() if e["kind"] == "difficulty"]
    assert entries and len(entries[0]["worlds"]) >= 3
    spec_ = difficulty.check("difficulty", copy.deepcopy(entries[0]), cfg)
    assert len(set(spec_["base_temperatures"].values())) == len(spec_["worlds"])


def learner_spec(seeds=(0, 1, 2)):
    return {**spec(), "learner": {"arch": "tiny", "size": 200, "seeds": list(seeds)}}


def metrics_file(tmp_path, world, evalset, seed, rng, sharp):
    """A metrics file as the predict job writes it (`evaluate_predictions`) for random model
    and oracle posteriors; returns its path and the brute-force (test error, Bayes error,
    excess error against the truth)."""
    from oracle.classifiers.evaluate import evaluate_predictions

    n, k = 400, 3
    p = rng.dirichlet(np.full(k, sharp), size=n)
    q = 0.6 * p + 0.4 * rng.dirichlet(np.ones(k), size=n)
    y = np.array([rng.choice(k, p=row) for row in p])
    m = evaluate_predictions(np.log(q), np.log(p), y)
    blob = {"experiment": "difficulty", "arch": "tiny", "cell": world, "seed": seed, "evalset": evalset, "N": 200,
            "labels": "hard", "hard_label": "label", "metrics": m}
    path = tmp_path / f"{world}-{evalset}-{seed}.json"
    path.write_text(json.dumps(blob))
    yhat = q.argmax(1)
    row_gap = p.max(1) - (yhat == y)  # paired per row: Bayes accuracy minus correctness
    return str(path), (np.mean(yhat != y), np.mean(1 - p.max(1)), np.mean(p.max(1) - p[np.arange(n), yhat]),
                       np.std(row_gap, ddof=1) / math.sqrt(n))


def test_learner_against_brute_force(tmp_path):
    rng = np.random.default_rng(0)
    sharp = {"tau0.5": 0.2, "base": 0.6, "tau2": 2.0}
    paths, truth = [], {}
    for w in TAUS:
        for s in (0, 1, 2):
            for evalset in TAUS:  # every model on every world's test set; only its own is read
                path, exact = metrics_file(tmp_path, w, evalset, s, rng, sharp[evalset])
                paths.append(path)
                if evalset == w:
                    truth[w, s] = exact
    constants = [str(constants_file(tmp_path, w, TAUS[w], 0.1)) for w in TAUS]
    data = csv_roundtrip(difficulty.collect(learner_spec(), {"constants": constants, "metrics": paths[::-1]}),
                         tmp_path)
    problems = data_problems("difficulty", {name: list(frame.columns) for name, frame in data.items()})
    assert not problems, problems  # the column dictionary (docs/outputs.md) describes exactly what collect writes
    lrn = data["learner"]
    assert list(lrn["world"]) == [w for w in TAUS for _ in range(3)] and list(lrn["seed"]) == [0, 1, 2] * 3
    got = lrn.set_index(["world", "seed"])
    for (w, s), (err, bayes, excess, _) in truth.items():
        assert got.loc[(w, s), "test_error"] == pytest.approx(err, abs=1e-15)
        assert got.loc[(w, s), "bayes_error"] == pytest.approx(bayes, abs=1e-12)
        assert got.loc[(w, s), "gap"] == pytest.approx(err - bayes, abs=1e-12)
        assert got.loc[(w, s), "excess_error_truth"] == pytest.approx(excess, abs=1e-12)
    assert (lrn["excess_error_truth"] >= -1e-12).all()
    nums = difficulty.numbers(data, learner_spec(), {"curve": "c", "learner": "l"})
    gaps = np.array([truth["tau2", s][0] - truth["tau2", s][1] for s in (0, 1, 2)])
    g = nums["gap.tau2"]
    assert g["value"] == pytest.approx(gaps.mean(), abs=1e-12) and g["n_seeds"] == 3
    assert g["std"] == pytest.approx(gaps.std(ddof=1), abs=1e-12)
    # the three seeds share the world's test rows: the SE holds the seeds' spread and the rows' error
    assert g["se_over"] == "seeds and test rows"
    # no per-row values of the seeds together here: the rows' part at its bound (the seeds' rows perfectly
    # correlated), which is the hypot of the seeds' spread and their mean row SE
    assert g["rows_bound"] is True and g["n_rows"] == int(lrn["n_test"].iloc[0])
    row_se = [truth["tau2", s][3] for s in (0, 1, 2)]
    want = two_way_from_summaries(gaps, row_se, float(np.mean(row_se)), g["n_rows"])
    assert g["se"] == pytest.approx(want.se, rel=1e-12)
    assert g["se"] == pytest.approx(math.hypot(gaps.std(ddof=1) / math.sqrt(3), np.mean(row_se)), rel=1e-2)
    assert nums["learner_error.base"]["value"] == pytest.approx(np.mean([truth["base", s][0] for s in (0, 1, 2)]))
    assert nums["bayes_error.base"]["value"] == 0.1  # the curve's numbers are untouched
    t = difficulty.table("learner_vs_bayes", data, learner_spec())
    assert list(t["tau"]) == [0.5, 1.0, 2.0]
    assert t["Gap (pp)"].iloc[2] == pytest.approx(100 * gaps.mean(), abs=1e-10)
    assert difficulty.figure("learner_vs_bayes_curve", data, learner_spec(),
                             tmp_path / "lc")["png"].read_bytes().startswith(b"\x89PNG")
    # the learner's captions quote the Bayes errors of its own test rows (what its figure plots),
    # not the curve's (0.1 on every world here), and state the gap at both ends of tau
    from oracle.experiments.difficulty.findings import findings

    text = findings("learner_vs_bayes_curve", data, learner_spec())
    assert text == findings("learner_vs_bayes", data, learner_spec()) + " Error bars: mean ± SE over 3 seeds."
    b_lo, b_hi = (100 * np.mean([truth[w, s][1] for s in (0, 1, 2)]) for w in ("tau0.5", "tau2"))
    assert f"Bayes error {b_lo:.3g}% at tau=0.5 to {b_hi:.3g}% at tau=2" in text and "0.1%" not in text
    assert f"{100 * gaps.mean():.3g} ± " in text  # the gap at the largest tau, with its SE
    widens = np.diff(t["Gap (pp)"].to_numpy()) > 0
    assert ("widens at every step" in text) == bool(widens.all())
    # "close" as the claims read it (bayes_bound's 3 pp), from the gap at the smallest tau
    near = "within" if t["Gap (pp)"].iloc[0] <= 3 else "beyond"
    assert f"the learner is {near} the 3 pp the claims read as close" in text
    assert "Theisen" in text
    assert findings("difficulty_curve", data, learner_spec()).startswith("This run: the Bayes error goes from 10%")
    # a seed's own-world metrics missing: one-line error naming it
    with pytest.raises(DataError, match=r"\('tau2', 2\)"):
        difficulty.collect(learner_spec(), {"constants": constants, "metrics": [p for p in paths
                                                                                if not p.endswith("tau2-tau2-2.json")]})


def test_without_a_learner_the_learner_artifacts_are_empty(tmp_path):
    constants = [str(constants_file(tmp_path, w, TAUS[w], 0.1)) for w in TAUS]
    data = csv_roundtrip(difficulty.collect(spec(), {"constants": constants}), tmp_path)
    assert data["learner"].empty and "gap" in data["learner"].columns
    t = difficulty.table("learner_vs_bayes", data, spec())
    assert t.empty and "Gap (pp)" in t.columns
    assert not any(k.startswith("gap.") for k in difficulty.numbers(data, spec(), {"curve": "c", "learner": "l"}))
    assert difficulty.figure("learner_vs_bayes_curve", data, spec(), tmp_path / "e")["png"].exists()


def test_learner_planning():
    entry = {"kind": "difficulty", "worlds": ["tau0.9", "base", "tau1.5"],
             "learner": {"arch": "test_resnet", "size": 300, "seeds": [0, 1]}}
    s = difficulty.check("d", copy.deepcopy(entry), DEFAULT)
    runs = difficulty.classifier_runs(s)
    assert runs[:2] == [{"arch": "test_resnet", "cell": "tau0.9", "seed": 0},
                        {"arch": "test_resnet", "cell": "tau0.9", "seed": 1}] and len(runs) == 6
    t = difficulty.training_spec(s, "tau1.5")
    assert t["world"] == "tau1.5" and t["n"] == 300 and t["labels"] == "hard" and t["hard_label"] == "label"
    assert t["training"] == {k: DEFAULT["classifiers"]["training"][k] for k in t["training"]}
    assert difficulty.evaluation_sets(s) == ["tau0.9", "base", "tau1.5"]
    assert difficulty.run_evaluation_sets(s, runs[-1]) == ["tau1.5"]
    from oracle.workflow import plan

    cfg = copy.deepcopy(DEFAULT)
    cfg["experiments"] = {"d": copy.deepcopy(entry)}
    # each learner on its own world's test set only
    cond = {w: plan.model_condition(difficulty.training_spec(s, w)) for w in ("tau0.9", "base", "tau1.5")}
    assert plan.prediction_jobs(cfg) == sorted((w, "test_resnet", cond[w], s_, w) for w in ("tau0.9", "base", "tau1.5")
                                               for s_ in (0, 1))
    t = plan.training_spec(cfg, "d", "tau0.9")
    assert t["world"] == "tau0.9" and t["training"] == plan.experiment_spec(cfg, "d")["training"]
    assert plan.split_worlds(cfg)["tau1.5"]["seeds"] == [0, 1] and plan.split_worlds(cfg)["tau1.5"]["max_n"] == 300
    with pytest.raises(ConfigError, match="no world 'tau1.2'"):
        difficulty.training_spec(s, "tau1.2")
    with pytest.raises(ConfigError, match=r"learner\.size': N=1100 \+ 200 validation rows .*exceeds the training pool of world 'tau0\.9'"):
        difficulty.check("d", {**copy.deepcopy(entry), "learner": {"arch": "test_resnet", "size": 1100, "seeds": [0]}},
                         DEFAULT)
    with pytest.raises(ConfigError, match=r"learner\.arch': 'nope'"):
        difficulty.check("d", {**copy.deepcopy(entry), "learner": {"arch": "nope", "size": 9, "seeds": [0]}}, DEFAULT)
