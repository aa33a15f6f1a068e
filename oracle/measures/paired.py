"""Differences of two classifiers scored on the same test rows, paired per row.

Two classifiers scored on one test set share its sampling error: a row that is hard for one is
hard for the other, so their per-row values are positively correlated and the SE of the
difference of their means, ``sqrt(se_a^2 + se_b^2)`` taken unpaired, is an upper bound. The
difference of the two means is the mean over rows of ``d_i = a_i - b_i``; its SE is the sample
SE of the ``d_i``, which carries the correlation.
"""

from __future__ import annotations

import numpy as np

from oracle.decomposition import mean_se, per_sample_terms
from oracle.errors import DataError

#: Per-row values of a classifier on a test row (`row_values`): correctness against the
#: world's label (0 or 1), the epistemic KL(p || q) (nats) and the Bayes gap max_y p(y|x) -
#: correctness (fraction).
ROW_VALUES = ("acc", "epistemic", "bayes_gap")


def row_values(log_q: np.ndarray, log_p: np.ndarray, labels: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row values whose means are a classifier's ``acc``, ``epistemic`` and ``bayes_gap``
    metrics (`oracle.classifiers.evaluate.evaluate_predictions`).

    Args:
        log_q: model log-probabilities, float [n, K].
        log_p: the world's log-posteriors at the same rows, float [n, K].
        labels: int [n], the world's labels of the rows.
    Returns:
        ``{"acc": [argmax q == y] float64 [n], "epistemic": KL(p || q) float64 [n] in nats,
        "bayes_gap": max_y p(y|x) - [argmax q == y] float64 [n]}`` (argmax ties go to the
        lowest class, as `oracle.decomposition.accuracy`).
    """
    lq = np.asarray(log_q, dtype=np.float64)
    y = np.asarray(labels)
    if y.shape != (lq.shape[0],) or not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"labels: expected integer classes of shape ({lq.shape[0]},), got {y.dtype} {y.shape}")
    kl = per_sample_terms(log_p, lq)["epistemic"].numpy()
    acc = (lq.argmax(axis=1) == y).astype(np.float64)
    return {"acc": acc, "epistemic": kl, "bayes_gap": np.exp(np.asarray(log_p, np.float64).max(axis=1)) - acc}


def paired_difference(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """``{"mean", "se", "n"}`` of ``a - b`` over rows: the mean difference and its SE
    ``std(a - b, ddof=1) / sqrt(n)`` paired per row; `a` and `b` float [n], one value per test
    row of each classifier, in the same row order."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise DataError(f"paired difference: per-row values of shapes {a.shape} and {b.shape}; expected equal [n]")
    return {**mean_se(a - b), "n": int(a.size)}
