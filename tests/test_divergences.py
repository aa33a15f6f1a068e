"""oracle.measures.divergences: KL_y against the paper's Table 7 and a direct sum, the base
temperature's closed form against Monte Carlo from the worlds' own log densities (a Gaussian
world and a non-trivial flow), and the joint KL of prior + tau variants."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oracle.errors import OracleError
from oracle.measures import divergences as dv
from oracle.worlds import FlowWorld, GaussianWorld

# Table 7's target KL_y (nats) of the four imbalances and the balanced (0.33, 0.33, 0.34)
PAPER_TARGETS = {(0.40, 0.35, 0.25): 0.0181, (0.50, 0.30, 0.20): 0.0690, (0.60, 0.25, 0.15): 0.1610,
                 (0.70, 0.20, 0.10): 0.2968, (0.33, 0.33, 0.34): 1.0e-4}


def direct_kl(p, q):
    return sum(pk * math.log(pk / qk) for pk, qk in zip(p, q) if pk > 0)


@pytest.mark.parametrize("prior", list(PAPER_TARGETS))
def test_label_kl_matches_table_7_and_a_direct_sum(prior):
    got = dv.label_kl(prior)
    assert got == pytest.approx(direct_kl(prior, [1 / 3] * 3), abs=1e-14)
    # Table 7 prints 3-4 significant digits
    assert got == pytest.approx(PAPER_TARGETS[prior], rel=5e-3)


def test_counts_kl_is_the_kl_of_the_realised_frequencies():
    counts = [2041, 1476, 1483]
    assert dv.counts_kl(counts) == pytest.approx(direct_kl([c / 5000 for c in counts], [1 / 3] * 3), abs=1e-14)
    assert dv.counts_kl([10, 10, 10]) == 0.0
    assert dv.label_kl([0.5, 0.5], [0.25, 0.75]) == pytest.approx(direct_kl([0.5, 0.5], [0.25, 0.75]), abs=1e-14)
    assert dv.categorical_kl([0.5, 0.5], [1.0, 0.0]) == math.inf
    assert dv.categorical_kl([1.0, 0.0], [0.5, 0.5]) == pytest.approx(math.log(2), abs=1e-14)
    with pytest.raises(OracleError, match="sums to"):
        dv.label_kl([0.5, 0.6])
    with pytest.raises(OracleError):
        dv.counts_kl([0, 0])


@pytest.mark.parametrize("tau,ref", [(0.9, 1.0), (1.3, 1.0), (0.5, 2.0), (1.0, 1.0)])
def test_tau_kl_is_d_times_the_one_dimensional_gaussian_kl(tau, ref):
    # KL(N(0, a^2) || N(0, b^2)) = ln(b/a) + a^2 / (2 b^2) - 1/2 per dimension, written out
    per_dim = math.log(ref / tau) + tau**2 / (2 * ref**2) - 0.5
    assert dv.tau_kl(37, tau, ref) == pytest.approx(37 * per_dim, rel=1e-12, abs=1e-15)
    with pytest.raises(OracleError):
        dv.tau_kl(0, tau, ref)


def _check_against_monte_carlo(world_a, world_b, n, seed, dim):
    x, y = world_a.sample(n, torch.Generator().manual_seed(seed))
    x32 = x.to(torch.float32)
    ll = torch.stack([world_a.log_likelihood(x32, torch.full((n,), k)) for k in range(world_a.num_classes)], 1)
    return dv.world_kl_check(x32, y.numpy(), ll.numpy(), world_a.prior.numpy(), world_a.base_temperature, world_b, dim)


@pytest.mark.parametrize("tau", [0.8, 1.25])
def test_tau_closed_form_against_monte_carlo_on_a_gaussian_world(tau):
    rng = np.random.default_rng(0)
    means = rng.normal(size=(3, 16))
    a = GaussianWorld(means, std=0.7, base_temperature=tau)
    b = GaussianWorld(means, std=0.7)
    out = _check_against_monte_carlo(a, b, 4000, 1, 16)
    assert out["closed_form"]["tau"] == pytest.approx(dv.tau_kl(16, tau), rel=1e-12)
    assert out["closed_form"]["prior"] == 0.0
    assert out["agrees_within_3se"], out
    # the estimate has power: a wrong dimension count would be rejected
    assert abs(out["monte_carlo"]["mean"] - dv.tau_kl(24, tau)) > 3 * out["monte_carlo"]["se"]


def test_tau_closed_form_against_monte_carlo_on_a_flow():
    from tests.test_worlds import tiny_flow

    flow = tiny_flow(num_classes=3, seed=2)
    a, b = FlowWorld(flow, base_temperature=0.85), FlowWorld(flow)
    out = _check_against_monte_carlo(a, b, 2000, 3, 16)
    assert out["agrees_within_3se"], out
    assert out["monte_carlo"]["se"] < 0.1 * out["closed_form"]["total"]


def test_prior_and_joint_variants_against_monte_carlo():
    rng = np.random.default_rng(4)
    means = rng.normal(size=(4, 8))
    pi_a, pi_b = [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]
    prior_only = _check_against_monte_carlo(GaussianWorld(means, 1.0, prior=pi_a), GaussianWorld(means, 1.0, prior=pi_b),
                                            6000, 5, 8)
    assert prior_only["closed_form"]["total"] == pytest.approx(direct_kl(pi_a, pi_b), abs=1e-14)
    assert prior_only["agrees_within_3se"], prior_only
    joint = _check_against_monte_carlo(GaussianWorld(means, 1.0, prior=pi_a, base_temperature=1.2),
                                       GaussianWorld(means, 1.0, prior=pi_b), 6000, 6, 8)
    assert joint["closed_form"]["total"] == pytest.approx(direct_kl(pi_a, pi_b) + dv.tau_kl(8, 1.2), abs=1e-12)
    assert joint["agrees_within_3se"], joint


def test_monte_carlo_kl_is_a_mean_with_its_standard_error():
    a, b = np.array([1.0, 2.0, 4.0]), np.array([0.0, 1.0, 1.0])
    got = dv.monte_carlo_kl(a, b)
    assert got["mean"] == pytest.approx(5 / 3, abs=1e-14)
    assert got["se"] == pytest.approx(np.std(a - b, ddof=1) / math.sqrt(3), abs=1e-14) and got["n"] == 3
    with pytest.raises(OracleError):
        dv.monte_carlo_kl(a, b[:2])
