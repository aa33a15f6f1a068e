"""Calibration metrics against brute-force loops, scikit-learn, torchmetrics, hand-built cases
and the closed-form posterior of a Gaussian world."""

import numpy as np
import pytest
import torch
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from oracle.measures.calibration import (
    bin_indices,
    brier_per_sample,
    brier_score,
    expected_brier_score,
    expected_calibration_error,
    overconfidence,
    pointwise_calibration_errors,
    pool_reliability,
    reliability_bins,
    true_calibration_error,
)
from oracle.errors import OracleError


def _random_probs(rng, n, k, concentration=0.5):
    return rng.dirichlet(np.full(k, concentration), size=n)


def _ece_loop(probs, labels, n_bins):
    """Textbook ECE: explicit loop over bins (lo, hi], the first bin closed at 0."""
    n = len(labels)
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = []
        for i in range(n):
            c = max(probs[i])
            if (lo < c <= hi) or (b == 0 and c == 0.0):
                members.append(i)
        if not members:
            continue
        conf = sum(max(probs[i]) for i in members) / len(members)
        acc = sum(int(np.argmax(probs[i]) == labels[i]) for i in members) / len(members)
        total += len(members) / n * abs(acc - conf)
    return total


@pytest.mark.parametrize("n_bins", [1, 5, 10, 15])
def test_ece_matches_brute_force_loop(n_bins):
    rng = np.random.default_rng(n_bins)
    probs = _random_probs(rng, 300, 4)
    labels = rng.integers(0, 4, size=300)
    assert expected_calibration_error(probs, labels, n_bins) == pytest.approx(
        _ece_loop(probs, labels, n_bins), abs=1e-12
    )


def test_ece_accepts_torch_tensors():
    rng = np.random.default_rng(0)
    probs = _random_probs(rng, 50, 3)
    labels = rng.integers(0, 3, size=50)
    a = expected_calibration_error(probs, labels)
    b = expected_calibration_error(torch.from_numpy(probs), torch.from_numpy(labels))
    assert a == b


def test_perfectly_calibrated_predictions_have_ece_near_zero():
    # Labels drawn from the predicted distribution itself: calibrated by construction.
    rng = np.random.default_rng(1)
    n, k = 100_000, 3
    probs = _random_probs(rng, n, k, concentration=0.7)
    u = rng.random(n)[:, None]
    labels = (u > np.cumsum(probs, axis=1)).sum(axis=1)
    ece = expected_calibration_error(probs, labels, 10)
    # Per bin |acc - conf| ~ sqrt(c(1-c)/|B|), so ECE <~ 0.5 * sqrt(n_bins / n) = 0.005.
    assert ece < 0.01
    # The oracle version needs no labels and is exactly zero for q = p.
    assert true_calibration_error(probs, probs, 10) == 0.0
    assert true_calibration_error(probs, probs, None) == 0.0


def test_ece_detects_known_overconfidence():
    # Confidence 0.9 everywhere but 70% correct: ECE = |0.7 - 0.9| = 0.2.
    n = 1000
    probs = np.tile([0.9, 0.05, 0.05], (n, 1))
    labels = np.zeros(n, dtype=np.int64)
    labels[700:] = 1
    assert expected_calibration_error(probs, labels) == pytest.approx(0.2, abs=1e-12)


def test_always_confident_and_wrong():
    n = 40
    probs = np.tile([0.0, 1.0, 0.0], (n, 1))
    labels = np.zeros(n, dtype=np.int64)
    assert expected_calibration_error(probs, labels) == pytest.approx(1.0, abs=1e-15)
    probs = np.tile([0.9, 0.05, 0.05], (n, 1))
    labels = np.full(n, 2)
    assert expected_calibration_error(probs, labels) == pytest.approx(0.9, abs=1e-12)
    assert brier_score(probs, labels) == pytest.approx(0.81 + 0.0025 + 0.9025, abs=1e-12)


def test_bins_are_right_closed_like_sklearn():
    conf = np.array([0.0, 0.1, 0.1000001, 0.5, 0.55, 1.0])
    assert bin_indices(conf, 10).tolist() == [0, 0, 1, 4, 5, 9]


def test_reliability_bins_match_sklearn_calibration_curve():
    rng = np.random.default_rng(2)
    probs = _random_probs(rng, 2000, 5)
    labels = rng.integers(0, 5, size=2000)
    curve = reliability_bins(probs, labels, 10)
    assert "true_probability" not in curve
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == labels).astype(int)
    prob_true, prob_pred = calibration_curve(correct, conf, n_bins=10, strategy="uniform")
    filled = curve["count"] > 0
    assert curve["count"].sum() == 2000
    np.testing.assert_allclose(curve["accuracy"][filled], prob_true, atol=1e-12)
    np.testing.assert_allclose(curve["confidence"][filled], prob_pred, atol=1e-12)
    assert np.all(np.isnan(curve["accuracy"][~filled]))
    # ECE is the count-weighted gap of the curve.
    gap = np.nansum(curve["count"] * np.abs(curve["accuracy"] - curve["confidence"])) / 2000
    assert expected_calibration_error(probs, labels, 10) == pytest.approx(gap, abs=1e-12)


def test_true_calibration_error_against_loops():
    rng = np.random.default_rng(3)
    q = _random_probs(rng, 500, 4)
    p = _random_probs(rng, 500, 4)
    pred = q.argmax(axis=1)
    pointwise = np.mean([abs(q[i, pred[i]] - p[i, pred[i]]) for i in range(500)])
    assert true_calibration_error(q, p, None) == pytest.approx(pointwise, abs=1e-12)
    np.testing.assert_allclose(pointwise_calibration_errors(q, p).mean(), pointwise, atol=1e-12)
    # Binned: ECE loop with the 0/1 correctness replaced by p(yhat|x).
    total = 0.0
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        members = [i for i in range(500) if lo < q[i].max() <= hi]
        if members:
            conf = np.mean([q[i].max() for i in members])
            truth = np.mean([p[i, pred[i]] for i in members])
            total += len(members) / 500 * abs(conf - truth)
    binned = true_calibration_error(q, p, 10)
    assert binned == pytest.approx(total, abs=1e-12)
    assert binned <= pointwise + 1e-15  # Jensen: binning can only hide error


def test_label_ece_estimates_true_calibration_error_when_labels_follow_p():
    rng = np.random.default_rng(4)
    n = 200_000
    p = _random_probs(rng, n, 3, concentration=1.0)
    # A miscalibrated model: sharpened posterior.
    q = p**2 / (p**2).sum(axis=1, keepdims=True)
    labels = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    assert expected_calibration_error(q, labels) == pytest.approx(true_calibration_error(q, p), abs=0.01)
    assert true_calibration_error(q, p) > 0.05


def test_brier_against_one_hot_loop_and_sklearn():
    rng = np.random.default_rng(5)
    probs = _random_probs(rng, 400, 4)
    labels = rng.integers(0, 4, size=400)
    onehot = np.eye(4)[labels]
    assert brier_score(probs, labels) == pytest.approx(((probs - onehot) ** 2).sum(axis=1).mean(), abs=1e-12)
    # Binary: the multi-class score sums both classes, twice sklearn's binary score.
    p2 = _random_probs(rng, 400, 2)
    y2 = rng.integers(0, 2, size=400)
    assert brier_score(p2, y2) == pytest.approx(2 * brier_score_loss(y2, p2[:, 1]), abs=1e-12)


def test_expected_brier_equals_enumeration_over_labels():
    rng = np.random.default_rng(6)
    q = _random_probs(rng, 100, 3)
    p = _random_probs(rng, 100, 3)
    enumerated = sum(p[:, k] * brier_per_sample(q, np.full(100, k)) for k in range(3))
    np.testing.assert_allclose(expected_brier_score(q, p), enumerated, atol=1e-12)


@pytest.mark.parametrize(
    "probs, labels",
    [
        (np.ones((3, 3)) / 3, np.array([0, 1, 3])),  # label out of range
        (np.ones((3, 3)), np.array([0, 1, 2])),  # rows do not sum to 1
        (np.ones(3) / 3, np.array([0])),  # not 2-D
        (np.ones((3, 3)) / 3, np.array([0.0, 1.0, 2.0])),  # float labels
        (np.full((2, 2), np.nan), np.array([0, 1])),
    ],
)
def test_bad_input_raises(probs, labels):
    with pytest.raises(OracleError):
        expected_calibration_error(probs, labels)


def test_bad_bins_and_shape_mismatch_raise():
    p = np.ones((4, 2)) / 2
    with pytest.raises(OracleError, match="n_bins"):
        expected_calibration_error(p, np.zeros(4, dtype=int), n_bins=0)
    with pytest.raises(OracleError, match="probs_p"):
        true_calibration_error(p, np.ones((4, 3)) / 3)


@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_ece_matches_torchmetrics(n_bins):
    """An independent implementation. Random Dirichlet confidences never sit exactly on a bin
    edge, where torchmetrics' [lo, hi) bins and ours (lo, hi] would legitimately differ, nor at
    exactly 1.0, which torchmetrics counts in an extra bin of its own (its issue #3510)."""
    from torchmetrics.classification import MulticlassCalibrationError

    rng = np.random.default_rng(10 + n_bins)
    probs = _random_probs(rng, 3000, 6, concentration=0.3)
    labels = rng.integers(0, 6, size=3000)
    metric = MulticlassCalibrationError(num_classes=6, n_bins=n_bins, norm="l1")
    theirs = float(metric(torch.from_numpy(probs), torch.from_numpy(labels)))
    # torchmetrics accumulates its bins in float32: a float32 tolerance.
    assert expected_calibration_error(probs, labels, n_bins) == pytest.approx(theirs, abs=2e-6)


def test_confidence_exactly_one_is_in_the_last_bin():
    # Guo et al.'s last bin is closed at 1; torchmetrics counts 1.0 in a bin of its own
    # (issue #3510), which changes the ECE whenever the last bin holds other predictions too.
    probs = np.array([[0.95, 0.05], [1.0, 0.0]])
    labels = np.array([0, 1])
    # One bin (0.9, 1]: mean confidence 0.975, accuracy 0.5.
    assert expected_calibration_error(probs, labels, 10) == pytest.approx(0.475, abs=1e-15)
    assert _ece_loop(probs, labels, 10) == pytest.approx(0.475, abs=1e-15)
    assert bin_indices(np.array([1.0]), 10).tolist() == [9]


def test_reliability_bins_true_probability_against_a_loop():
    rng = np.random.default_rng(7)
    q = _random_probs(rng, 400, 3)
    p = _random_probs(rng, 400, 3)
    labels = rng.integers(0, 3, size=400)
    bins = reliability_bins(q, labels, 10, probs_p=p)
    pred = q.argmax(axis=1)
    for b in range(10):
        members = [i for i in range(400) if b / 10 < q[i].max() <= (b + 1) / 10]
        assert bins["count"][b] == len(members)
        if members:
            assert bins["true_probability"][b] == pytest.approx(np.mean([p[i, pred[i]] for i in members]), abs=1e-12)
            assert bins["accuracy"][b] == pytest.approx(np.mean([pred[i] == labels[i] for i in members]), abs=1e-12)
        else:
            assert np.isnan(bins["true_probability"][b])
    # The binned true calibration error is the count-weighted gap of these bins.
    filled = bins["count"] > 0
    gap = (bins["count"][filled] * np.abs(bins["confidence"][filled] - bins["true_probability"][filled])).sum() / 400
    assert true_calibration_error(q, p, 10) == pytest.approx(gap, abs=1e-12)


def test_pooled_bins_equal_the_bins_of_the_pooled_predictions():
    rng = np.random.default_rng(8)
    parts = [(_random_probs(rng, n, 4), _random_probs(rng, n, 4), rng.integers(0, 4, size=n)) for n in (50, 300, 7)]
    pooled = pool_reliability([reliability_bins(q, y, 10, probs_p=p) for q, p, y in parts])
    direct = reliability_bins(*(np.concatenate([part[i] for part in parts]) for i in (0, 2)), 10,
                              probs_p=np.concatenate([part[1] for part in parts]))
    for key in ("count", "confidence", "accuracy", "true_probability"):
        np.testing.assert_allclose(pooled[key], direct[key], atol=1e-12, equal_nan=True)
    # JSON form (None for empty bins) pools the same way; a key missing in one input is dropped.
    as_json = [{k: [None if isinstance(v, float) and np.isnan(v) else v for v in np.asarray(a).tolist()]
                for k, a in reliability_bins(q, y, 10, probs_p=p).items()} for q, p, y in parts]
    np.testing.assert_allclose(pool_reliability(as_json)["accuracy"], direct["accuracy"], atol=1e-12, equal_nan=True)
    assert "true_probability" not in pool_reliability([as_json[0], reliability_bins(*parts[1][::2], 10)])
    with pytest.raises(OracleError, match="bins"):
        pool_reliability([reliability_bins(*parts[0][::2], 10), reliability_bins(*parts[1][::2], 5)])


def test_overconfidence_against_labels_and_truth():
    rng = np.random.default_rng(9)
    q = _random_probs(rng, 200, 3)
    p = _random_probs(rng, 200, 3)
    y = rng.integers(0, 3, size=200)
    pred = q.argmax(axis=1)
    conf = q.max(axis=1)
    assert overconfidence(q, labels=y) == pytest.approx(conf.mean() - (pred == y).mean(), abs=1e-12)
    assert overconfidence(q, probs_p=p) == pytest.approx(conf.mean() - p[np.arange(200), pred].mean(), abs=1e-12)
    with pytest.raises(OracleError, match="exactly one"):
        overconfidence(q)
    with pytest.raises(OracleError, match="exactly one"):
        overconfidence(q, labels=y, probs_p=p)


def test_true_calibration_error_on_a_gaussian_world_against_quadrature():
    """Two isotropic Gaussian classes: p(1|x) = sigmoid(Delta t) with t the coordinate along
    the means (N(+-Delta/2, 1)). A model q = softmax(beta log p) (overconfident for beta > 1)
    picks the same class, so its true calibration error is E_t |sigmoid(beta Delta |t|) -
    sigmoid(Delta |t|)|: a 1-D integral. The Monte Carlo value from samples of the world, with
    the posterior computed by the pipeline's own code, must match it within 4 standard errors."""
    from scipy import integrate, special, stats

    from oracle.posterior import log_likelihoods, log_posterior
    from oracle.worlds import GaussianWorld, simplex_means

    beta, n = 2.5, 40_000
    world = GaussianWorld(simplex_means(2, 6, distance=2.0, seed=0), std=1.0)
    x, _ = world.sample(n, generator=torch.Generator().manual_seed(0))
    log_p = log_posterior(log_likelihoods(world, x), world.prior)
    p = log_p.exp().numpy()
    q = torch.softmax(beta * log_p, dim=1).numpy()
    errors = pointwise_calibration_errors(q, p)
    delta = 2.0 / world.sigma

    def integrand(t: float) -> float:
        dens = 0.5 * stats.norm.pdf(t - delta / 2) + 0.5 * stats.norm.pdf(t + delta / 2)
        return dens * (special.expit(beta * delta * abs(t)) - special.expit(delta * abs(t)))

    exact = sum(integrate.quad(integrand, a, b, epsabs=1e-13)[0] for a, b in ((-np.inf, 0.0), (0.0, np.inf)))
    se = errors.std(ddof=1) / np.sqrt(n)
    assert abs(errors.mean() - exact) < 4 * se
    assert exact > 0.05  # the test can fail: beta = 1 would give 0
    # Overconfident everywhere, so the truth-based overconfidence equals the pointwise error.
    assert overconfidence(q, probs_p=p) == pytest.approx(errors.mean(), abs=1e-12)
