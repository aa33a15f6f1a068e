"""Splits: one fixed test set, one training-pool permutation per seed (training sets of size N
are its prefixes, so they nest), deterministic, stored in HDF5."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from oracle.errors import ConfigError, DataError
from oracle.io.splits import make_splits, read_splits_h5, training_indices, write_splits_h5

SIZES = [10, 100, 1000]
SEEDS = [0, 1, 2]


def test_nested_disjoint_and_complete():
    s = make_splits(2000, 500, SEEDS)
    test = s["test"]
    assert len(test) == 500 and len(np.unique(test)) == 500 and test.min() >= 0 and test.max() < 2000
    for seed in SEEDS:
        sub = {n: training_indices(s, seed, n) for n in SIZES}
        for n in SIZES:
            assert len(sub[n]) == n and len(np.unique(sub[n])) == n
            assert np.intersect1d(sub[n], test).size == 0
        assert np.array_equal(sub[100][:10], sub[10])
        assert np.array_equal(sub[1000][:100], sub[100])
    # different seeds draw different subsets from the same pool
    assert not np.array_equal(training_indices(s, 0, 100), training_indices(s, 1, 100))


def test_full_pool_is_a_permutation_of_non_test():
    s = make_splits(300, 100, [5])
    rest = np.setdiff1d(np.arange(300), s["test"])
    assert np.array_equal(np.sort(training_indices(s, 5, 200)), rest)
    with pytest.raises(DataError, match="N=201 exceeds the training pool of 200"):
        training_indices(s, 5, 201)
    with pytest.raises(DataError, match="no training seed 6"):
        training_indices(s, 6, 10)


def test_a_test_only_world_may_give_every_sample_to_the_test_set():
    s = make_splits(50, 50, [])
    assert np.array_equal(s["test"], np.arange(50)) and s["order"] == {}


def test_deterministic_and_extendable():
    a = make_splits(1000, 200, [0, 1])
    b = make_splits(1000, 200, [0, 1])
    assert np.array_equal(a["test"], b["test"])
    for seed in (0, 1):
        assert np.array_equal(a["order"][seed], b["order"][seed])
    # adding a seed leaves the existing permutations untouched
    c = make_splits(1000, 200, [1, 0, 7])
    assert np.array_equal(a["test"], c["test"])
    assert np.array_equal(a["order"][1], c["order"][1])
    # the test seed moves the test set
    d = make_splits(1000, 200, [0], test_seed=1)
    assert not np.array_equal(a["test"], d["test"])


def test_uniform_draw_is_unbiased():
    # every pool element is equally likely in the N=10 subset: over 400 seeds each of the 900
    # pool elements is expected 10 * 400 / 900 times; a chi-square test against uniform
    from scipy.stats import chisquare

    s = make_splits(1000, 100, list(range(400)))
    counts = np.bincount(np.concatenate([training_indices(s, k, 10) for k in range(400)]), minlength=1000)
    assert counts[s["test"]].sum() == 0
    assert chisquare(np.delete(counts, s["test"])).pvalue > 1e-3
    # and the test set itself is not concentrated at one end of the pool
    assert 0.4 < np.median(s["test"]) / 1000 < 0.6


def test_stratified_by_labels():
    labels = np.repeat([0, 1, 2], [600, 300, 100])
    s = make_splits(1000, 200, [0, 1], labels=labels)
    assert s["stratified"]
    assert np.bincount(labels[s["test"]]).tolist() == [120, 60, 20]
    # the training pool has 480/240/80 of each class: prefixes stay within one or two of 6:3:1
    for seed in (0, 1):
        for n in (10, 100, 500):
            got = np.bincount(labels[training_indices(s, seed, n)], minlength=3)
            assert np.all(np.abs(got - n * np.array([0.6, 0.3, 0.1])) <= 2), (seed, n, got)
    # largest remainder: 7 test items over classes 2:1 -> 5 and 2 (4.67 and 2.33)
    s2 = make_splits(9, 7, [0], labels=np.array([0, 0, 0, 0, 0, 0, 1, 1, 1]))
    assert np.bincount(np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])[s2["test"]]).tolist() == [5, 2]


def test_errors():
    with pytest.raises(ConfigError, match="test_size"):
        make_splits(100, 101, [0])
    with pytest.raises(ConfigError, match="seeds"):
        make_splits(100, 10, [0, 0])
    with pytest.raises(ConfigError, match="labels"):
        make_splits(100, 10, [0], labels=np.zeros(99, int))


def test_h5_roundtrip(tmp_path):
    s = make_splits(500, 100, [0, 3], labels=np.arange(500) % 4)
    path = tmp_path / "splits" / "base.h5"
    write_splits_h5(path, s)
    assert os.listdir(path.parent) == ["base.h5"]
    r = read_splits_h5(path)
    assert np.array_equal(r["test"], s["test"])
    for key in ("n_pool", "test_size", "test_seed", "seeds", "stratified"):
        assert r[key] == s[key]
    for seed in (0, 3):
        assert np.array_equal(r["order"][seed], s["order"][seed])
    with h5py.File(path, "r") as f:
        assert f["order/seed3"].dtype == np.int64


def test_h5_refuses_inconsistent_or_old_files(tmp_path):
    s = make_splits(200, 50, [0])
    path = tmp_path / "splits.h5"
    write_splits_h5(path, s)
    with h5py.File(path, "r+") as f:
        f["order/seed0"][0] = s["test"][0]  # a training index that is also a test index
    with pytest.raises(DataError, match="not a permutation of the training pool"):
        read_splits_h5(path)
    bad = dict(s, order={0: s["order"][0][:-1]})
    with pytest.raises(DataError, match="not a permutation"):
        write_splits_h5(tmp_path / "bad.h5", bad)
    assert not (tmp_path / "bad.h5").exists()
    write_splits_h5(path, s)
    with h5py.File(path, "r+") as f:
        f.attrs["format_version"] = 1
    with pytest.raises(DataError, match="splits format 1.*rerun the splits rule"):
        read_splits_h5(path)
    with h5py.File(path, "r+") as f:
        del f.attrs["complete"]
    with pytest.raises(DataError, match="incomplete"):
        read_splits_h5(path)
