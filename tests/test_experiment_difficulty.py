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

from oracle.errors import ConfigError
from oracle.experiments import difficulty
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
