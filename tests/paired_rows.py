"""Test helpers for differences paired per test row: a world's sample file, prediction files
that share its test rows, and an independent brute-force computation of a paired difference
(plain Python loops over rows and classes, no library code)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


def write_world(path: Path, loglik: np.ndarray, labels: np.ndarray, prior: list[float]) -> np.ndarray:
    """A one-shard sample file of the rows (tiny images, T = 1) -> the world's log p(y|x) [n, K],
    computed here by Bayes' rule."""
    from oracle.io.shards import ShardWriter

    n, k = loglik.shape
    attrs = {"oracle_sha256": "0" * 64, "prior": list(prior), "label_temperature": 1.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(path, k, (1, 2, 2), attrs, chunk_rows=64) as w:
        w.write(np.zeros((n, 1, 2, 2), np.float32), labels, labels, loglik, np.arange(n))
    joint = loglik + np.log(np.asarray(prior))[None, :]
    return log_softmax_np(joint)


def write_classifier(path: Path, identity: dict, log_q: np.ndarray, labels: np.ndarray, rows: np.ndarray) -> Path:
    from oracle.io.predictions import write_predictions

    path.parent.mkdir(parents=True, exist_ok=True)
    write_predictions(path, log_q, rows, labels, attrs=identity)
    return path


def brute_force(log_q_a, log_q_b, log_p, labels, value: str) -> tuple[float, float]:
    """Mean and SE (std ddof=1 / sqrt(n)) over rows of value(a) - value(b), by loops."""
    d = []
    for i in range(len(labels)):
        vals = []
        for lq in (log_q_a, log_q_b):
            if value == "acc":
                best = max(range(lq.shape[1]), key=lambda k: (lq[i][k], -k))
                vals.append(1.0 if best == labels[i] else 0.0)
            else:
                vals.append(sum(math.exp(log_p[i][k]) * (log_p[i][k] - lq[i][k]) for k in range(lq.shape[1])))
        d.append(vals[0] - vals[1])
    n = len(d)
    mean = sum(d) / n
    var = sum((x - mean) ** 2 for x in d) / (n - 1)
    return mean, math.sqrt(var / n)
