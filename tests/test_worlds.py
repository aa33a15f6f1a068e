"""Worlds against closed forms and independent computations (scipy, quadrature, Monte Carlo)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from oracle.decomposition import bayes_error as mc_bayes_error
from oracle.errors import WorldError
from oracle.flow_checkpoints import build_flow
from oracle.posterior import log_likelihoods, log_posterior
from oracle.worlds import AffineWorld, FlowWorld, GaussianWorld, validate_prior


def two_class_means(dist: float, dim: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=dim)
    u /= np.linalg.norm(u)
    m0 = rng.normal(size=dim)
    return np.stack([m0, m0 + dist * u])


def mc_bayes_error_of(world, n: int, seed: int) -> dict:
    """The pipeline's estimate: sample -> log p(x|k) -> log posterior -> E[1 - max p]."""
    x, _ = world.sample(n, torch.Generator().manual_seed(seed))
    ll = log_likelihoods(world, x, class_batch=1)
    return mc_bayes_error(log_posterior(ll, world.prior, world.label_temperature))


def tiny_flow(num_classes=3, seed=0, dtype=torch.float64, per_class=False, scale=0.05):
    flow = build_flow(dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                           num_blocks=2, layers_per_block=1, num_classes=num_classes,
                           per_class=per_class), seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # proj_out starts at zero (identity flow); make the flow non-trivial
        for p in flow.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return flow.to(dtype)


# ------------------------------------------------------------------------ Gaussian densities


@pytest.mark.parametrize("tau", [1.0, 0.5, 2.5])
def test_gaussian_log_likelihood_matches_scipy(tau):
    rng = np.random.default_rng(1)
    means = rng.normal(size=(4, 6)) * 3
    world = GaussianWorld(means, std=0.7, base_temperature=tau)
    x = rng.normal(size=(50, 6)) * 2
    y = rng.integers(0, 4, size=50)
    got = world.log_likelihood(torch.from_numpy(x), torch.from_numpy(y)).numpy()
    cov = (0.7 * tau) ** 2 * np.eye(6)
    want = np.array([stats.multivariate_normal.logpdf(x[i], means[y[i]], cov) for i in range(50)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-10)
    all_k = world.log_likelihood_classes(torch.from_numpy(x), torch.arange(4)).numpy()
    want_all = np.stack([stats.multivariate_normal.logpdf(x, means[k], cov) for k in range(4)], 1)
    np.testing.assert_allclose(all_k, want_all, rtol=1e-12, atol=1e-10)
    assert all_k.dtype == np.float64


def test_gaussian_samples_have_the_stated_law():
    means = np.array([[0.0, 0.0, 0.0], [3.0, -1.0, 2.0]])
    world = GaussianWorld(means, std=0.5, prior=[0.3, 0.7], base_temperature=2.0)
    x, y = world.sample(40000, torch.Generator().manual_seed(3))
    x, y = x.numpy(), y.numpy()
    n1 = (y == 1).sum()
    # binomial count within 4 standard deviations of 0.7 n
    assert abs(n1 - 0.7 * 40000) < 4 * math.sqrt(40000 * 0.21)
    for k in range(2):
        xs = x[y == k]
        se = 1.0 / math.sqrt(len(xs))  # sigma = 1.0 (std 0.5 * tau 2)
        np.testing.assert_allclose(xs.mean(0), means[k], atol=5 * se)
        np.testing.assert_allclose(xs.std(0, ddof=1), 1.0, atol=0.03)


def test_sampling_is_deterministic_in_the_generator():
    world = GaussianWorld(np.eye(3), std=1.0)
    a = world.sample(100, torch.Generator().manual_seed(5))
    b = world.sample(100, torch.Generator().manual_seed(5))
    c = world.sample(100, torch.Generator().manual_seed(6))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


# ------------------------------------------------------------------------ Bayes error


@pytest.mark.parametrize("dist,prior", [(2.0, None), (1.0, [0.8, 0.2]), (3.0, [0.35, 0.65])])
def test_bayes_error_monte_carlo_agrees_with_closed_form(dist, prior):
    world = GaussianWorld(two_class_means(dist), std=1.0, prior=prior)
    est = mc_bayes_error_of(world, 20000, seed=11)
    closed = world.bayes_error()
    assert abs(est["mean"] - closed) < 3 * est["se"], (est, closed)
    if prior is None:  # the textbook formula, written out independently
        assert closed == pytest.approx(stats.norm.cdf(-dist / 2), abs=1e-14)


def test_bayes_error_with_prior_against_direct_integration():
    """pi_1 P(decide 2 | 1) + pi_2 P(decide 1 | 2), integrated numerically in the 1-D statistic."""
    dist, p1 = 1.3, 0.8
    world = GaussianWorld(two_class_means(dist, dim=3), std=1.0, prior=[p1, 1 - p1])
    # decision regions found by brute force on a grid of the projection t
    t = np.linspace(-12, 12, 2_000_001)
    logit = np.log(p1 * stats.norm.pdf(t, dist / 2)) - np.log((1 - p1) * stats.norm.pdf(t, -dist / 2))
    wrong = np.where(logit > 0, (1 - p1) * stats.norm.pdf(t, -dist / 2), p1 * stats.norm.pdf(t, dist / 2))
    brute = integrate.trapezoid(wrong, t)
    assert world.bayes_error() == pytest.approx(brute, abs=1e-9)
    assert world.bayes_error_quadrature() == pytest.approx(world.bayes_error(), abs=1e-10)


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_base_temperature_changes_bayes_error_as_predicted(tau):
    dist, std = 2.5, 0.8
    world = GaussianWorld(two_class_means(dist), std=std, base_temperature=tau)
    predicted = stats.norm.cdf(-dist / (2 * std * tau))
    assert world.bayes_error() == pytest.approx(predicted, abs=1e-14)
    est = mc_bayes_error_of(world, 20000, seed=21)
    assert abs(est["mean"] - predicted) < 3 * est["se"]


def test_bayes_error_increases_with_base_temperature():
    means = two_class_means(2.0)
    errors = [GaussianWorld(means, 1.0, base_temperature=t).bayes_error() for t in (0.25, 0.5, 1, 2, 4)]
    assert all(a < b for a, b in zip(errors, errors[1:]))


@pytest.mark.parametrize("T,prior", [(3.0, None), (0.5, [0.7, 0.3])])
def test_label_temperature_bayes_error_quadrature_vs_monte_carlo(T, prior):
    world = GaussianWorld(two_class_means(1.5), std=1.0, prior=prior, label_temperature=T)
    est = mc_bayes_error_of(world, 20000, seed=31)
    q = world.bayes_error()
    assert abs(est["mean"] - q) < 3 * est["se"], (est, q)
    # a softer posterior can only raise E[1 - max p] for a uniform prior
    if prior is None and T > 1:
        assert q > GaussianWorld(two_class_means(1.5), 1.0).bayes_error()


def test_bayes_error_without_closed_form_raises():
    with pytest.raises(WorldError, match="no closed form for K=3"):
        GaussianWorld(np.eye(3), 1.0).bayes_error()


def test_degenerate_bayes_errors():
    same = GaussianWorld(np.zeros((2, 2)), 1.0, prior=[0.25, 0.75])
    assert same.bayes_error() == pytest.approx(0.25)
    certain = GaussianWorld(np.array([[0.0], [1.0]]), 1.0, prior=[1.0, 0.0])
    assert certain.bayes_error() == 0.0


# ------------------------------------------------------------------------ invariance (Prop. 1)


def random_affine(dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
    A = q @ np.diag(rng.uniform(0.5, 2.0, size=dim)) @ np.linalg.qr(rng.normal(size=(dim, dim)))[0]
    return A, rng.normal(size=dim)


def test_affine_world_density_matches_scipy():
    rng = np.random.default_rng(2)
    means = rng.normal(size=(3, 4))
    base = GaussianWorld(means, std=0.6, base_temperature=1.5)
    A, b = random_affine(4, 3)
    world = AffineWorld(base, A, b)
    x = rng.normal(size=(30, 4))
    sigma2 = (0.6 * 1.5) ** 2
    got = world.log_likelihood_classes(torch.from_numpy(x), torch.arange(3)).numpy()
    want = np.stack([stats.multivariate_normal.logpdf(x, A @ means[k] + b, sigma2 * A @ A.T)
                     for k in range(3)], 1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-9)


def test_posteriors_invariant_under_invertible_affine_map():
    rng = np.random.default_rng(4)
    base = GaussianWorld(rng.normal(size=(4, 5)), std=0.9, prior=[0.1, 0.2, 0.3, 0.4])
    A, b = random_affine(5, 5)
    world = AffineWorld(base, A, b)
    x, _ = base.sample(500, torch.Generator().manual_seed(0))
    post = log_posterior(log_likelihoods(base, x), base.prior).exp()
    post_t = log_posterior(log_likelihoods(world, world.forward(x)), world.prior).exp()
    assert torch.max(torch.abs(post - post_t)) < 1e-10
    # the per-class densities do change (by -log|det A|): the test is not vacuous
    assert abs(world.log_abs_det) > 0.1


def test_transformed_world_bayes_error_matches_base_closed_form():
    base = GaussianWorld(two_class_means(1.8, dim=3), std=1.0)
    A, b = random_affine(3, 7)
    world = AffineWorld(base, A, b)
    est = mc_bayes_error_of(world, 20000, seed=41)
    assert abs(est["mean"] - base.bayes_error()) < 3 * est["se"]


def test_posteriors_invariant_for_a_flow_world():
    world = FlowWorld(tiny_flow(num_classes=3))
    A, b = random_affine(16, 9)
    moved = AffineWorld(world, A, b)
    x, _ = world.sample(40, torch.Generator().manual_seed(1))
    post = log_posterior(log_likelihoods(world, x)).exp()
    post_t = log_posterior(log_likelihoods(moved, moved.forward(x))).exp()
    assert torch.max(torch.abs(post - post_t)) < 1e-10


def test_singular_affine_map_is_refused():
    base = GaussianWorld(np.eye(2), 1.0)
    with pytest.raises(WorldError, match="singular or ill-conditioned"):
        AffineWorld(base, np.array([[1.0, 2.0], [2.0, 4.0]]))
    with pytest.raises(WorldError, match=r"A has shape \(3, 3\); expected \[2, 2\]"):
        AffineWorld(base, np.eye(3))


# ------------------------------------------------------------------------ flows


def test_identity_flow_world_is_a_tempered_gaussian():
    """With zero output projections z = x, so p_tau(x) = N(x; 0, tau^2 I) exactly."""
    flow = build_flow(dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                           num_blocks=2, layers_per_block=1, num_classes=2), seed=0).double()
    with torch.no_grad():
        for block in flow.blocks:
            block.proj_out.weight.zero_()
            block.proj_out.bias.zero_()
    tau = 0.7
    world = FlowWorld(flow, base_temperature=tau)
    x, y = world.sample(3000, torch.Generator().manual_seed(2))
    assert x.shape == (3000, 1, 4, 4)
    assert float(x.std()) == pytest.approx(tau, rel=0.03)
    got = world.log_likelihood(x[:20], y[:20]).numpy()
    want = stats.multivariate_normal.logpdf(x[:20].reshape(20, -1).numpy(), np.zeros(16), tau**2 * np.eye(16))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_flow_world_matches_flow_log_prob():
    flow = tiny_flow(num_classes=3)
    world = FlowWorld(flow, base_temperature=1.3)
    x, y = world.sample(10, torch.Generator().manual_seed(0))
    want = flow.log_prob(x, y, base_temperature=1.3)
    np.testing.assert_allclose(world.log_likelihood(x, y).numpy(), want.detach().numpy(), rtol=0, atol=1e-10)


def test_per_class_flow_world():
    flow = tiny_flow(num_classes=2, per_class=True)
    world = FlowWorld(flow, prior=[0.4, 0.6])
    assert world.num_classes == 2 and world.event_shape == (1, 4, 4)
    x, y = world.sample(8, torch.Generator().manual_seed(0))
    ll = world.log_likelihood_classes(x, torch.arange(2))
    for k in range(2):
        np.testing.assert_allclose(ll[:, k].numpy(), flow.flows[k].log_prob(x).detach().numpy(), atol=1e-10)


# ------------------------------------------------------------------------ validation


@pytest.mark.parametrize("prior,match", [
    ([0.5, -0.1, 0.6], r"prior\[1\]=-0.1 is negative"),
    ([0.5, 0.2, 0.2], r"sums to 0.9.*expected 1"),
    ([0.5, 0.5], r"prior has shape \(2,\) but the world has K=3"),
    ([0.5, float("nan"), 0.5], "non-finite"),
])
def test_bad_prior_raises(prior, match):
    with pytest.raises(WorldError, match=match):
        GaussianWorld(np.eye(3), 1.0, prior=prior)


def test_prior_tolerance_is_1e_6():
    assert float(validate_prior([0.7, 0.2, 0.1 + 5e-7], 3).sum()) == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(WorldError, match="sums to"):
        validate_prior([0.7, 0.2, 0.1 + 5e-6], 3)


def test_bad_temperatures_and_std_raise():
    for kw, name in [({"label_temperature": 0}, "label_temperature"), ({"base_temperature": -1}, "base_temperature"),
                     ({"std": float("inf")}, "std")]:
        args = {"std": 1.0, **kw}
        with pytest.raises(WorldError, match=name):
            GaussianWorld(np.eye(2), **args)


def test_class_count_mismatch_and_unconditional_flow_raise():
    with pytest.raises(WorldError, match="prior has 2 entries but the flow has num_classes=3"):
        FlowWorld(tiny_flow(num_classes=3), prior=[0.5, 0.5])
    unconditional = build_flow(dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                                    num_blocks=1, layers_per_block=1, num_classes=0))
    with pytest.raises(WorldError, match="num_classes=0"):
        FlowWorld(unconditional)


def test_bad_inputs_raise():
    world = GaussianWorld(np.eye(3), 1.0)
    with pytest.raises(WorldError, match=r"x has shape \(4, 2\); expected \[n, 3\]"):
        world.log_likelihood_classes(torch.zeros(4, 2), torch.arange(3))
    with pytest.raises(WorldError, match=r"contains class 3; expected classes in \[0, 3\)"):
        world.log_likelihood_classes(torch.zeros(4, 3), torch.tensor([0, 3]))
    with pytest.raises(WorldError, match="y has 2 entries but x has 4 rows"):
        world.log_likelihood(torch.zeros(4, 3), torch.tensor([0, 1]))


def test_non_finite_log_likelihood_raises():
    world = GaussianWorld(np.eye(3), 1.0)
    x = torch.zeros(5, 3, dtype=torch.float64)
    x[2, 1] = float("inf")
    with pytest.raises(WorldError, match="non-finite log p\\(x\\|y\\) = -inf for sample 2, class 0"):
        world.log_likelihood_classes(x, torch.arange(3))

    class BrokenFlow(torch.nn.Module):
        num_classes, event_shape = 2, (1, 2, 2)

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def log_prob_classes(self, x, classes, base_temperature=1.0):
            out = torch.zeros(x.shape[0], len(classes), dtype=torch.float64)
            out[1, -1] = float("nan")
            return out

    with pytest.raises(WorldError, match="for sample 1, class 1"):
        FlowWorld(BrokenFlow()).log_likelihood_classes(torch.zeros(3, 1, 2, 2), torch.arange(2))


def test_world_from_checkpoint(tmp_path):
    from oracle.flow_checkpoints import save_flow
    from oracle.worlds import world_from_checkpoint

    spec = dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                num_blocks=1, layers_per_block=1, num_classes=3)
    flow = build_flow(spec, seed=0)
    save_flow(tmp_path / "flow.pt", flow, spec)
    world = world_from_checkpoint(tmp_path / "flow.pt", prior=[0.2, 0.3, 0.5], base_temperature=0.9)
    assert world.num_classes == 3 and world.base_temperature == 0.9
    assert world.fingerprint() == FlowWorld(flow).fingerprint()
    with pytest.raises(WorldError, match="prior has 2 entries but the flow has num_classes=3"):
        world_from_checkpoint(tmp_path / "flow.pt", prior=[0.5, 0.5])


# ------------------------------------------------------------------------ image-shaped Gaussian worlds as files


def test_image_shaped_gaussian_world_matches_scipy_on_flattened_pixels():
    rng = np.random.default_rng(4)
    means = rng.normal(size=(3, 2 * 3 * 3))
    world = GaussianWorld(means, std=0.6, event_shape=(2, 3, 3), base_temperature=1.5)
    x, y = world.sample(200, torch.Generator().manual_seed(0))
    assert tuple(x.shape) == (200, 2, 3, 3) and world.dim == 18
    flat = x.numpy().reshape(200, -1)  # row-major, as the world defines it
    want = np.stack([stats.multivariate_normal.logpdf(flat, means[k], (0.6 * 1.5) ** 2 * np.eye(18))
                     for k in range(3)], 1)
    np.testing.assert_allclose(world.log_likelihood_classes(x, torch.arange(3)).numpy(), want, rtol=1e-12, atol=1e-10)
    # same law as the flat world, sample for sample
    flat_world = GaussianWorld(means, std=0.6, base_temperature=1.5)
    xf, yf = flat_world.sample(200, torch.Generator().manual_seed(0))
    assert torch.equal(xf.reshape(200, 2, 3, 3), x) and torch.equal(yf, y)
    assert flat_world.fingerprint() != world.fingerprint()
    with pytest.raises(WorldError, match="event_shape"):
        GaussianWorld(means, std=0.6, event_shape=(1, 4, 4))


@pytest.mark.parametrize("k,dim", [(2, 64), (3, 5), (7, 7)])
def test_simplex_means_are_equidistant_and_centred(k, dim):
    from oracle.worlds import simplex_means

    m = simplex_means(k, dim, 2.5, seed=3).numpy()
    assert m.shape == (k, dim) and m.dtype == np.float64
    d = np.linalg.norm(m[:, None] - m[None], axis=-1)
    np.testing.assert_allclose(d[~np.eye(k, dtype=bool)], 2.5, rtol=1e-12)
    np.testing.assert_allclose(m.mean(0), 0.0, atol=1e-14)
    np.testing.assert_array_equal(m, simplex_means(k, dim, 2.5, seed=3).numpy())
    assert not np.array_equal(m, simplex_means(k, dim, 2.5, seed=4).numpy())
    with pytest.raises(WorldError, match="K <= dim"):
        simplex_means(dim + 1, dim, 1.0, seed=0)


def test_gaussian_world_from_spec_has_the_closed_form_of_its_separation():
    from oracle.worlds import gaussian_world_from_spec

    spec = {"num_classes": 2, "channels": 1, "image_size": 8, "separation": 3.0, "std": 0.5, "seed": 0}
    world = gaussian_world_from_spec(spec)
    assert world.event_shape == (1, 8, 8)
    assert world.bayes_error() == pytest.approx(stats.norm.cdf(-1.5), abs=1e-14)
    with pytest.raises(WorldError, match="lacks"):
        gaussian_world_from_spec({k: v for k, v in spec.items() if k != "std"})


def test_gaussian_world_file_round_trip_and_dispatch(tmp_path):
    from oracle.errors import DataError
    from oracle.flow_checkpoints import save_flow
    from oracle.worlds import gaussian_world_from_spec, load_gaussian_world, save_gaussian_world, world_from_checkpoint

    spec = {"num_classes": 3, "channels": 2, "image_size": 4, "separation": 2.0, "std": 0.3, "seed": 1}
    world = gaussian_world_from_spec(spec)
    path = tmp_path / "oracle" / "gaussian_world.pt"
    save_gaussian_world(path, world, extra={"spec": spec})
    assert [p.name for p in path.parent.iterdir()] == ["gaussian_world.pt"]  # no temp leftovers
    blob = torch.load(path, weights_only=True)  # a plain file: readable without this code
    assert torch.equal(blob["means"], world.means) and blob["std"] == 0.3 and blob["event_shape"] == [2, 4, 4]
    back = world_from_checkpoint(path, prior=[0.2, 0.3, 0.5], label_temperature=2.0, base_temperature=0.8)
    assert isinstance(back, GaussianWorld) and back.event_shape == (2, 4, 4)
    assert back.fingerprint() == world.fingerprint()
    assert back.prior.tolist() == pytest.approx([0.2, 0.3, 0.5]) and back.label_temperature == 2.0
    assert back.base_temperature == 0.8
    x, _ = back.sample(10, torch.Generator().manual_seed(0))
    np.testing.assert_array_equal(back.log_likelihood_classes(x, torch.arange(3)).numpy(),
                                  GaussianWorld(world.means, 0.3, base_temperature=0.8, event_shape=(2, 4, 4))
                                  .log_likelihood_classes(x, torch.arange(3)).numpy())
    with pytest.raises(WorldError, match="K=3"):
        world_from_checkpoint(path, prior=[0.5, 0.5])

    flow_spec = dict(in_channels=1, img_size=4, patch_size=2, channels=16, head_dim=8,
                     num_blocks=1, layers_per_block=1, num_classes=2)
    save_flow(tmp_path / "flow.pt", build_flow(flow_spec, seed=0), flow_spec)
    assert isinstance(world_from_checkpoint(tmp_path / "flow.pt"), FlowWorld)
    with pytest.raises(DataError, match="not a Gaussian world file"):
        load_gaussian_world(tmp_path / "flow.pt")
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(DataError, match="format='something-else'"):
        world_from_checkpoint(tmp_path / "other.pt")
    with pytest.raises(DataError, match="does not exist"):
        world_from_checkpoint(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(DataError, match="unreadable"):
        world_from_checkpoint(tmp_path / "junk.pt")


def test_tampered_gaussian_world_file_is_refused(tmp_path):
    from oracle.worlds import save_gaussian_world, world_from_checkpoint

    path = tmp_path / "w.pt"
    save_gaussian_world(path, GaussianWorld(np.eye(2), std=1.0))
    blob = torch.load(path, weights_only=True)
    blob["std"] = 2.0
    torch.save(blob, path)
    with pytest.raises(WorldError, match="fingerprint"):
        world_from_checkpoint(path)
