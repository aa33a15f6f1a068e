"""Covariate shift by clipped Gaussian noise (paper appendix F, Eq. 7): x' = clip(x + eps, -1, 1),
eps ~ N(0, sigma^2 I), on training images and on a world's test set.

A *noisy test set* of a world is a sample file (the shard format of `oracle.io.shards`) that
holds exactly the world's test rows, in the order of its splits file, with ``x`` replaced by
x' and ``loglik`` recomputed by the frozen model at the stored float32 x' (DESIGN rule 2).
``label``, ``source_class`` and ``index`` are those of the clean rows (the attribute
``derived_test_set`` marks the file; `oracle.classifiers.data.evaluation_set` reads it).

x' is not a draw from the world, and the noise process has no tractable density: p(y|x') from
Bayes' rule with the frozen densities is *the oracle's posterior at x'*, not the law of the
label given x'. So a noisy set reports what is exact about it, named as what it is
(`posterior_shift`): the oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] over the test
rows, the oracle's accuracy on x' (argmax p(y|x') against the labels of x), and the clean
Bayes accuracy beside it; never "the KL of the shift".
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import numpy as np
import torch

from oracle.errors import DataError, OracleError

_NOISE_STREAM = "oracle.noise/v1"


def noise_seed(seed: int, sigma: float, stream: str = "test") -> int:
    """A 63-bit seed of the noise of one (seed, sigma, stream): the test set of a world
    (stream "test", seed = the world's seed) or a classifier's training set (stream "train")."""
    digest = hashlib.sha256(f"{_NOISE_STREAM}:{stream}:{int(seed)}:{float(sigma)!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def add_clipped_noise(x: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``clip(x + eps, -1, 1)`` with eps ~ N(0, sigma^2) per entry drawn from `rng`; computed in
    float64 and rounded once to float32 (the array classifiers and the oracle then read).
    sigma = 0 returns x unchanged (as float32) and draws nothing."""
    if not (sigma >= 0 and np.isfinite(sigma)):
        raise OracleError(f"noise sigma={sigma!r}: expected a finite value >= 0")
    x = np.asarray(x)
    if sigma == 0:
        return x.astype(np.float32, copy=True)
    eps = rng.standard_normal(x.shape) * float(sigma)
    return np.clip(x.astype(np.float64) + eps, -1.0, 1.0).astype(np.float32)


def posterior_shift(log_p: np.ndarray, log_p_noisy: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """What is exact about a noisy test set, from the oracle's log-posteriors at x and at x'
    ([n, K] each, same rows) and the labels of x: each {"mean", "se"} over rows:

    ``posterior_shift``   E[KL(p(y|x) || p(y|x'))] (nats)
    ``oracle_accuracy_noisy``  accuracy of argmax_y p(y|x') against the labels
    ``oracle_accuracy_clean``  the same at x
    ``bayes_accuracy_clean``   E[max_y p(y|x)], the clean set's Bayes accuracy
    ``argmax_agreement``  fraction of rows where argmax p(y|x') = argmax p(y|x)
    """
    from oracle.decomposition import accuracy, bayes_accuracy, mean_se, per_sample_terms

    kl = per_sample_terms(log_p, log_p_noisy)["epistemic"]
    lp, ln = np.asarray(log_p), np.asarray(log_p_noisy)
    return {
        "n": int(lp.shape[0]),
        "posterior_shift": mean_se(kl),
        "oracle_accuracy_noisy": accuracy(ln, labels),
        "oracle_accuracy_clean": accuracy(lp, labels),
        "bayes_accuracy_clean": bayes_accuracy(lp),
        "argmax_agreement": mean_se((lp.argmax(1) == ln.argmax(1)).astype(np.float64)),
    }


def _precision(world: Any, attrs: dict) -> dict[str, Any]:
    """Set a flow world's scoring mode to that of the samples file `attrs` ("mixed" or absent:
    float64, whose bound is 0) and return the precision attributes the noisy file stores."""
    from oracle.io.shards import PRECISION_BOUNDS
    from oracle.float_precision import PRECISIONS

    mode = str(attrs.get("precision", "float64"))
    if mode not in PRECISIONS:
        mode = "float64"
    if hasattr(world, "scoring"):
        world.precision = mode
    else:  # an analytic world scores in float64 only
        mode = "float64"
    if mode == "float64":
        return {"precision": mode, **{k: 0.0 for k in PRECISION_BOUNDS}}
    return {"precision": mode, **{k: float(attrs[k]) for k in PRECISION_BOUNDS if k in attrs}}


def write_noisy_test_set(world: Any, samples: str | os.PathLike, splits: str | os.PathLike,
                         out: str | os.PathLike, sigma: float, seed: int, batch_size: int = 256,
                         class_batch: int | None = None) -> dict[str, Any]:
    """Write the noisy test set of a world (module docstring) to `out` and return its exact
    quantities (`posterior_shift` plus sigma, seed, n).

    world: the world `samples` was drawn from (`oracle.worlds.sample_world`); samples,
    splits: its merged sample file and splits file; sigma: the noise std on the [-1, 1] scale;
    seed: the noise stream (`noise_seed`); batch_size: rows per likelihood pass.
    """
    from oracle.io.sample_rows import read_rows
    from oracle.posterior import posterior_rows
    from oracle.io.shards import REQUIRED_ATTRS, ShardWriter
    from oracle.io.splits import read_splits_h5
    from oracle.posterior import log_likelihoods, pass_rows

    rows = read_splits_h5(splits)["test"]
    data = read_rows(samples, rows, fields=("x", "source_class", "label", "loglik", "index"))
    attrs = data["attrs"]
    missing = [k for k in REQUIRED_ATTRS if k not in attrs]
    if missing:
        raise DataError(f"{samples}: lacks attribute(s) {missing}; rerun the samples stage")
    rng = np.random.default_rng(int(seed))
    x_noisy = add_clipped_noise(data["x"], sigma, rng)
    file_attrs = {k: attrs[k] for k in REQUIRED_ATTRS}
    # x' is scored in the clean rows' precision mode (float64 where the shards' modes differ),
    # so the file's measured bound (DESIGN rule 9) is the one it carries over.
    file_attrs.update(_precision(world, attrs))
    file_attrs.update(shard=0, n_shards=1, noise_std=float(sigma), noise_seed=int(seed),
                      derived_test_set="clipped Gaussian noise on the world's test rows (oracle.noisy_samples)",
                      source_samples=os.path.basename(os.fspath(samples)), n_test_rows=int(len(rows)))
    ll_noisy = np.empty_like(data["loglik"])
    with ShardWriter(out, int(attrs["num_classes"]), tuple(attrs["event_shape"]), file_attrs) as writer:
        for start in range(0, len(rows), int(batch_size)):
            sl = slice(start, start + int(batch_size))
            ll = log_likelihoods(world, torch.from_numpy(x_noisy[sl]), class_batch=class_batch,
                                 max_rows=pass_rows(batch_size, class_batch)).cpu().numpy()
            ll_noisy[sl] = ll
            writer.write(x_noisy[sl], data["source_class"][sl], data["label"][sl], ll, data["index"][sl])
    out_stats = posterior_shift(posterior_rows(data["loglik"], attrs), posterior_rows(ll_noisy, attrs), data["label"])
    return {"sigma": float(sigma), "noise_seed": int(seed), **out_stats,
            "clip": [-1.0, 1.0], "prior": [float(v) for v in attrs["prior"]],
            "label_temperature": float(attrs["label_temperature"]),
            "base_temperature": float(attrs["base_temperature"])}
