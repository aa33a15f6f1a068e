"""Batched log-likelihoods against per-image, per-class loops; Bayes' rule against direct formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from oracle.errors import WorldError
from oracle.flow_checkpoints import build_flow
from oracle.posterior import log_likelihoods, log_posterior, pass_rows
from oracle.worlds import FlowWorld, GaussianWorld


def tiny_flow(num_classes=5, per_class=False, seed=0):
    flow = build_flow(dict(in_channels=2, img_size=4, patch_size=2, channels=16, head_dim=8,
                           num_blocks=2, layers_per_block=1, num_classes=num_classes,
                           per_class=per_class), seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in flow.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return flow.double()


@pytest.mark.parametrize("class_batch,image_batch", [(None, None), (1, None), (2, 3), (3, 7), (5, 1), (50, None)])
def test_gaussian_class_batching_equals_scipy_loop(class_batch, image_batch):
    rng = np.random.default_rng(0)
    means = rng.normal(size=(5, 3))
    world = GaussianWorld(means, std=0.8)
    x = rng.normal(size=(11, 3))
    got = log_likelihoods(world, torch.from_numpy(x), class_batch=class_batch, image_batch=image_batch)
    assert got.dtype == torch.float64 and got.shape == (11, 5)
    want = np.empty((11, 5))
    for i in range(11):
        for k in range(5):
            want[i, k] = stats.multivariate_normal.logpdf(x[i], means[k], 0.64 * np.eye(3))
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("per_class", [False, True])
@pytest.mark.parametrize("class_batch", [None, 1, 2, 4])
def test_flow_class_batching_equals_per_image_per_class_loop(per_class, class_batch):
    flow = tiny_flow(num_classes=5, per_class=per_class)
    world = FlowWorld(flow, base_temperature=0.9)
    x, _ = world.sample(6, torch.Generator().manual_seed(3))
    got = log_likelihoods(world, x, class_batch=class_batch, image_batch=4)
    want = torch.empty(6, 5, dtype=torch.float64)
    with torch.no_grad():
        for i in range(6):
            for k in range(5):
                want[i, k] = flow.log_prob(x[i:i + 1], torch.tensor([k]), base_temperature=0.9)[0]
    assert torch.max(torch.abs(got - want)) < 1e-10
    # the classes differ, so a column mix-up would be caught
    assert float((want[:, 0] - want[:, 1]).abs().max()) > 1e-3


@pytest.mark.parametrize("class_batch,max_rows,images_per_pass", [(None, 10, 2), (2, 7, 3), (50, 12, 2), (3, 1, 1), (2, None, 11)])
def test_max_rows_bounds_every_pass_and_changes_no_value(class_batch, max_rows, images_per_pass):
    """A pass holds at most max_rows (image, class) pairs, counting min(class_batch, K) classes
    (the imagenet64 preset's 256 x 50 pairs did not fit a GPU); float64 values are those of
    the unbounded call."""
    rng = np.random.default_rng(1)
    calls = []

    class Recording(GaussianWorld):
        def log_likelihood_classes(self, x, classes):
            calls.append((x.shape[0], classes.numel()))
            return super().log_likelihood_classes(x, classes)

    world = Recording(rng.normal(size=(5, 3)), std=0.8)
    x = torch.from_numpy(rng.normal(size=(11, 3)))
    got = log_likelihoods(world, x, class_batch=class_batch, max_rows=max_rows)
    assert max(n for n, _ in calls) == images_per_pass
    if max_rows is not None:
        assert all(n * k <= max(max_rows, k) for n, k in calls)
    want = log_likelihoods(GaussianWorld(world.means.numpy(), std=0.8), x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-12)


def test_pass_rows_bounds_only_configs_that_batch_classes():
    assert pass_rows(256, 50) == 256 and pass_rows(400, None) is None


def test_direct_bayes_rule_with_prior_and_temperature():
    rng = np.random.default_rng(1)
    ll = rng.normal(size=(20, 4)) * 3
    prior = np.array([0.1, 0.2, 0.3, 0.4])
    for T in (1.0, 0.3, 7.0, 500.0):
        got = log_posterior(torch.from_numpy(ll), prior, temperature=T).exp().numpy()
        unnorm = np.exp(ll) ** (1.0 / T) * prior
        want = unnorm / unnorm.sum(1, keepdims=True)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    uniform = log_posterior(ll).exp().numpy()
    want = np.exp(ll) / np.exp(ll).sum(1, keepdims=True)
    np.testing.assert_allclose(uniform, want, rtol=1e-12)


def test_log_space_survives_huge_log_likelihoods():
    """Image log-likelihoods are ~ -1e4 nats: exp() underflows, log-sum-exp must not."""
    rng = np.random.default_rng(2)
    ll = rng.normal(size=(10, 3)) * 2
    shifted = ll - 3e4
    assert np.all(np.exp(shifted) == 0.0)  # a naive implementation would divide 0 by 0
    got = log_posterior(shifted, temperature=2.0)
    want = log_posterior(ll, temperature=2.0)
    assert torch.isfinite(got).all()
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-9)
    np.testing.assert_allclose(got.exp().sum(1).numpy(), 1.0, atol=1e-14)


def test_zero_prior_gives_zero_posterior():
    got = log_posterior(np.zeros((3, 3)), prior=[0.5, 0.5, 0.0]).exp().numpy()
    np.testing.assert_array_equal(got[:, 2], 0.0)
    np.testing.assert_allclose(got[:, :2], 0.5)


def test_numpy_and_torch_inputs_agree():
    ll = np.random.default_rng(3).normal(size=(4, 3))
    a = log_posterior(ll, [0.2, 0.3, 0.5], 2.0)
    b = log_posterior(torch.from_numpy(ll).float(), torch.tensor([0.2, 0.3, 0.5]), 2.0)
    assert a.dtype == torch.float64
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


def test_validation_errors():
    with pytest.raises(WorldError, match=r"loglik\[1, 2\] = nan is not finite"):
        ll = np.zeros((3, 3))
        ll[1, 2] = np.nan
        log_posterior(ll)
    with pytest.raises(WorldError, match="temperature=0"):
        log_posterior(np.zeros((2, 2)), temperature=0)
    with pytest.raises(WorldError, match="sums to 0.5"):
        log_posterior(np.zeros((2, 2)), prior=[0.25, 0.25])
    with pytest.raises(WorldError, match=r"expected \[n, K\]"):
        log_posterior(np.zeros(3))
    world = GaussianWorld(np.eye(2), 1.0)
    with pytest.raises(WorldError, match="class_batch=0"):
        log_likelihoods(world, torch.zeros(2, 2), class_batch=0)


def test_non_finite_world_output_is_reported_with_its_place():
    class NaNWorld(GaussianWorld):
        def log_likelihood_classes(self, x, classes):  # bypasses the world's own check
            out = torch.zeros(x.shape[0], len(classes), dtype=torch.float64)
            if 3 in classes.tolist():
                out[1, classes.tolist().index(3)] = float("nan")
            return out

    with pytest.raises(WorldError, match="sample 1, class 3"):
        log_likelihoods(NaNWorld(np.eye(4), 1.0), torch.zeros(2, 4), class_batch=2)
