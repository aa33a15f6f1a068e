"""Calibration metrics: ECE against labels, calibration against the exact posterior, Brier.

Conventions
-----------
* ``probs`` are predicted class probabilities, array-like ``[n, K]`` (numpy or torch),
  rows summing to 1. ``labels`` are integer classes ``[n]``.
* Top-label calibration: the confidence of a prediction is ``max_k q_k(x)`` and the predicted
  class is ``argmax_k q_k(x)`` (ties go to the lowest index, as ``numpy.argmax``).
* Binning follows Guo et al. (2017) and the calibration seed: ``n_bins`` equal-width bins on
  [0, 1], right-closed ``(lo, hi]`` (the first bin also holds 0); edges come from
  ``numpy.linspace`` and assignment from ``numpy.searchsorted``, the same rule as
  ``sklearn.calibration.calibration_curve(strategy="uniform")``.

Two kinds of calibration error
------------------------------
``expected_calibration_error`` compares confidence with the observed 0/1 correctness of the
given labels. On ordinary benchmarks that is all one can do; its value carries the sampling
noise of the labels (and a positive bias from it in sparsely filled bins).

``true_calibration_error`` needs the oracle: it replaces the correctness indicator of each
sample by its conditional expectation ``p(yhat | x)`` under the true posterior. Binned, it is
the ECE one would get with infinitely many labels per input (no label noise); unbinned
(``n_bins=None``) it is the pointwise error ``E_x |max q(x) - p(argmax q(x) | x)|``, which upper
bounds every binned version (Jensen). When the labels are draws from the world's posterior
p_T(y|x) (the world's label, DESIGN rule 8) the label ECE estimates the binned true
calibration error, with label noise on top; the class a sample was drawn from is such a draw
only at T = 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from oracle.errors import OracleError

__all__ = [
    "expected_calibration_error",
    "true_calibration_error",
    "pointwise_calibration_errors",
    "brier_score",
    "brier_per_sample",
    "expected_brier_score",
    "reliability_bins",
    "pool_reliability",
    "overconfidence",
    "bin_indices",
]


def _as_probs(probs, name: str = "probs") -> np.ndarray:
    """Return ``probs`` as a float64 numpy array [n, K], checked to be a probability matrix."""
    if hasattr(probs, "detach"):
        probs = probs.detach().cpu().numpy()
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] == 0 or p.shape[1] < 2:
        raise OracleError(f"{name}: expected a [n, K] array with n >= 1 and K >= 2, got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise OracleError(f"{name}: contains NaN or Inf")
    if p.min() < -1e-9 or np.abs(p.sum(axis=1) - 1.0).max() > 1e-4:
        raise OracleError(
            f"{name}: rows must be probabilities (>= 0, summing to 1); "
            f"min {p.min():.3g}, worst row sum deviation {np.abs(p.sum(axis=1) - 1.0).max():.3g}"
        )
    return p


def _as_labels(labels, n: int, k: int) -> np.ndarray:
    if hasattr(labels, "detach"):
        labels = labels.detach().cpu().numpy()
    y = np.asarray(labels)
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise OracleError(f"labels: expected an integer array of shape ({n},), got {y.dtype} {y.shape}")
    if y.min() < 0 or y.max() >= k:
        raise OracleError(f"labels: values must lie in [0, {k}), got range [{y.min()}, {y.max()}]")
    return y.astype(np.int64)


def _check_bins(n_bins: int) -> None:
    if not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise OracleError(f"n_bins: expected a positive integer, got {n_bins!r}")


def bin_indices(confidence: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """Bin index in ``[0, n_bins)`` of each confidence in [0, 1]; bins are right-closed (lo, hi]."""
    _check_bins(n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return np.searchsorted(edges[1:-1], np.asarray(confidence, dtype=np.float64), side="left")


def _top_label(probs, labels, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Validated inputs -> (confidence of the predicted class [n], 1.0 where it is correct [n])."""
    p = _as_probs(probs)
    y = _as_labels(labels, p.shape[0], p.shape[1])
    _check_bins(n_bins)
    pred = p.argmax(axis=1)
    return p[np.arange(p.shape[0]), pred], (pred == y).astype(np.float64)


def _binned_gap(conf: np.ndarray, target: np.ndarray, n_bins: int) -> float:
    """sum_b |B_b|/n * |mean(conf in b) - mean(target in b)|."""
    idx = bin_indices(conf, n_bins)
    n = conf.shape[0]
    sum_conf = np.bincount(idx, weights=conf, minlength=n_bins)
    sum_target = np.bincount(idx, weights=target, minlength=n_bins)
    # |B|/n * |sum_conf/|B| - sum_target/|B|| = |sum_conf - sum_target| / n; empty bins give 0.
    return float(np.abs(sum_conf - sum_target).sum() / n)


def expected_calibration_error(probs, labels, n_bins: int = 10) -> float:
    """Top-label ECE with ``n_bins`` equal-width bins, against observed labels.

    ``ECE = sum_b |B_b|/n * |acc(B_b) - conf(B_b)|`` (Guo et al., 2017).

    Args:
        probs: predicted probabilities [n, K].
        labels: integer labels [n] the predictions are scored against.
        n_bins: number of equal-width confidence bins on [0, 1].
    Returns:
        ECE as a float in [0, 1] (a probability, not a percentage).
    """
    conf, correct = _top_label(probs, labels, n_bins)
    return _binned_gap(conf, correct, n_bins)


def _confidence_and_truth(probs_q, probs_p) -> tuple[np.ndarray, np.ndarray]:
    """(max_k q_k(x), p(argmax_k q_k(x) | x)), each [n], from validated q and p."""
    q = _as_probs(probs_q, "probs_q")
    p = _as_probs(probs_p, "probs_p")
    if p.shape != q.shape:
        raise OracleError(f"probs_p: shape {p.shape} does not match probs_q {q.shape}")
    pred = q.argmax(axis=1)
    rows = np.arange(q.shape[0])
    return q[rows, pred], p[rows, pred]


def pointwise_calibration_errors(probs_q, probs_p) -> np.ndarray:
    """Per-sample ``|max_k q_k(x) - p(argmax_k q_k(x) | x)|`` [n] (needs the true posterior p)."""
    conf, truth = _confidence_and_truth(probs_q, probs_p)
    return np.abs(conf - truth)


def true_calibration_error(probs_q, probs_p, n_bins: int | None = 10) -> float:
    """Top-label calibration of q measured against the exact posterior p (oracle only).

    Args:
        probs_q: model probabilities [n, K].
        probs_p: true posterior probabilities [n, K] at the same inputs.
        n_bins: ``int``: binned like ECE, with the 0/1 correctness replaced by its exact
            expectation ``p(argmax q | x)``, i.e. ``sum_b |B_b|/n |conf(B_b) - E[p(yhat|x)](B_b)|``;
            ``None``: the pointwise version ``mean_x |max q(x) - p(argmax q(x) | x)|``.
    Returns:
        The calibration error as a float in [0, 1].
    """
    if n_bins is None:
        return float(pointwise_calibration_errors(probs_q, probs_p).mean())
    _check_bins(n_bins)
    return _binned_gap(*_confidence_and_truth(probs_q, probs_p), n_bins)


def brier_per_sample(probs, labels) -> np.ndarray:
    """Per-sample multi-class Brier score ``sum_k (q_k - 1[y = k])^2`` [n], in [0, 2]."""
    p = _as_probs(probs)
    y = _as_labels(labels, p.shape[0], p.shape[1])
    rows = np.arange(p.shape[0])
    # sum_k q_k^2 - 2 q_y + 1 avoids materialising the one-hot matrix.
    return (p * p).sum(axis=1) - 2.0 * p[rows, y] + 1.0


def brier_score(probs, labels) -> float:
    """Multi-class Brier score ``mean_i sum_k (q_ik - 1[y_i = k])^2`` (range [0, 2])."""
    return float(brier_per_sample(probs, labels).mean())


def expected_brier_score(probs_q, probs_p) -> np.ndarray:
    """Per-sample Brier score in expectation over ``y ~ p(y|x)`` [n] (oracle only).

    ``E_y ||q - e_y||^2 = ||q - p||^2 + (1 - ||p||^2)``: a reducible part plus the Brier
    analogue of the aleatoric floor. Returned per sample so callers can attach a standard error.
    """
    q = _as_probs(probs_q, "probs_q")
    p = _as_probs(probs_p, "probs_p")
    if p.shape != q.shape:
        raise OracleError(f"probs_p: shape {p.shape} does not match probs_q {q.shape}")
    return ((q - p) ** 2).sum(axis=1) + 1.0 - (p * p).sum(axis=1)


def reliability_bins(probs, labels, n_bins: int = 10, probs_p=None) -> dict[str, np.ndarray]:
    """The data of a top-label reliability diagram, bin by bin (arrays of length n_bins;
    equal-width bins, right-closed as in `bin_indices`).

    ``lower``, ``upper``: bin edges; ``count``: predictions in the bin (int64);
    ``confidence``: their mean max_k q_k(x); ``accuracy``: the fraction whose predicted class
    is the label (what a benchmark can see). With the exact posterior ``probs_p`` also
    ``true_probability``: the mean of p(argmax q | x), what the accuracy estimates (the same
    bins with infinitely many labels per input). Empty bins are NaN. Several classifiers
    (seeds) are pooled by `pool_reliability`.
    """
    conf, correct = _top_label(probs, labels, n_bins)
    idx = bin_indices(conf, n_bins)
    count = np.bincount(idx, minlength=n_bins)

    def mean(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, np.bincount(idx, weights=values, minlength=n_bins) / count, np.nan)

    edges = np.linspace(0.0, 1.0, n_bins + 1)
    out = {"lower": edges[:-1], "upper": edges[1:], "count": count.astype(np.int64),
           "confidence": mean(conf), "accuracy": mean(correct)}
    if probs_p is not None:
        out["true_probability"] = mean(_confidence_and_truth(probs, probs_p)[1])
    return out


def pool_reliability(bins: Sequence[Mapping]) -> dict[str, np.ndarray]:
    """Several `reliability_bins` of the same n_bins pooled into one: counts added, the means
    count-weighted (None or NaN in an empty bin is fine). Keys as in `reliability_bins`; a
    key only some inputs have is dropped."""
    if not bins:
        raise OracleError("pool_reliability: no reliability data")
    if len({len(b["count"]) for b in bins}) != 1:
        raise OracleError("pool_reliability: the inputs have different numbers of bins")
    counts = np.array([np.asarray(b["count"], dtype=np.float64) for b in bins])
    total = counts.sum(axis=0)
    n_bins = counts.shape[1]
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    out = {"lower": edges[:-1], "upper": edges[1:], "count": total.astype(np.int64)}
    for key in ("confidence", "accuracy", "true_probability"):
        if not all(key in b for b in bins):
            continue
        values = np.array([np.asarray(b[key], dtype=np.float64) for b in bins])  # None -> nan
        weighted = np.where(counts > 0, values, 0.0) * counts
        with np.errstate(invalid="ignore", divide="ignore"):
            out[key] = np.where(total > 0, weighted.sum(axis=0) / total, np.nan)
    return out


def overconfidence(probs, labels=None, probs_p=None) -> float:
    """Mean confidence minus accuracy (positive: overconfident; a probability difference).

    Against ``labels`` [n] the accuracy is the observed fraction correct; against the exact
    posterior ``probs_p`` [n, K] it is the mean of p(argmax q | x), the accuracy expected over
    the labels. Exactly one of the two must be given.
    """
    if (labels is None) == (probs_p is None):
        raise OracleError("overconfidence: give labels or probs_p (exactly one)")
    if labels is not None:
        conf, correct = _top_label(probs, labels, 1)
        return float(conf.mean() - correct.mean())
    conf, truth = _confidence_and_truth(probs, probs_p)
    return float(conf.mean() - truth.mean())
