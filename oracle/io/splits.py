"""Fixed oracle test set and nested training subsets, as index arrays into a sample pool.

A pool of ``n_pool`` samples (``samples/all.h5`` rows 0..n_pool-1) is split once into a test
set of ``test_size`` rows (seeded by ``test_seed``, shared by every classifier of a run) and the
training pool (the rest). For each training seed s the training pool is permuted once; the
subset of size N is the first N entries of that permutation. Hence, for one seed,
``train[s][100]`` is a prefix of ``train[s][1000]``, and adding a new N or a new seed later
leaves the existing subsets unchanged (each seed's permutation depends only on s, the test set
and the labels).

With ``labels`` (int [n_pool]) both parts are stratified: the test set takes from each class
its largest-remainder share of ``test_size``, and each seed's permutation interleaves the
classes (systematic sampling: the r-th shuffled member of a class with m members gets the key
(r + u) / m, u ~ U[0, 1) per class) so every prefix holds each class within about one sample of
its pool proportion. Without labels both are plain uniform random draws.

HDF5 layout (`write_splits_h5`): dataset ``test`` int64 [test_size] (sorted), datasets
``train/seed{s}/N{n}`` int64 [n] (in permutation order, so prefixes nest), root attributes
``n_pool``, ``test_size``, ``test_seed``, ``sizes``, ``seeds``, ``stratified``,
``format_version`` and ``complete`` (written last).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oracle.errors import ConfigError, DataError
from oracle.io.atomic import atomic_output

FORMAT_VERSION = 1
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


def make_splits(n_pool: int, test_size: int, sizes: Sequence[int], seeds: Sequence[int],
                labels: np.ndarray | None = None, *, test_seed: int = 0) -> dict[str, Any]:
    """Test set and nested training subsets of a pool of `n_pool` samples.

    n_pool:     number of samples in the pool (rows of ``samples/all.h5``).
    test_size:  size of the fixed test set, 1 <= test_size < n_pool.
    sizes:      training-set sizes N (each <= n_pool - test_size).
    seeds:      training seeds (integers >= 0); one permutation of the training pool each.
    labels:     optional int [n_pool]: stratify the test set and the subsets by class.
    test_seed:  seeds the choice of the test set.

    Returns {"n_pool", "test_size", "test_seed", "sizes" (sorted), "seeds", "stratified",
    "test": int64 [test_size] sorted, "train": {seed: {N: int64 [N]}}} where train[s][N] is the
    first N entries of seed s's permutation of the non-test indices.
    """
    if isinstance(n_pool, bool) or not isinstance(n_pool, (int, np.integer)) or n_pool < 2:
        raise ConfigError(f"n_pool={n_pool!r}: expected an integer >= 2")
    if isinstance(test_size, bool) or not isinstance(test_size, (int, np.integer)) or not 1 <= test_size < n_pool:
        raise ConfigError(f"test_size={test_size!r}: expected an integer in [1, n_pool={n_pool})")
    n_pool, test_size = int(n_pool), int(test_size)
    sizes = sorted(_check_int_list("sizes", sizes, 1))
    seeds = _check_int_list("seeds", seeds, 0)
    if isinstance(test_seed, bool) or not isinstance(test_seed, (int, np.integer)) or test_seed < 0:
        raise ConfigError(f"test_seed={test_seed!r}: expected an integer >= 0")
    pool_size = n_pool - test_size
    too_big = [n for n in sizes if n > pool_size]
    if too_big:
        raise ConfigError(f"training size N={too_big[0]} exceeds the training pool of {pool_size} samples "
                          f"(n_pool={n_pool} minus test_size={test_size})")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (n_pool,) or not np.issubdtype(labels.dtype, np.integer):
            raise ConfigError(f"labels: expected integers of shape [{n_pool}], got {labels.dtype} {list(labels.shape)}")

    test = _test_indices(n_pool, test_size, int(test_seed), labels)
    mask = np.ones(n_pool, bool)
    mask[test] = False
    pool = np.flatnonzero(mask).astype(np.int64)
    train = {}
    for s in seeds:
        order = _train_order(pool, s, labels)
        train[s] = {n: order[:n].copy() for n in sizes}
    return {"n_pool": n_pool, "test_size": test_size, "test_seed": int(test_seed), "sizes": sizes,
            "seeds": seeds, "stratified": labels is not None, "test": test, "train": train}


def check_splits(splits: dict[str, Any], where: Any = "splits") -> None:
    """Raise DataError unless `splits` is consistent: indices in range and unique, train
    disjoint from test, and for each seed every smaller N a prefix of every larger N."""
    n_pool, test = splits["n_pool"], np.asarray(splits["test"])
    if len(np.unique(test)) != len(test) or (len(test) and (test.min() < 0 or test.max() >= n_pool)):
        raise DataError(f"{where}: test indices repeat or fall outside [0, {n_pool})")
    is_test = np.zeros(n_pool, bool)
    is_test[test] = True
    for s, subsets in splits["train"].items():
        prev = None
        for n in sorted(subsets):
            idx = np.asarray(subsets[n])
            if len(idx) != n or len(np.unique(idx)) != n or (n and (idx.min() < 0 or idx.max() >= n_pool)):
                raise DataError(f"{where}: train seed {s} N={n} is not {n} distinct indices in [0, {n_pool})")
            if is_test[idx].any():
                raise DataError(f"{where}: train seed {s} N={n} overlaps the test set")
            if prev is not None and not np.array_equal(idx[: len(prev)], prev):
                raise DataError(f"{where}: train seed {s} N={len(prev)} is not a prefix of N={n}")
            prev = idx


def write_splits_h5(path: str | os.PathLike, splits: dict[str, Any]) -> None:
    """Write `splits` (from `make_splits`) to HDF5 atomically; layout in the module docstring."""
    import h5py

    check_splits(splits, path)
    with atomic_output(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("test", data=np.asarray(splits["test"], np.int64))
            g = f.create_group("train")
            for s, subsets in splits["train"].items():
                gs = g.create_group(f"seed{int(s)}")
                for n, idx in subsets.items():
                    gs.create_dataset(f"N{int(n)}", data=np.asarray(idx, np.int64))
            for key in ("n_pool", "test_size", "test_seed"):
                f.attrs[key] = int(splits[key])
            f.attrs["sizes"] = np.asarray(splits["sizes"], np.int64)
            f.attrs["seeds"] = np.asarray(splits["seeds"], np.int64)
            f.attrs["stratified"] = bool(splits.get("stratified", False))
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["complete"] = True


def read_splits_h5(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by `write_splits_h5` into the dict `make_splits` returns.

    Raises DataError if the file is missing, incomplete or inconsistent (see `check_splits`).
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise DataError(f"splits file {path} not found: expected an HDF5 file written by write_splits_h5")
    try:
        with h5py.File(path, "r") as f:
            if not f.attrs.get("complete", False):
                raise DataError(f"{path} is incomplete (no 'complete' attribute): rerun the splits rule")
            train = {}
            for gname, g in f["train"].items():
                s = int(gname.removeprefix("seed"))
                train[s] = {int(n.removeprefix("N")): d[()].astype(np.int64) for n, d in g.items()}
            out = {
                "n_pool": int(f.attrs["n_pool"]), "test_size": int(f.attrs["test_size"]),
                "test_seed": int(f.attrs["test_seed"]),
                "sizes": [int(v) for v in f.attrs["sizes"]], "seeds": [int(v) for v in f.attrs["seeds"]],
                "stratified": bool(f.attrs["stratified"]), "test": f["test"][()].astype(np.int64),
                "train": {s: train[s] for s in (int(v) for v in f.attrs["seeds"]) if s in train},
            }
    except DataError:
        raise
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"cannot read splits file {path}: {type(exc).__name__}: {exc}") from None
    if set(out["train"]) != set(out["seeds"]):
        raise DataError(f"{path}: groups train/seed* do not match the seeds attribute {out['seeds']}")
    check_splits(out, path)
    return out
