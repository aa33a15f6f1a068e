"""Calibration metrics against brute-force loops, scikit-learn and hand-built cases."""

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
    pointwise_calibration_errors,
    reliability_curve,
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


def test_reliability_curve_matches_sklearn_calibration_curve():
    rng = np.random.default_rng(2)
    probs = _random_probs(rng, 2000, 5)
    labels = rng.integers(0, 5, size=2000)
    curve = reliability_curve(probs, labels, 10)
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
