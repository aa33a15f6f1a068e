"""Training-time distribution shift of a classifier's training set (paper appendix F.2).

(A) Label-prior shift: class counts ``(n_1, ..., n_K) ~ Multinomial(N, pi)`` (Eq. 6); class k
    then takes the first n_k rows of class k in the seed's permutation of the world's training
    pool (`oracle.io.splits`), and when the pool holds fewer than n_k rows of class k, n_k rows
    drawn from them *with replacement* (as the paper's implementation does).
(B) Covariate shift: ``x' = clip(x + eps, -1, 1)``, eps ~ N(0, sigma^2 I) (Eq. 7), applied to
    the selected rows (each copy of a row drawn twice gets its own noise), before the
    classifier's input normalization (a layer of the classifier, `oracle.classifiers.build`).

Classes are the world's labels y ~ p_T(y|x) (DESIGN rule 8), the labels the classifier trains
on; the selected rows keep them. Every draw comes from a stream derived from the training
seed alone, so two configurations with the same (seed, pi) select the same rows and two with
the same (seed, sigma) add the same noise at the same positions (common random numbers).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from oracle.errors import DataError, OracleError

_PRIOR_STREAM = "oracle.shift/prior/v1"


def prior_rng(seed: int) -> np.random.Generator:
    """The stream of the multinomial counts and the with-replacement draws of training seed `seed`."""
    digest = hashlib.sha256(f"{_PRIOR_STREAM}:{int(seed)}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def class_counts(n: int, prior: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """``Multinomial(n, prior)`` class counts, int64 [K] summing to n."""
    pi = np.asarray(prior, dtype=np.float64)
    if pi.ndim != 1 or pi.size < 1 or (pi < 0).any() or abs(pi.sum() - 1.0) > 1e-6:
        raise OracleError(f"class prior {pi.tolist()}: expected K non-negative numbers summing to 1")
    if int(n) < 1:
        raise OracleError(f"training-set size N={n}: expected N >= 1")
    return rng.multinomial(int(n), pi / pi.sum()).astype(np.int64)


def select_by_counts(order: np.ndarray, labels: np.ndarray, counts: np.ndarray,
                     rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
    """Rows for the class counts `counts` [K] from the pool permutation `order` [m] whose rows
    have classes `labels` [m] (aligned with `order`).

    Returns (rows int64 [sum(counts)], grouped by class in class order; info): info has
    ``counts`` (the realised counts, = `counts`), ``pool_counts`` (rows of each class in the
    pool), ``resampled`` (classes drawn with replacement) and ``unique_rows``.
    """
    order = np.asarray(order, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if order.shape != labels.shape:
        raise OracleError(f"select_by_counts: order has {order.size} rows but labels {labels.size}")
    parts, resampled, pool_counts = [], [], []
    for k, n_k in enumerate(counts.tolist()):
        members = order[labels == k]
        pool_counts.append(int(members.size))
        if n_k <= members.size:
            parts.append(members[:n_k])
            continue
        if members.size == 0:
            raise DataError(f"class {k}: the training pool has no row of this class, but the multinomial draw "
                            f"asks for {n_k}")
        resampled.append(k)
        parts.append(rng.choice(members, size=n_k, replace=True))
    rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    return rows, {"counts": counts.tolist(), "pool_counts": pool_counts, "resampled": resampled,
                  "unique_rows": int(np.unique(rows).size)}


def shifted_rows(order: np.ndarray, labels: np.ndarray, n: int, prior: Sequence[float],
                 seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The label-prior-shifted training rows of seed `seed` (module docstring, (A)): counts from
    `class_counts`, rows from `select_by_counts`, both from `prior_rng(seed)`."""
    rng = prior_rng(seed)
    counts = class_counts(n, prior, rng)
    rows, info = select_by_counts(order, labels, counts, rng)
    return rows, {**info, "prior": [float(p) for p in prior]}
