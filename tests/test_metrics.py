"""oracle.validation.metrics against closed forms and independent computations (scipy, sklearn, loops)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import scipy.ndimage
import scipy.spatial.distance
import scipy.stats
import torch
from sklearn.neighbors import NearestNeighbors

from oracle.validation import density_checks, metrics, split_consistency
from oracle.errors import OracleError


def random_spd(rng: np.random.Generator, d: int, cond: float = 10.0) -> np.ndarray:
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return (q * np.linspace(1.0, cond, d)) @ q.T


def trace_sqrt_product_eigh(s1: np.ndarray, s2: np.ndarray) -> float:
    """tr (s1 s2)^{1/2} through the symmetric form s1^{1/2} s2 s1^{1/2} (same eigenvalues)."""
    w, v = np.linalg.eigh(s1)
    r = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    ev = np.linalg.eigvalsh(r @ s2 @ r)
    return float(np.sqrt(np.clip(ev, 0, None)).sum())


# ------------------------------------------------------------------ feature stats, FD


def test_feature_stats_matches_definition():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 4))
    mu, sigma = metrics.feature_stats(x)
    centred = x - x.mean(axis=0)
    expected = sum(np.outer(r, r) for r in centred) / (x.shape[0] - 1)
    np.testing.assert_allclose(mu, x.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(sigma, expected, rtol=1e-12)
    assert sigma.shape == (4, 4) and mu.dtype == np.float64


def test_feature_stats_one_dimensional():
    x = np.array([1.0, 2.0, 4.0])
    mu, sigma = metrics.feature_stats(x)
    assert sigma.shape == (1, 1)
    assert sigma[0, 0] == pytest.approx(np.var(x, ddof=1))
    assert mu[0] == pytest.approx(7.0 / 3.0)


def test_fd_identical_gaussians_is_zero():
    rng = np.random.default_rng(1)
    mu, s = rng.normal(size=8), random_spd(rng, 8)
    assert metrics.frechet_distance(mu, s, mu, s) == pytest.approx(0.0, abs=1e-9)


def test_fd_diagonal_closed_form():
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.1, 5, size=6), rng.uniform(0.1, 5, size=6)
    m1, m2 = rng.normal(size=6), rng.normal(size=6)
    expected = np.sum((np.sqrt(a) - np.sqrt(b)) ** 2) + np.sum((m1 - m2) ** 2)
    got = metrics.frechet_distance(m1, np.diag(a), m2, np.diag(b))
    assert got == pytest.approx(expected, rel=1e-10)


def test_fd_one_dimensional_scalars():
    # FD of N(1, 4) and N(-2, 9): (1 + 2)^2 + (2 - 3)^2 = 10
    assert metrics.frechet_distance(1.0, 4.0, -2.0, 9.0) == pytest.approx(10.0, rel=1e-12)


def test_fd_matches_direct_sqrtm_and_symmetric_eigh():
    rng = np.random.default_rng(3)
    d = 12
    s1, s2 = random_spd(rng, d, 50), random_spd(rng, d, 5)
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    direct = (np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2)
              - 2 * np.trace(scipy.linalg.sqrtm(s1 @ s2).real))
    via_eigh = (np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2)
                - 2 * trace_sqrt_product_eigh(s1, s2))
    got = metrics.frechet_distance(m1, s1, m2, s2)
    assert got == pytest.approx(direct, rel=1e-10)
    assert got == pytest.approx(via_eigh, rel=1e-8)
    assert metrics.frechet_distance(m2, s2, m1, s1) == pytest.approx(got, rel=1e-10)


def test_fd_rank_deficient_covariances():
    # Fewer samples than dimensions: singular covariances, as with small validation sets.
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(10, 30)), rng.normal(size=(10, 30)) + 0.3
    m1, s1 = metrics.feature_stats(x)
    m2, s2 = metrics.feature_stats(y)
    got = metrics.frechet_distance(m1, s1, m2, s2)
    exact = (np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2)
             - 2 * trace_sqrt_product_eigh(s1, s2))
    assert got == pytest.approx(exact, rel=1e-8)


def test_fd_eps_fallback_when_sqrtm_fails(monkeypatch):
    rng = np.random.default_rng(41)
    d = 10
    s1, s2 = random_spd(rng, d), random_spd(rng, d)
    m1, m2 = rng.normal(size=d), rng.normal(size=d)
    exact = metrics.frechet_distance(m1, s1, m2, s2)
    real_sqrtm = scipy.linalg.sqrtm
    calls = []

    def flaky_sqrtm(a):  # the first attempt returns garbage, as sqrtm can for singular input
        calls.append(a.copy())
        return np.full_like(a, np.nan) if len(calls) == 1 else real_sqrtm(a)

    monkeypatch.setattr(metrics.scipy.linalg, "sqrtm", flaky_sqrtm)
    got = metrics.frechet_distance(m1, s1, m2, s2, eps=1e-6)
    assert len(calls) == 2
    np.testing.assert_allclose(calls[1], (s1 + 1e-6 * np.eye(d)) @ (s2 + 1e-6 * np.eye(d)))
    assert got == pytest.approx(exact, abs=1e-4)
    assert got != exact


def test_fd_rejects_non_psd_and_bad_shapes():
    with pytest.raises(OracleError, match="imaginary|not positive|not valid|negative"):
        metrics.frechet_distance(np.zeros(3), -np.eye(3), np.zeros(3), np.eye(3))
    with pytest.raises(OracleError, match="sigma2"):
        metrics.frechet_distance(np.zeros(3), np.eye(3), np.zeros(3), np.eye(4))
    with pytest.raises(OracleError, match="NaN"):
        metrics.frechet_distance(np.array([np.nan, 0]), np.eye(2), np.zeros(2), np.eye(2))


def test_fd_of_features_row_space_path_equals_the_matrix_root_on_full_rank_sets():
    # n >= d: both paths apply; the cross-Gram nuclear norm must give the sqrtm distance
    rng = np.random.default_rng(42)
    x, y = rng.normal(size=(60, 12)), rng.normal(size=(45, 12)) @ rng.normal(size=(12, 12)) + 0.4
    via_root = metrics.frechet_distance(*metrics.feature_stats(x), *metrics.feature_stats(y))
    assert metrics.frechet_distance_features(x, y) == via_root
    assert metrics._frechet_row_space(x, y) == pytest.approx(via_root, rel=1e-10)
    assert metrics._frechet_row_space(y, x) == pytest.approx(via_root, rel=1e-10)


def test_fd_of_features_with_fewer_rows_than_dimensions_has_closed_forms():
    # singular covariances (n < d), where the matrix root needs its eps fallback
    rng = np.random.default_rng(43)
    x = rng.normal(size=(9, 40))
    shift = rng.normal(size=40)
    tr = np.trace(np.cov(x, rowvar=False))
    # the same rows shifted: FD = |shift|^2; scaled by c about their mean: FD = (1 - c)^2 tr(sigma)
    assert metrics.frechet_distance_features(x, x + shift) == pytest.approx(shift @ shift, rel=1e-12)
    assert metrics.frechet_distance_features(x, x) == pytest.approx(0.0, abs=1e-10)
    c = 2.5
    scaled = x.mean(axis=0) + c * (x - x.mean(axis=0))
    assert metrics.frechet_distance_features(x, scaled) == pytest.approx((1 - c) ** 2 * tr, rel=1e-12)
    # rotating the features leaves FD unchanged
    q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    y = rng.normal(size=(7, 40)) + 0.2
    assert metrics.frechet_distance_features(x @ q, y @ q) == pytest.approx(
        metrics.frechet_distance_features(x, y), rel=1e-10)


def test_fd_of_features_with_fewer_rows_than_dimensions_matches_symmetric_eigh_and_the_eps_root():
    rng = np.random.default_rng(44)
    x, y = rng.normal(size=(10, 30)), 1.3 * rng.normal(size=(14, 30)) + 0.3
    (m1, s1), (m2, s2) = metrics.feature_stats(x), metrics.feature_stats(y)
    # s1 s2 has rank <= 9: its other 21 eigenvalues are zero, and the square roots of their
    # rounding residues (~1e-8 each) would swamp a 1e-10 comparison, so keep the top 9
    w, v = np.linalg.eigh(s1)
    r = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    top = np.sort(np.linalg.eigvalsh(r @ s2 @ r))[-9:]
    exact = np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.sqrt(top).sum()
    got = metrics.frechet_distance_features(x, y)
    assert got == pytest.approx(exact, rel=1e-10)
    # the eps-regularised root is off by O(eps d) at most
    assert metrics.frechet_distance(m1, s1, m2, s2) == pytest.approx(got, abs=1e-3)


def test_fd_of_features_rejects_mismatched_or_bad_features():
    with pytest.raises(OracleError, match="feature dimension"):
        metrics.frechet_distance_features(np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(OracleError, match="at least 2 rows"):
        metrics.frechet_distance_features(np.zeros((1, 4)), np.zeros((3, 4)))
    with pytest.raises(OracleError, match="NaN"):
        metrics.frechet_distance_features(np.full((3, 4), np.nan), np.zeros((3, 4)))


def test_fd_of_samples_converges_to_closed_form():
    rng = np.random.default_rng(5)
    a, b = np.array([1.0, 2.0, 0.5]), np.array([2.0, 0.5, 0.5])
    m2 = np.array([0.5, 0.0, -0.5])
    x = rng.normal(size=(200_000, 3)) * np.sqrt(a)
    y = rng.normal(size=(200_000, 3)) * np.sqrt(b) + m2
    expected = np.sum((np.sqrt(a) - np.sqrt(b)) ** 2) + np.sum(m2 ** 2)
    got = metrics.frechet_distance(*metrics.feature_stats(x), *metrics.feature_stats(y))
    assert got == pytest.approx(expected, abs=0.02)


# ------------------------------------------------------------------ inception score


def inception_score_loop(p: np.ndarray, n_splits: int) -> tuple[float, float]:
    scores = []
    for part in np.array_split(p, n_splits):
        marginal = [sum(row[k] for row in part) / len(part) for k in range(p.shape[1])]
        total = 0.0
        for row in part:
            total += sum(row[k] * math.log(row[k] / marginal[k]) for k in range(p.shape[1]) if row[k] > 0)
        scores.append(math.exp(total / len(part)))
    return float(np.mean(scores)), float(np.std(scores))


def test_inception_score_matches_loop():
    rng = np.random.default_rng(6)
    logits = rng.normal(size=(103, 5)) * 2
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    p[0] = [1, 0, 0, 0, 0]  # exact zeros follow the 0 log 0 = 0 convention
    mean, std = metrics.inception_score(p, n_splits=4)
    ref_mean, ref_std = inception_score_loop(p, 4)
    assert mean == pytest.approx(ref_mean, rel=1e-12)
    assert std == pytest.approx(ref_std, rel=1e-9)


def test_inception_score_closed_forms():
    k = 7
    uniform = np.full((70, k), 1.0 / k)
    assert metrics.inception_score(uniform, n_splits=5) == pytest.approx((1.0, 0.0), abs=1e-12)
    one_hot = np.eye(k)[np.arange(70) % k]  # every split holds each class equally often
    mean, std = metrics.inception_score(one_hot, n_splits=10)
    assert mean == pytest.approx(k, rel=1e-12) and std == pytest.approx(0.0, abs=1e-12)


def test_inception_score_stays_finite_with_subnormal_probabilities():
    # a random-weight or barely trained feature net gives logits far apart: softmax entries of
    # 5e-324, whose mean over a split underflows to 0 (found by the imagenet64 rehearsal: IS inf)
    tiny = np.nextafter(0.0, 1.0)
    one_hot = np.eye(4)[np.arange(12) % 3]  # class 3 never predicted
    p = one_hot.copy()
    p[0, 3] = tiny
    mean, std = metrics.inception_score(p, n_splits=2)
    # the tiny entry adds tiny * log(6) nats: the one-hot score, 3, to the last digit
    assert (mean, std) == pytest.approx((3.0, 0.0), abs=1e-12)
    assert metrics.inception_score(one_hot, n_splits=2) == pytest.approx((mean, std), abs=1e-12)


def test_inception_score_rejects_unnormalized():
    with pytest.raises(OracleError, match="sum to 1"):
        metrics.inception_score(np.ones((10, 3)), n_splits=2)
    with pytest.raises(OracleError, match="n_splits"):
        metrics.inception_score(np.full((3, 2), 0.5), n_splits=5)


# ------------------------------------------------------------------ nearest neighbours


def test_nearest_neighbors_match_sklearn():
    rng = np.random.default_rng(7)
    q, r = rng.normal(size=(37, 5)), rng.normal(size=(53, 5))
    d, i = metrics.nearest_neighbor_distances(q, r, k=3, block_rows=8)
    ref_d, ref_i = NearestNeighbors(n_neighbors=3, algorithm="brute").fit(r).kneighbors(q)
    np.testing.assert_allclose(d, ref_d, rtol=1e-10)
    np.testing.assert_array_equal(i, ref_i)


def test_nearest_neighbors_leave_one_out_matches_sklearn():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(41, 4))
    d, i = metrics.nearest_neighbor_distances(x, x, k=2, exclude_self=True, block_rows=7)
    ref_d, ref_i = NearestNeighbors(n_neighbors=2, algorithm="brute").fit(x).kneighbors()
    np.testing.assert_allclose(d, ref_d, rtol=1e-10)
    np.testing.assert_array_equal(i, ref_i)


def test_nearest_neighbors_exact_for_duplicates_far_from_origin():
    # The |q|^2 + |r|^2 - 2 q.r expansion loses ~1e-4 here; the recomputed distance is exact.
    x = np.full((3, 64), 1e4) + np.arange(3)[:, None]
    d, _ = metrics.nearest_neighbor_distances(x, x, k=1)
    np.testing.assert_array_equal(d[:, 0], 0.0)


# ------------------------------------------------------------------ coverage


def naeem_coverage_brute(real: np.ndarray, fake: np.ndarray, k: int) -> float:
    rr = scipy.spatial.distance.cdist(real, real)
    np.fill_diagonal(rr, np.inf)
    radii = np.sort(rr, axis=1)[:, k - 1]
    rf = scipy.spatial.distance.cdist(real, fake).min(axis=1)
    return float(np.mean(rf <= radii))


def test_coverage_naeem_matches_brute_force():
    rng = np.random.default_rng(9)
    real, fake = rng.normal(size=(120, 3)), rng.normal(size=(90, 3)) * 1.3
    got = metrics.coverage(real, fake, k=3, rule="naeem")
    assert got["coverage"] == pytest.approx(naeem_coverage_brute(real, fake, 3), abs=1e-15)


def test_coverage_naeem_disjoint_clusters_is_zero():
    rng = np.random.default_rng(10)
    real = rng.normal(size=(200, 8))
    fake = rng.normal(size=(200, 8)) + 50.0
    assert metrics.coverage(real, fake, k=5, rule="naeem")["coverage"] == 0.0


@pytest.mark.parametrize("k", [1, 5])
def test_coverage_naeem_same_distribution_matches_exchangeability(k):
    # For i.i.d. real and fake points the k nearest others of a real point are all real with
    # probability C(N-1, k) / C(N-1+M, k), whatever the (continuous) distribution.
    rng = np.random.default_rng(11 + k)
    n = m = 800
    covs = [metrics.coverage(rng.normal(size=(n, 4)), rng.normal(size=(m, 4)), k=k,
                             rule="naeem")["coverage"] for _ in range(3)]
    expected = 1.0 - math.comb(n - 1, k) / math.comb(n - 1 + m, k)
    assert np.mean(covs) == pytest.approx(expected, abs=0.03)
    if k == 5:
        assert np.mean(covs) > 0.9


def test_coverage_adaptive_rule_is_its_quantile_by_construction():
    # The paper's rule: even disjoint clusters get "90% coverage". Documented, tested as such.
    rng = np.random.default_rng(12)
    real, fake = rng.normal(size=(500, 4)), rng.normal(size=(500, 4)) + 50.0
    res = metrics.coverage(real, fake, k=1, quantile=0.9)
    d = scipy.spatial.distance.cdist(real, fake).min(axis=1)
    assert res["threshold"] == pytest.approx(np.quantile(d, 0.9), rel=1e-12)
    assert res["coverage"] == pytest.approx(0.9, abs=0.002)


def test_coverage_adaptive_with_absolute_threshold():
    rng = np.random.default_rng(13)
    real, fake = rng.normal(size=(100, 3)), rng.normal(size=(80, 3))
    d = np.sort(scipy.spatial.distance.cdist(real, fake), axis=1)[:, 1]
    res = metrics.coverage(real, fake, k=2, threshold=0.5)
    assert res["coverage"] == pytest.approx(np.mean(d <= 0.5), abs=1e-15)
    with pytest.raises(OracleError, match="rule"):
        metrics.coverage(real, fake, rule="other")
    with pytest.raises(OracleError, match="threshold"):
        metrics.coverage(real, fake, rule="naeem", threshold=1.0)


# ------------------------------------------------------------------ memorization


def test_memorization_duplicates_and_far_samples():
    rng = np.random.default_rng(14)
    train = rng.normal(size=(300, 16))
    copies = train[rng.choice(300, size=50)]
    res = metrics.memorization(copies, train, threshold=1e-6)
    assert res["rate"] == 1.0 and res["median_nn"] == 0.0
    far = rng.normal(size=(50, 16)) + 100.0
    res = metrics.memorization(far, train, threshold=10.0)
    assert res["rate"] == 0.0
    brute = scipy.spatial.distance.cdist(far, train).min(axis=1)
    np.testing.assert_allclose(res["nn_distances"], brute, rtol=1e-12)
    assert res["median_nn"] == pytest.approx(np.median(brute), rel=1e-12)


def test_calibrated_threshold_matches_brute_force_and_its_nominal_rate():
    rng = np.random.default_rng(15)
    train = rng.normal(size=(1000, 3))
    dd = scipy.spatial.distance.cdist(train, train)
    np.fill_diagonal(dd, np.inf)
    thr = metrics.calibrated_memorization_threshold(train, quantile=0.05)
    assert thr == pytest.approx(np.quantile(dd.min(axis=1), 0.05), rel=1e-12)
    # Fresh i.i.d. samples (no copying) are flagged at about the nominal rate.
    fresh = rng.normal(size=(4000, 3))
    assert metrics.memorization(fresh, train, thr)["rate"] == pytest.approx(0.05, abs=0.015)
    # Copies of training images are always flagged.
    assert metrics.memorization(train[:20], train, thr)["rate"] == 1.0


# ------------------------------------------------------------------ diversity, texture


def test_mean_pairwise_distance_matches_pdist():
    x = np.random.default_rng(16).normal(size=(61, 7))
    assert metrics.mean_pairwise_distance(x, block_rows=9) == pytest.approx(
        scipy.spatial.distance.pdist(x).mean(), rel=1e-10)


def test_diversity_ratios_scaling_closed_form():
    # Shrinking each class around its mean by s scales variance by s^2 and distances by s.
    rng = np.random.default_rng(17)
    real = rng.normal(size=(300, 5)) * 2 + 1
    y = np.arange(300) % 3
    fake = real.copy()
    scales = {0: 1.0, 1: 0.5, 2: 0.8}
    for c, s in scales.items():
        m = real[y == c].mean(axis=0)
        fake[y == c] = m + s * (real[y == c] - m)
    out = metrics.diversity_ratios(real, fake, y, y)
    for c, s in scales.items():
        assert out[c]["variance_ratio"] == pytest.approx(s ** 2, rel=1e-10)
        assert out[c]["pairwise_distance_ratio"] == pytest.approx(s, rel=1e-10)
        assert out[c]["n_real"] == out[c]["n_fake"] == 100


def test_diversity_ratios_against_numpy_and_pdist():
    rng = np.random.default_rng(18)
    real, fake = rng.normal(size=(80, 4)), rng.normal(size=(60, 4)) * 0.7
    yr, yf = rng.integers(0, 2, 80), rng.integers(0, 2, 60)
    out = metrics.diversity_ratios(real, fake, yr, yf)
    for c in (0, 1):
        r, f = real[yr == c], fake[yf == c]
        assert out[c]["variance_ratio"] == pytest.approx(
            np.trace(np.cov(f, rowvar=False)) / np.trace(np.cov(r, rowvar=False)), rel=1e-10)
        assert out[c]["pairwise_distance_ratio"] == pytest.approx(
            scipy.spatial.distance.pdist(f).mean() / scipy.spatial.distance.pdist(r).mean(), rel=1e-10)


def test_diversity_ratios_of_a_class_with_one_row_are_nan_and_leave_the_others_alone():
    """Many classes and few samples (ImageNet at a small validation.n_samples) leave classes
    with one generated sample: those get NaN ratios instead of stopping the validation."""
    rng = np.random.default_rng(20)
    real, fake = rng.normal(size=(40, 4)), rng.normal(size=(21, 4))
    yr, yf = np.arange(40) % 2, np.r_[np.zeros(20, int), 1]
    out = metrics.diversity_ratios(real, fake, yr, yf)
    assert np.isnan(out[1]["variance_ratio"]) and np.isnan(out[1]["pairwise_distance_ratio"])
    assert (out[1]["n_real"], out[1]["n_fake"]) == (20, 1)
    alone = metrics.diversity_ratios(real[yr == 0], fake[yf == 0], yr[yr == 0], yf[yf == 0])
    assert out[0] == alone[0] and np.isfinite(out[0]["variance_ratio"])


def test_laplacian_variance_matches_scipy_and_white_noise_closed_form():
    rng = np.random.default_rng(19)
    x = rng.normal(size=(3, 2, 12, 10))
    lap = np.stack([[scipy.ndimage.laplace(ch)[1:-1, 1:-1] for ch in img] for img in x])
    expected = lap.reshape(3, -1).var(axis=1)
    np.testing.assert_allclose(metrics.laplacian_variance(x, block_rows=2), expected, rtol=1e-12)
    # i.i.d. pixels of std s: Var(L) = (1+1+1+1+16) s^2 = 20 s^2
    noise = rng.normal(scale=0.1, size=(4, 3, 64, 64))
    assert metrics.laplacian_variance(noise).mean() == pytest.approx(20 * 0.01, rel=0.02)


def test_texture_ratio_uint8_and_smoothing():
    rng = np.random.default_rng(20)
    real_u8 = rng.integers(0, 256, size=(20, 3, 16, 16), dtype=np.uint8)
    real = real_u8.astype(np.float64) / 127.5 - 1
    y = np.arange(20) % 2
    same = metrics.texture_variance_ratio(real_u8, real, y, y)
    assert same[0]["texture_variance_ratio"] == pytest.approx(1.0, rel=1e-12)
    half = metrics.texture_variance_ratio(real, 0.5 * real, y, y)  # linear: ratio 0.25 exactly
    assert half[1]["texture_variance_ratio"] == pytest.approx(0.25, rel=1e-12)
    blurred = scipy.ndimage.gaussian_filter(real, sigma=(0, 0, 1, 1))
    assert metrics.texture_variance_ratio(real, blurred, y, y)[0]["texture_variance_ratio"] < 0.2


# ------------------------------------------------------------------ posterior stability


def logistic_log_post(w: torch.Tensor):
    def fn(x: torch.Tensor) -> torch.Tensor:
        a = x.to(torch.float64) @ w
        return torch.stack([torch.nn.functional.logsigmoid(-a), torch.nn.functional.logsigmoid(a)], 1)
    return fn


def test_posterior_stability_matches_brute_force_and_second_order():
    torch.manual_seed(0)
    n, d, s = 3000, 6, 1e-3
    w = torch.randn(d, dtype=torch.float64)
    x = torch.randn(n, d, dtype=torch.float64) * 0.3
    fn = logistic_log_post(w)
    res = density_checks.posterior_stability(fn, x, s, torch.Generator().manual_seed(1), batch_size=700)
    # brute force: same noise, redrawn batch by batch, KL of two Bernoullis by hand
    g = torch.Generator().manual_seed(1)
    kls = []
    for start in range(0, n, 700):
        xb = x[start:start + 700]
        eps = torch.randn(xb.shape, generator=g, dtype=xb.dtype)
        for xi, ei in zip(xb.numpy(), eps.numpy()):
            p = 1 / (1 + math.exp(-(xi @ w.numpy())))
            q = 1 / (1 + math.exp(-((xi + s * ei) @ w.numpy())))
            kls.append(p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q)))
    assert res["mean_kl"] == pytest.approx(np.mean(kls), rel=1e-6)
    assert res["se"] == pytest.approx(np.std(kls, ddof=1) / math.sqrt(n), rel=1e-6)
    # second order: KL ~ p(1-p) delta^2 / 2 with delta ~ N(0, s^2 |w|^2)
    p = torch.sigmoid(x @ w)
    expected = 0.5 * s ** 2 * float(w @ w) * float((p * (1 - p)).mean())
    assert res["mean_kl"] == pytest.approx(expected, rel=0.1)


def test_posterior_stability_zero_noise_and_determinism():
    w = torch.randn(3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    x = torch.randn(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    fn = logistic_log_post(w)
    assert density_checks.posterior_stability(fn, x, 0.0)["mean_kl"] == 0.0
    a = density_checks.posterior_stability(fn, x, 0.1, torch.Generator().manual_seed(4))
    b = density_checks.posterior_stability(fn, x, 0.1, torch.Generator().manual_seed(4))
    assert a == b and a["mean_kl"] > 0
    with pytest.raises(OracleError, match="noise_std"):
        density_checks.posterior_stability(fn, x, -1.0)


# ------------------------------------------------------------------ bits per dim


def test_bits_per_dim_standard_gaussian_both_scales():
    rng = np.random.default_rng(21)
    n, d = 4000, 48
    x = rng.normal(size=(n, d))
    log_p = scipy.stats.norm.logpdf(x).sum(axis=1)
    # [-1, 1] scale: the entropy of N(0, 1) per dimension, 0.5 log2(2 pi e)
    res = density_checks.bits_per_dim(log_p, d)
    assert res["bpd"] == pytest.approx(0.5 * math.log2(2 * math.pi * math.e), abs=4 * res["se"])
    # pixel scale u = 127.5 (x + 1) ~ N(127.5, 127.5^2): evaluate that density directly
    u = 127.5 * (x + 1)
    direct = -scipy.stats.norm(127.5, 127.5).logpdf(u).sum(axis=1) / (d * math.log(2))
    res_u = density_checks.bits_per_dim(log_p, d, density_checks.uint8_scale_log_det(d))
    assert res_u["bpd"] == pytest.approx(direct.mean(), rel=1e-12)
    assert res_u["bpd"] - res["bpd"] == pytest.approx(math.log2(127.5), rel=1e-12)


def test_bits_per_dim_rejects_bad_input():
    with pytest.raises(OracleError, match="NaN"):
        density_checks.bits_per_dim(np.array([0.0, np.nan]), 4)
    with pytest.raises(OracleError, match="D="):
        density_checks.bits_per_dim(np.zeros(3), 0)


# ------------------------------------------------------------------ split consistency


def test_split_flag_rule_on_paper_numbers():
    # SVHN-split-mismatch Table 1: SVHN is flagged, SVHN-Remix and CIFAR-10 are not.
    assert split_consistency.split_mismatch_flag(3.309, 0.029, 16.687, 0.325)
    assert not split_consistency.split_mismatch_flag(3.334, 0.018, 3.326, 0.015)
    assert not split_consistency.split_mismatch_flag(5.196, 0.040, 5.206, 0.031)


def test_split_consistency_detects_shifted_test_set():
    rng = np.random.default_rng(22)
    train = rng.normal(size=(1200, 4))
    test_same = rng.normal(size=(600, 4))
    test_shift = rng.normal(size=(600, 4)) * np.array([1, 1, 1, 0.3])  # "simpler" test set
    oracle = rng.normal(size=(600, 4))
    ok = split_consistency.split_consistency(train, test_same, oracle, n_seeds=5, subset_size=500, seed=1)
    bad = split_consistency.split_consistency(train, test_shift, None, n_seeds=5, subset_size=500, seed=1)
    assert not ok["test_mismatch"] and not ok["oracle_mismatch"]
    assert bad["test_mismatch"] and bad["test_ratio"] > 5
    assert "fd_train_oracle" not in bad
    assert len(ok["fd_train_train"]["values"]) == 5
    # the reference value of seed 0 is an FD between two disjoint halves-sized subsets
    assert ok["fd_train_train"] == bad["fd_train_train"]
    again = split_consistency.split_consistency(train, test_same, oracle, n_seeds=5, subset_size=500, seed=1)
    assert again == ok
    with pytest.raises(OracleError, match="subset_size"):
        split_consistency.split_consistency(train, test_same, oracle, subset_size=601)
