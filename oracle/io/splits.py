"""Fixed oracle test set and nested training subsets, as index arrays into a sample pool.

A pool of ``n_pool`` samples (``samples/<world>/all.h5`` rows 0..n_pool-1) is split once into a
test set of ``test_size`` rows (seeded by ``test_seed``, shared by every classifier of the
world) and the training pool (the rest). For each training seed s the training pool is
permuted once (``order[s]``); the training set of size N is the first N entries of that
permutation (`training_indices`). Hence, for one seed, the set of 100 is a prefix of the set of
1000, any N up to the pool size is available without rewriting the file, and adding a seed
leaves the other permutations unchanged (each depends only on s, the test set and the labels).

With ``labels`` (int [n_pool]) both parts are stratified: the test set takes from each class
its largest-remainder share of ``test_size``, and each seed's permutation interleaves the
classes (systematic sampling: the r-th shuffled member of a class with m members gets the key
(r + u) / m, u ~ U[0, 1) per class) so every prefix holds each class within about one sample of
its pool proportion. Without labels both are plain uniform random draws.

HDF5 layout (`write_splits_h5`): dataset ``test`` int64 [test_size] (sorted), datasets
``order/seed{s}`` int64 [n_pool - test_size] (the permutation), root attributes ``n_pool``,
``test_size``, ``test_seed``, ``seeds``, ``stratified``, ``format_version`` and ``complete``
(written last).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from oracle.errors import ConfigError, DataError
from oracle.io.atomic import atomic_output

#: 2: one permutation per seed (format 1 stored one dataset per (seed, N)).
FORMAT_VERSION = 2
# distinct stream tags so test seed 0 and training seed 0 never share random numbers
_TEST_TAG, _TRAIN_TAG = 0x7E57, 0x7A1


def _check_int_list(name: str, values: Sequence[int], minimum: int) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise ConfigError(f"{name} contains {v!r}: expected integers >= {minimum}")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ConfigError(f"{name}={out} lists a value twice")
    if not out:
        raise ConfigError(f"{name} is empty: expected at least one value")
    return out


def _largest_remainder(counts: np.ndarray, total: int) -> np.ndarray:
    """Integer shares of `total` proportional to `counts` (sum exactly `total`)."""
    exact = total * counts / counts.sum()
    share = np.floor(exact).astype(np.int64)
    rest = total - int(share.sum())
    # stable sort: ties go to the lower class index
    order = np.argsort(-(exact - share), kind="stable")
    share[order[:rest]] += 1
    return np.minimum(share, counts)


def _test_indices(n_pool: int, test_size: int, test_seed: int, labels: np.ndarray | None) -> np.ndarray:
    rng = np.random.default_rng([_TEST_TAG, test_seed])
    if labels is None:
        return np.sort(rng.permutation(n_pool)[:test_size]).astype(np.int64)
    classes, counts = np.unique(labels, return_counts=True)
    share = _largest_remainder(counts, test_size)
    parts = [rng.permutation(np.flatnonzero(labels == k))[:q] for k, q in zip(classes, share)]
    return np.sort(np.concatenate(parts)).astype(np.int64)


def _train_order(pool: np.ndarray, seed: int, labels: np.ndarray | None) -> np.ndarray:
    rng = np.random.default_rng([_TRAIN_TAG, seed])
    if labels is None:
        return rng.permutation(pool).astype(np.int64)
    pool_labels = labels[pool]
    keys = np.empty(len(pool))
    for k in np.unique(pool_labels):
        members = np.flatnonzero(pool_labels == k)
        shuffled = rng.permutation(members)
        keys[shuffled] = (np.arange(len(shuffled)) + rng.random()) / len(shuffled)
    tiebreak = rng.random(len(pool))
    return pool[np.lexsort((tiebreak, keys))].astype(np.int64)


def make_splits(n_pool: int, test_size: int, seeds: Sequence[int], labels: np.ndarray | None = None, *,
                test_seed: int = 0) -> dict[str, Any]:
    """Test set and one training-pool permutation per seed, for a pool of `n_pool` samples.

    n_pool:     number of samples in the pool (rows of ``samples/<world>/all.h5``).
    test_size:  size of the fixed test set, 1 <= test_size <= n_pool (a world that is only
                tested on may give all its samples to the test set).
    seeds:      training seeds (integers >= 0); one permutation of the training pool each
                (may be empty).
    labels:     optional int [n_pool]: stratify the test set and the permutations by class.
    test_seed:  seeds the choice of the test set.

    Returns {"n_pool", "test_size", "test_seed", "seeds", "stratified", "test": int64
    [test_size] sorted, "order": {seed: int64 [n_pool - test_size]}}.
    """
    if isinstance(n_pool, bool) or not isinstance(n_pool, (int, np.integer)) or n_pool < 1:
        raise ConfigError(f"n_pool={n_pool!r}: expected an integer >= 1")
    if isinstance(test_size, bool) or not isinstance(test_size, (int, np.integer)) or not 1 <= test_size <= n_pool:
        raise ConfigError(f"test_size={test_size!r}: expected an integer in [1, n_pool={n_pool}]")
    n_pool, test_size = int(n_pool), int(test_size)
    seeds = _check_int_list("seeds", seeds, 0) if len(seeds) else []
    if isinstance(test_seed, bool) or not isinstance(test_seed, (int, np.integer)) or test_seed < 0:
        raise ConfigError(f"test_seed={test_seed!r}: expected an integer >= 0")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n_pool,) or not np.issubdtype(labels.dtype, np.integer):
            raise ConfigError(f"labels: expected integers of shape [{n_pool}], got {labels.dtype} {list(labels.shape)}")
    test = _test_indices(n_pool, test_size, int(test_seed), labels)
    mask = np.ones(n_pool, bool)
    mask[test] = False
    pool = np.flatnonzero(mask).astype(np.int64)
    order = {s: _train_order(pool, s, labels) for s in seeds}
    return {"n_pool": n_pool, "test_size": test_size, "test_seed": int(test_seed), "seeds": seeds,
            "stratified": labels is not None, "test": test, "order": order}


def training_indices(splits: dict[str, Any], seed: int, n: int) -> np.ndarray:
    """The training set of size `n` of seed `seed`: the first `n` rows of its permutation
    (int64 [n]); DataError naming what is missing otherwise."""
    if int(seed) not in splits["order"]:
        raise DataError(f"splits have no training seed {seed} (seeds: {sorted(splits['order'])}); rerun make_splits")
    order = splits["order"][int(seed)]
    if not 1 <= int(n) <= len(order):
        raise DataError(f"training size N={n} exceeds the training pool of {len(order)} samples")
    return order[: int(n)].copy()


def validation_indices(splits: dict[str, Any], seed: int, size: int) -> np.ndarray:
    """The validation rows of seed `seed`: the last `size` rows of its permutation (int64
    [size]), which no training set of that seed holds as long as N <= pool - size (the
    experiments check it when the config is read); DataError otherwise."""
    if int(seed) not in splits["order"]:
        raise DataError(f"splits have no training seed {seed} (seeds: {sorted(splits['order'])}); rerun make_splits")
    order = splits["order"][int(seed)]
    if not 1 <= int(size) < len(order):
        raise DataError(f"validation size {size} leaves no training rows in the pool of {len(order)} samples")
    return order[len(order) - int(size):].copy()


def check_splits(splits: dict[str, Any], where: Any = "splits") -> None:
    """Raise DataError unless `splits` is consistent: test indices in range and unique, and
    every seed's order a permutation of exactly the non-test indices."""
    n_pool, test = splits["n_pool"], np.asarray(splits["test"])
    if len(np.unique(test)) != len(test) or (len(test) and (test.min() < 0 or test.max() >= n_pool)):
        raise DataError(f"{where}: test indices repeat or fall outside [0, {n_pool})")
    pool = np.setdiff1d(np.arange(n_pool), test)
    for s, order in splits["order"].items():
        if not np.array_equal(np.sort(np.asarray(order)), pool):
            raise DataError(f"{where}: the order of training seed {s} is not a permutation of the training pool")


def write_splits_h5(path: str | os.PathLike, splits: dict[str, Any]) -> None:
    """Write `splits` (from `make_splits`) to HDF5 atomically; layout in the module docstring."""
    import h5py

    check_splits(splits, path)
    with atomic_output(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("test", data=np.asarray(splits["test"], np.int64))
            g = f.create_group("order")
            for s, order in splits["order"].items():
                g.create_dataset(f"seed{int(s)}", data=np.asarray(order, np.int64))
            for key in ("n_pool", "test_size", "test_seed"):
                f.attrs[key] = int(splits[key])
            f.attrs["seeds"] = np.asarray(splits["seeds"], np.int64)
            f.attrs["stratified"] = bool(splits.get("stratified", False))
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["complete"] = True


def read_splits_h5(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by `write_splits_h5` into the dict `make_splits` returns.

    Raises DataError if the file is missing, incomplete, of another format or inconsistent
    (see `check_splits`).
    """
    from oracle.io.h5_files import reading

    with reading(path, "splits", "delete it and rerun the splits rule", FORMAT_VERSION) as f:
        seeds = [int(v) for v in f.attrs["seeds"]]
        order = {int(name.removeprefix("seed")): d[()].astype(np.int64) for name, d in f["order"].items()}
        out = {
            "n_pool": int(f.attrs["n_pool"]), "test_size": int(f.attrs["test_size"]),
            "test_seed": int(f.attrs["test_seed"]), "seeds": seeds,
            "stratified": bool(f.attrs["stratified"]), "test": f["test"][()].astype(np.int64),
            "order": {s: order[s] for s in seeds if s in order},
        }
    if set(out["order"]) != set(seeds):
        raise DataError(f"{path}: datasets order/seed* do not match the seeds attribute {seeds}")
    check_splits(out, path)
    return out
