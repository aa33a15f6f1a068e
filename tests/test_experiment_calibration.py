"""oracle.experiments.calibration: the models it borrows and its sets; the runs, sets and
reliability data it collects from metrics files, against ECE, Brier and overconfidence
computed here by brute force from the posteriors (numpy loops); its tables, figures, numbers."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from oracle.classifiers.evaluate import evaluate_predictions
from oracle.errors import ConfigError, DataError
from oracle.experiments import calibration
from oracle.experiments.columns import data_problems
from tests.test_experiment_kinds import DEFAULT
from tests.test_experiment_shift import csv_roundtrip

NOISE = [0.1, 0.3]
WORLDS = ["tau1.5", "tau0.7", "skew"]
SETS = ["base", "base-noise0.1", "base-noise0.3", "tau1.5", "tau0.7", "skew"]


def config():
    cfg = copy.deepcopy(DEFAULT)
    cfg["worlds"] = {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0},
                     "tau1.5": {"base_temperature": 1.5, "n_total": 1000, "test_size": 500},
                     "tau0.7": {"base_temperature": 0.7, "n_total": 1000, "test_size": 500},
                     "skew": {"prior": [0.5, 0.3, 0.2], "n_total": 1000, "test_size": 500}}
    cfg["experiments"] = {
        "sc": {"kind": "scaling", "world": "base", "archs": ["test_resnet", "test_vit"], "sizes": [100, 1000],
               "seeds": [0, 1], "labels": "hard"},
        "cal": {"kind": "calibration", "models": "sc", "archs": None, "sizes": None, "seeds": None,
                "noise": NOISE, "worlds": WORLDS, "reliability_arch": "test_vit"}}
    return cfg


def spec():
    cfg = config()
    return calibration.check("cal", copy.deepcopy(cfg["experiments"]["cal"]), cfg)


def test_check_borrows_every_model_and_names_its_sets():
    s = spec()
    assert len(s["borrowed_runs"]) == 8 and calibration.classifier_runs(s) == []
    assert calibration.evaluation_sets(s) == SETS
    assert s["reliability_arch"] == "test_vit"
    from oracle.workflow import plan

    jobs = plan.prediction_jobs(config())
    assert len(jobs) == 8 * len(SETS)  # scaling's base predictions are shared, not repeated
    cfg = config()
    cfg["experiments"]["cal"]["reliability_arch"] = "test_convnext"
    with pytest.raises(ConfigError, match=r"'experiments\.cal\.reliability_arch': 'test_convnext'"):
        calibration.check("cal", copy.deepcopy(cfg["experiments"]["cal"]), cfg)
    cfg["experiments"]["cal"].update(noise=[0.1], worlds=[], reliability_arch=None)
    with pytest.raises(ConfigError, match="at least 2"):
        calibration.check("cal", copy.deepcopy(cfg["experiments"]["cal"]), cfg)
    with pytest.raises(ConfigError, match="trains no classifiers"):
        calibration.training_spec(s, "N100")


def brute(q, p, y, n_bins=10):
    """ECE against labels and against the truth, Brier, overconfidence, by explicit loops."""
    n = len(y)
    conf, pred = q.max(1), q.argmax(1)
    ece = ece_true = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i in range(n) if (lo < conf[i] <= hi) or (b == 0 and conf[i] == 0.0)]
        if members:
            c = np.mean([conf[i] for i in members])
            ece += len(members) / n * abs(c - np.mean([float(pred[i] == y[i]) for i in members]))
            ece_true += len(members) / n * abs(c - np.mean([p[i, pred[i]] for i in members]))
    brier = np.mean([sum((q[i, k] - float(k == y[i])) ** 2 for k in range(q.shape[1])) for i in range(n)])
    over = conf.mean() - np.mean(pred == y)
    over_truth = conf.mean() - np.mean(p[np.arange(n), pred])
    return {"ece": ece, "ece_posterior": ece_true, "brier": brier, "overconfidence": over,
            "overconfidence_truth": over_truth}


@pytest.fixture
def collected(tmp_path):
    s = spec()
    rng = np.random.default_rng(1)
    paths, truth = [], {}
    for run in s["borrowed_runs"]:
        for i, e in enumerate(SETS):
            n, k = 300, 3
            p = rng.dirichlet(np.full(k, 0.5 + i), size=n)
            temper = 1.0 + 0.4 * i  # sharper model on the more shifted sets: overconfident
            q = p ** temper + 0.05
            q /= q.sum(1, keepdims=True)
            y = np.array([rng.choice(k, p=row) for row in p])
            blob = {"experiment": "sc", "arch": run["arch"], "cell": run["cell"], "seed": run["seed"], "evalset": e,
                    "N": int(run["cell"][1:]), "labels": "hard", "hard_label": "label",
                    "metrics": evaluate_predictions(np.log(q), np.log(p), y)}
            path = tmp_path / f"{run['arch']}-{run['cell']}-{run['seed']}-{e}.json"
            path.write_text(json.dumps(blob))
            paths.append(str(path))
            truth[run["arch"], run["cell"], run["seed"], e] = brute(q, p, y)
    data = csv_roundtrip(calibration.collect(s, {"metrics": paths}), tmp_path)
    return s, data, truth, paths


def test_runs_and_sets_against_brute_force(collected):
    s, data, truth, _ = collected
    runs = data["runs"]
    assert len(runs) == 8 * len(SETS)
    truth_cols = {"ece_posterior", "overconfidence_truth"}
    for _, r in runs.iterrows():
        t = truth[r["arch"], r["cell"], int(r["seed"]), r["evalset"]]
        noisy = "-noise" in r["evalset"]
        for col, want in t.items():
            if noisy and col in truth_cols:  # no truth at a noisy input: left out, not a wrong number
                assert math.isnan(r[col]), col
            else:
                assert r[col] == pytest.approx(want, abs=1e-12), col
        assert math.isnan(r["calibration_pointwise"]) == noisy
    first = runs[(runs["arch"] == "test_resnet") & (runs["N"] == 100) & (runs["seed"] == 0)]
    assert list(first["evalset"]) == SETS
    assert list(first["sigma"].fillna(-1)) == [0.0, 0.1, 0.3, -1, -1, -1]
    assert list(first["tau"].fillna(-1)) == [1.0, -1, -1, 1.5, 0.7, 1.0]
    assert list(first["prior_shifted"]) == [False] * 5 + [True]
    sets = data["sets"].set_index("evalset")
    for e in SETS:
        b = np.array([truth[k]["brier"] for k in truth if k[3] == e])
        assert sets.loc[e, "brier"] == pytest.approx(b.mean(), abs=1e-12)
        assert sets.loc[e, "brier_se"] == pytest.approx(b.std(ddof=1) / math.sqrt(8), abs=1e-12)
        if "-noise" in e:
            assert math.isnan(sets.loc[e, "ece_diff"]) and math.isnan(sets.loc[e, "ece_posterior"])
            continue
        d = np.array([truth[k]["ece"] - truth[k]["ece_posterior"] for k in truth if k[3] == e])
        assert sets.loc[e, "ece_diff"] == pytest.approx(d.mean(), abs=1e-12)
        assert sets.loc[e, "ece_diff_se"] == pytest.approx(d.std(ddof=1) / math.sqrt(8), abs=1e-12)
        assert sets.loc[e, "ece_diff_z"] == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(8)), rel=1e-9)
    assert "not their posterior" in sets.loc["base-noise0.1", "labels"] and "variant" in sets.loc["tau1.5", "labels"]
    rel = data["reliability"]
    assert set(rel["arch"]) == {"test_vit"} and set(rel["N"]) == {1000} and len(rel) == 2 * len(SETS) * 10


def test_tables_figures_numbers(collected, tmp_path):
    s, data, truth, paths = collected
    t = calibration.table("calibration_under_shift", data, s)
    assert len(t) == 4 * len(SETS) and set(t["Seeds"]) == {2}
    row = t[(t["Architecture"] == s["arch_labels"]["test_vit"]) & (t["N"] == 100) & (t["Set"] == "tau0.7")].iloc[0]
    eces = [truth["test_vit", "N100", seed, "tau0.7"]["ece"] for seed in (0, 1)]
    assert row["ECE"] == pytest.approx(np.mean(eces), abs=1e-12)
    assert row["ECE std"] == pytest.approx(np.std(eces, ddof=1), abs=1e-12)
    t2 = calibration.table("ece_labels_vs_truth_under_shift", data, s)
    assert list(t2["Set"]) == [e for e in SETS if "-noise" not in e]  # noisy sets have no truth
    nums = calibration.numbers(data, s, {"sets": "sets.csv"})
    e = nums["ece_label_minus_truth.tau1.5"]
    assert e["se_over"] == "classifiers" and e["value"] == pytest.approx(data["sets"].set_index("evalset").loc[
        "tau1.5", "ece_diff"])
    assert nums["n_models"]["value"] == 8 and "ece_true.skew" in nums and "overconfidence_truth.tau1.5" in nums
    assert "ece.base-noise0.3" in nums and "brier.base-noise0.3" in nums
    assert not {"ece_true.base-noise0.3", "ece_label_minus_truth.base-noise0.3",
                "overconfidence_truth.base-noise0.3"} & set(nums)
    t = calibration.table("calibration_under_shift", data, s)
    assert t[t["Set"] == "base-noise0.1"]["True ECE"].isna().all() and t[t["Set"] == "base-noise0.1"]["ECE"].notna().all()
    for name in ("calibration_vs_shift", "reliability_under_shift"):
        out = calibration.figure(name, data, s, tmp_path / name)
        assert out["png"].read_bytes().startswith(b"\x89PNG")
    with pytest.raises(DataError, match="no table named"):
        calibration.table("nope", data, s)
    # a model's metrics on one set missing: named
    with pytest.raises(DataError, match="no metrics"):
        calibration.collect(s, {"metrics": paths[1:]})


def test_data_columns_are_described(collected):
    """Every column calibration's collect writes is in the column dictionary (docs/outputs.md) and nothing else is."""
    problems = data_problems("calibration", {name: list(frame.columns) for name, frame in collected[1].items()})
    assert not problems, problems
