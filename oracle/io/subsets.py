"""Seeded, class-stratified subsets of a dataset: the test split of datasets that ship without
one (digits, a single .npz) and the per-class cap of ``data.max_per_class``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from oracle.errors import ConfigError


def _rng(seed: int, tag: int) -> np.random.Generator:
    # a tag per purpose keeps the subsampling stream independent of the split stream
    return np.random.default_rng([int(tag), int(seed)])


def stratified_split(labels: np.ndarray, test_fraction: float = 0.2, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified train/test split of `labels` int [N].

    Each class k with n_k members puts round(test_fraction * n_k) of them (a seeded random
    choice) into the test part. Returns (train_idx, test_idx), each sorted int64, disjoint,
    together a permutation of range(N).
    """
    if not 0.0 < float(test_fraction) < 1.0:
        raise ConfigError(f"test_fraction={test_fraction!r}: expected a number in (0, 1)")
    labels = np.asarray(labels)
    rng = _rng(seed, 1)
    test = []
    for k in np.unique(labels):
        idx = np.flatnonzero(labels == k)
        n_test = int(np.floor(test_fraction * len(idx) + 0.5))
        test.append(rng.permutation(idx)[:n_test])
    test_idx = np.sort(np.concatenate(test)).astype(np.int64) if test else np.zeros(0, np.int64)
    mask = np.ones(len(labels), bool)
    mask[test_idx] = False
    return np.flatnonzero(mask).astype(np.int64), test_idx


def subsample_per_class(labels: np.ndarray, max_per_class: int, seed: int = 0) -> np.ndarray:
    """Indices keeping at most `max_per_class` items of each class (seeded choice), sorted int64."""
    if int(max_per_class) < 1:
        raise ConfigError(f"max_per_class={max_per_class!r}: expected a positive integer")
    labels = np.asarray(labels)
    rng = _rng(seed, 2)
    keep = [rng.permutation(np.flatnonzero(labels == k))[: int(max_per_class)] for k in np.unique(labels)]
    return np.sort(np.concatenate(keep)).astype(np.int64) if keep else np.zeros(0, np.int64)


def take_split(images, labels, names, split, test_fraction, seed, kind):
    """The `split` ("train" or "test") part of a dataset without a fixed split: a stratified,
    seeded test share of `test_fraction`."""
    train, test = stratified_split(labels, test_fraction, seed)
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}: {kind} data is split into 'train' and 'test'")
    idx = train if split == "train" else test
    return images[idx], labels[idx], names


def select_classes(labels: np.ndarray, class_names: list[str], classes: Sequence[str] | None,
                    where: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(keep_idx, new_labels, new_names) for a `classes` filter; identity when None."""
    if classes is None:
        return np.arange(len(labels)), labels, class_names
    classes = [str(c) for c in classes]
    if not classes:
        raise ConfigError("data.classes is empty: list the class names to keep, or omit the key")
    unknown = [c for c in classes if c not in class_names]
    if unknown:
        raise ConfigError(f"data.classes: {unknown} not among the classes of {where}: {class_names}")
    if len(set(classes)) != len(classes):
        raise ConfigError(f"data.classes lists a class twice: {classes}")
    remap = np.full(len(class_names), -1, np.int64)
    for new, name in enumerate(classes):
        remap[class_names.index(name)] = new
    new_labels = remap[labels]
    keep = np.flatnonzero(new_labels >= 0)
    return keep, new_labels[keep], classes
