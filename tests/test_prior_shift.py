"""oracle.measures.prior_shift: the Bayes cost of a training prior and logit adjustment, against
a hand-worked case and plain loops over rows and classes (no library code)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracle.errors import DataError
from oracle.measures.prior_shift import bayes_prior_cost, prior_adjusted_classes
from paired_rows import log_softmax_np


def test_hand_worked_two_rows():
    # row 0: p = (0.6, 0.4); pi_train / pi_world = (0.6, 1.4) -> (0.36, 0.56): the rule says 1, p(1|x) = 0.4
    # row 1: p = (0.9, 0.1) -> (0.54, 0.14): still 0, no cost
    log_p = np.log([[0.6, 0.4], [0.9, 0.1]])
    got = bayes_prior_cost(log_p, [0.5, 0.5], [0.3, 0.7])
    np.testing.assert_allclose(got["bayes"], [0.6, 0.9], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["train_rule"], [0.4, 0.9], rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["cost"], [0.2, 0.0], rtol=0, atol=1e-12)


def _loop_cost(log_p, prior_world, prior_train):
    costs = []
    for row in log_p:
        k = len(row)
        score = [math.exp(row[y]) * prior_train[y] / prior_world[y] for y in range(k)]
        best = max(range(k), key=lambda y: (score[y], -y))
        costs.append(max(math.exp(v) for v in row) - math.exp(row[best]))
    return np.array(costs)


@pytest.mark.parametrize("prior_world", [None, [0.4, 0.3, 0.2, 0.1]])
def test_cost_against_loops(prior_world):
    rng = np.random.default_rng(3)
    k = 4
    world = [1 / k] * k if prior_world is None else prior_world
    log_p = log_softmax_np(rng.normal(size=(500, k)) * 1.5 + np.log(world))
    for prior_train in ([0.7, 0.1, 0.1, 0.1], [0.05, 0.05, 0.1, 0.8], world):
        got = bayes_prior_cost(log_p, world, prior_train)
        want = _loop_cost(log_p, world, prior_train)
        np.testing.assert_allclose(got["cost"], want, rtol=0, atol=1e-10)
        assert (got["cost"] >= 0).all()
    # the training prior equal to the world's costs nothing, row by row
    assert np.array_equal(bayes_prior_cost(log_p, world, world)["cost"], np.zeros(500))


def test_a_stronger_prior_costs_something_on_ambiguous_rows():
    rng = np.random.default_rng(4)
    log_p = log_softmax_np(rng.normal(size=(2000, 3)) * 0.5)
    assert bayes_prior_cost(log_p, [1 / 3] * 3, [0.7, 0.2, 0.1])["cost"].mean() > 0.01


def test_adjustment_recovers_the_worlds_bayes_rule_from_the_training_posterior():
    rng = np.random.default_rng(5)
    world, train = np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.5, 0.3, 0.15, 0.05])
    log_p = log_softmax_np(rng.normal(size=(400, 4)))
    log_p_train = log_softmax_np(log_p + np.log(train / world))  # Bayes' rule with the training prior
    assert (log_p_train.argmax(1) != log_p.argmax(1)).any()  # the prior moves some rows
    assert np.array_equal(prior_adjusted_classes(log_p_train, train, world), log_p.argmax(1))


def test_adjusted_classes_against_loops():
    rng = np.random.default_rng(6)
    log_q = rng.normal(size=(300, 3))
    frm, to = [0.6, 0.3, 0.1], [0.2, 0.5, 0.3]
    want = [max(range(3), key=lambda y: (r[y] - math.log(frm[y]) + math.log(to[y]), -y)) for r in log_q]
    assert prior_adjusted_classes(log_q, frm, to).tolist() == want


def test_classes_outside_the_worlds_support():
    """A world of 3 of a learner's 5 classes (prior 0 on the others): the adjustment never
    predicts an absent class, and the Bayes cost of a prior on the 3 is that of the 3-class world."""
    rng = np.random.default_rng(7)
    log_q = rng.normal(size=(300, 5))
    log_q[:, 4] += 5.0  # the learner likes an absent class
    world5, train5 = [1 / 3, 1 / 3, 1 / 3, 0.0, 0.0], [0.7, 0.2, 0.1, 0.0, 0.0]
    got = prior_adjusted_classes(log_q, train5, world5)
    assert got.tolist() == prior_adjusted_classes(log_q[:, :3], train5[:3], world5[:3]).tolist()
    log_p3 = log_softmax_np(rng.normal(size=(300, 3)))
    with np.errstate(divide="ignore"):
        log_p5 = np.concatenate([log_p3, np.full((300, 2), -np.inf)], axis=1)
    np.testing.assert_array_equal(bayes_prior_cost(log_p5, world5, train5)["cost"],
                                  bayes_prior_cost(log_p3, world5[:3], train5[:3])["cost"])


@pytest.mark.parametrize("call,match", [
    (lambda: prior_adjusted_classes(np.zeros((2, 3)), [0.5, 0.5, 0.0], [1 / 3] * 3), "zero entry"),
    (lambda: prior_adjusted_classes(np.zeros((2, 3)), [0.5, 0.5], [1 / 3] * 3), r"prior_from=.*3 non-negative"),
    (lambda: bayes_prior_cost(np.zeros((2, 3)), [1 / 3] * 3, [0.5, 0.6, -0.1]), r"prior_train="),
    (lambda: bayes_prior_cost(np.zeros(3), [1 / 3] * 3, [1 / 3] * 3), r"log_p: expected .*\[n, K\]"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(DataError, match=match):
        call()
