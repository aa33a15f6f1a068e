"""Decomposition against brute-force loops, closed forms and 1-D quadrature."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats
from sklearn.metrics import accuracy_score

from oracle.decomposition import (accuracy, bayes_accuracy, bayes_error, decompose,
                                  mutual_information_bits, per_sample_terms)
from oracle.errors import OracleError
from oracle.posterior import log_likelihoods, log_posterior
from oracle.worlds import GaussianWorld


def random_log_probs(n, k, seed, zeros=0.0):
    """Dirichlet rows, a fraction `zeros` of entries set exactly to probability 0."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.7), size=n)
    if zeros:
        mask = rng.random((n, k)) < zeros
        mask[np.arange(n), p.argmax(1)] = False
        p = np.where(mask, 0.0, p)
        p /= p.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.log(p)


def brute_force(log_p, log_q):
    n, k = log_p.shape
    tot, ale, epi = np.zeros(n), np.zeros(n), np.zeros(n)
    for i in range(n):
        for j in range(k):
            p = math.exp(log_p[i, j])
            if p == 0.0:
                continue
            tot[i] -= p * log_q[i, j]
            ale[i] -= p * log_p[i, j]
            epi[i] += p * (log_p[i, j] - log_q[i, j])
    return tot, ale, epi


def se(v):
    return np.std(v, ddof=1) / math.sqrt(len(v))


def test_total_equals_aleatoric_plus_epistemic():
    log_p = random_log_probs(500, 7, seed=0, zeros=0.3)
    log_q = random_log_probs(500, 7, seed=1)
    t = per_sample_terms(log_p, log_q)
    diff = t["total"] - (t["aleatoric"] + t["epistemic"])
    assert float(diff.abs().max()) < 1e-10
    d = decompose(log_p, log_q)
    assert abs(d["total"]["mean"] - d["aleatoric"]["mean"] - d["epistemic"]["mean"]) < 1e-10
    assert float(t["epistemic"].min()) >= -1e-12  # Gibbs' inequality


def test_decompose_matches_brute_force_loop():
    log_p = random_log_probs(300, 5, seed=2, zeros=0.2)
    log_q = random_log_probs(300, 5, seed=3)
    tot, ale, epi = brute_force(log_p, log_q)
    terms = per_sample_terms(log_p, log_q)
    for name, ref in (("total", tot), ("aleatoric", ale), ("epistemic", epi)):
        np.testing.assert_allclose(terms[name].numpy(), ref, rtol=1e-12, atol=1e-13)
    d = decompose(torch.from_numpy(log_p), log_q)  # torch and numpy inputs mixed
    for name, ref in (("total", tot), ("aleatoric", ale), ("epistemic", epi)):
        assert d[name]["mean"] == pytest.approx(ref.mean(), rel=1e-12)
        assert d[name]["se"] == pytest.approx(se(ref), rel=1e-10)


def test_zero_probabilities_and_infinite_log_q():
    with np.errstate(divide="ignore"):
        log_p = np.log(np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]))
    log_q = np.array([[math.log(0.25), math.log(0.75), -math.inf],
                      [0.0, -math.inf, -math.inf]])
    t = per_sample_terms(log_p, log_q)
    # row 0: q is zero where p is zero -> finite; row 1: p one-hot and q the same -> all zero
    assert t["total"][0].item() == pytest.approx(-(0.5 * math.log(0.25) + 0.5 * math.log(0.75)))
    assert t["aleatoric"][0].item() == pytest.approx(math.log(2))
    assert t["total"][1].item() == 0.0 and t["aleatoric"][1].item() == 0.0 and t["epistemic"][1].item() == 0.0
    # p > 0 where q = 0: infinite cross-entropy and KL, not NaN
    bad = per_sample_terms(np.log([[0.5, 0.5]]), np.array([[0.0, -math.inf]]))
    assert bad["total"].item() == math.inf and bad["epistemic"].item() == math.inf


def test_perfect_model_has_zero_epistemic():
    log_p = random_log_probs(100, 4, seed=4, zeros=0.2)
    d = decompose(log_p, log_p)
    assert d["epistemic"]["mean"] == 0.0
    assert d["total"]["mean"] == pytest.approx(d["aleatoric"]["mean"], abs=1e-15)


def test_bayes_accuracy_and_error():
    log_p = random_log_probs(400, 6, seed=5, zeros=0.1)
    p = np.exp(log_p)
    acc = bayes_accuracy(log_p)
    err = bayes_error(torch.from_numpy(log_p))
    assert acc["mean"] == pytest.approx(p.max(1).mean(), rel=1e-13)
    assert acc["se"] == pytest.approx(se(p.max(1)), rel=1e-10)
    assert err["mean"] == pytest.approx(1 - p.max(1).mean(), rel=1e-12)
    assert err["se"] == pytest.approx(acc["se"], rel=1e-9)


def test_mutual_information_against_direct_computation():
    log_p = random_log_probs(300, 4, seed=6, zeros=0.2)
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    p = np.exp(log_p)
    h_y = -(prior * np.log2(prior)).sum()
    h_cond = np.array([-sum(v * math.log2(v) for v in row if v > 0) for row in p])
    mi = mutual_information_bits(log_p, prior)
    assert mi["bits"] == pytest.approx(h_y - h_cond.mean(), rel=1e-12)
    assert mi["se"] == pytest.approx(se(h_cond), rel=1e-10)
    assert mi["normalized"] == pytest.approx((h_y - h_cond.mean()) / h_y, rel=1e-12)


def test_mutual_information_limits():
    with np.errstate(divide="ignore"):
        onehot = np.log(np.eye(4)[[0, 1, 2, 3, 0, 1]])
    assert mutual_information_bits(onehot, [0.25] * 4)["bits"] == pytest.approx(2.0)
    assert mutual_information_bits(onehot, [0.25] * 4)["normalized"] == pytest.approx(1.0)
    flat = np.log(np.full((5, 4), 0.25))
    assert mutual_information_bits(flat, [0.25] * 4)["bits"] == pytest.approx(0.0, abs=1e-15)


def test_accuracy_against_sklearn():
    rng = np.random.default_rng(7)
    log_q = random_log_probs(500, 5, seed=8)
    labels = rng.integers(0, 5, size=500)
    labels[:200] = log_q[:200].argmax(1)
    acc = accuracy(log_q, labels)
    correct = (log_q.argmax(1) == labels).astype(float)
    assert acc["mean"] == pytest.approx(accuracy_score(labels, log_q.argmax(1)), rel=1e-14)
    assert acc["se"] == pytest.approx(se(correct), rel=1e-12)
    assert accuracy(torch.from_numpy(log_q), torch.from_numpy(labels))["mean"] == acc["mean"]


# -------------------------------------------------------------------- against quadrature


def two_class_world(prior=None, std=1.0):
    return GaussianWorld(np.array([[0.0, 0.0], [1.5, 0.0]]), std=std, prior=prior)


def quad_expectation(f, delta, p1):
    """E over the mixture of the 1-D statistic t (N(+d/2,1) w.p. p1, N(-d/2,1) otherwise)."""
    def integrand(t):
        return (p1 * stats.norm.pdf(t - delta / 2) + (1 - p1) * stats.norm.pdf(t + delta / 2)) * f(t)
    return integrate.quad(integrand, -np.inf, np.inf, epsabs=1e-12, limit=200)[0]


def test_aleatoric_and_epistemic_of_gaussian_world_against_quadrature():
    """Exact world: p(1|t) = sigmoid(d t + log(p1/p2)). Model: a Gaussian world with the wrong std,
    whose posterior in the same t is sigmoid(d t / s^2 + log(p1/p2)) for std s."""
    p1, s = 0.6, 1.7
    world = two_class_world(prior=[p1, 1 - p1])
    model = two_class_world(prior=[p1, 1 - p1], std=s)
    delta, lr = 1.5, math.log(p1 / (1 - p1))

    def h2(a):
        pa = special.expit(a)
        return -(special.xlogy(pa, pa) + special.xlogy(1 - pa, 1 - pa))

    def kl(t):
        a, b = delta * t + lr, delta * t / s**2 + lr
        def logsig(v):
            return -np.logaddexp(0.0, -v)
        pa = special.expit(a)
        return pa * (logsig(a) - logsig(b)) + (1 - pa) * (logsig(-a) - logsig(-b))

    x, _ = world.sample(20000, torch.Generator().manual_seed(9))
    log_p = log_posterior(log_likelihoods(world, x), world.prior)
    log_q = log_posterior(log_likelihoods(model, x), model.prior)
    d = decompose(log_p, log_q)
    ale = quad_expectation(lambda t: h2(delta * t + lr), delta, p1)
    epi = quad_expectation(kl, delta, p1)
    assert abs(d["aleatoric"]["mean"] - ale) < 3 * d["aleatoric"]["se"], (d, ale)
    assert abs(d["epistemic"]["mean"] - epi) < 3 * d["epistemic"]["se"], (d, epi)
    assert epi > 1e-3  # the model really is wrong


# -------------------------------------------------------------------- validation


def test_validation_errors():
    ok = random_log_probs(4, 3, seed=9)
    with pytest.raises(OracleError, match=r"log_p has shape \(4, 3\) but log_q has \(4, 2\)"):
        decompose(ok, ok[:, :2])
    nan = ok.copy()
    nan[2, 1] = np.nan
    with pytest.raises(OracleError, match=r"log_q\[2, 1\] = nan"):
        decompose(ok, nan)
    with pytest.raises(OracleError, match="row 0 has logsumexp .* expected normalized"):
        decompose(ok, ok + 1.0)  # logits, not log-probabilities
    with pytest.raises(OracleError, match="labels has 3 entries but log_q has 4 rows"):
        accuracy(ok, [0, 1, 2])
    with pytest.raises(OracleError, match=r"expected \[n, K\]"):
        bayes_error(np.zeros(3))
