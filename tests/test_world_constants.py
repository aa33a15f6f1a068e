"""oracle.measures.world_constants against numpy and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oracle.measures.world_constants import closed_form_comparison, world_constants, world_numbers


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


def test_world_constants_against_numpy():
    rng = np.random.default_rng(2)
    log_p = log_softmax_np(rng.normal(size=(200, 4)) * 2)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    got = world_constants(log_p, prior)
    p = np.exp(log_p)
    h = -(p * log_p).sum(axis=1)
    assert math.isclose(got["aleatoric"]["mean"], h.mean(), rel_tol=1e-12)
    assert math.isclose(got["aleatoric"]["se"], h.std(ddof=1) / np.sqrt(200), rel_tol=1e-9)
    assert math.isclose(got["bayes_accuracy"]["mean"], p.max(axis=1).mean(), rel_tol=1e-12)
    assert math.isclose(got["bayes_error"]["mean"], 1 - p.max(axis=1).mean(), rel_tol=1e-9)
    h_y = -(prior * np.log2(prior)).sum()
    assert math.isclose(got["mutual_information"]["bits"], h_y - h.mean() / np.log(2), rel_tol=1e-12)
    assert math.isclose(got["mutual_information"]["normalized"], 1 - h.mean() / np.log(2) / h_y, rel_tol=1e-12)
    assert got["n"] == 200 and got["num_classes"] == 4 and got["classes_drawn"] == 4
    # a sub-world of 2 of the 4 classes: the posterior keeps its width, the rows come from 2
    sub = world_constants(log_softmax_np(rng.normal(size=(50, 4))), np.array([0.5, 0.0, 0.5, 0.0]))
    assert sub["num_classes"] == 4 and sub["classes_drawn"] == 2


def test_closed_form_comparison_against_scipy():
    import scipy.stats

    from oracle.worlds import GaussianWorld

    world = GaussianWorld(torch.tensor([[0.0, 0.0], [3.0, 0.0]], dtype=torch.float64), std=1.0)
    exact = scipy.stats.norm.cdf(-1.5)
    near = closed_form_comparison(world, {"bayes_error": {"mean": exact + 0.002, "se": 0.001}, "n": 100})
    assert near["value"] == pytest.approx(exact, abs=1e-12)
    assert near["z"] == pytest.approx(2.0) and near["agrees_within_3se"]
    far = closed_form_comparison(world, {"bayes_error": {"mean": exact + 0.004, "se": 0.001}, "n": 100})
    assert not far["agrees_within_3se"]
    three = GaussianWorld(torch.eye(3, dtype=torch.float64), std=1.0)
    assert closed_form_comparison(three, {"bayes_error": {"mean": 0.1, "se": 0.01}, "n": 10}) is None


def test_world_numbers_carry_values_units_and_the_closed_form():
    log_p = log_softmax_np(np.random.default_rng(3).normal(size=(100, 3)))
    constants = {"all": world_constants(log_p, np.full(3, 1 / 3)),
                 "bayes_error_closed_form": {"value": 0.0668, "method": "closed_form"}}
    nums = world_numbers(constants, "samples/base/constants.json")
    assert nums["aleatoric_floor"]["value"] == constants["all"]["aleatoric"]["mean"]
    assert nums["aleatoric_floor"]["unit"] == "nats" and nums["aleatoric_floor"]["se_over"] == "samples"
    assert nums["bayes_error_closed_form"]["value"] == 0.0668
    assert nums["num_classes"]["value"] == 3 and nums["n_samples"]["value"] == 100
    for entry in nums.values():
        assert entry["artifact"] == "samples/base/constants.json"
        assert {"value", "unit", "artifact", "description"} <= set(entry)
    del constants["bayes_error_closed_form"]
    assert "bayes_error_closed_form" not in world_numbers(constants, "c.json")
