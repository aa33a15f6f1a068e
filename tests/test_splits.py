"""Splits: one fixed test set, nested per-seed training subsets, deterministic, stored in HDF5."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from oracle.errors import ConfigError, DataError
from oracle.io.splits import make_splits, read_splits_h5, write_splits_h5

SIZES = [10, 100, 1000]
SEEDS = [0, 1, 2]


def test_nested_disjoint_and_complete():
    s = make_splits(2000, 500, [1000, 10, 100], SEEDS)
    assert s["sizes"] == SIZES
    test = s["test"]
    assert len(test) == 500 and len(np.unique(test)) == 500 and test.min() >= 0 and test.max() < 2000
    for seed in SEEDS:
        sub = s["train"][seed]
        for n in SIZES:
            assert len(sub[n]) == n and len(np.unique(sub[n])) == n
            assert np.intersect1d(sub[n], test).size == 0
        assert np.array_equal(sub[100][:10], sub[10])
        assert np.array_equal(sub[1000][:100], sub[100])
        assert set(sub[10]) <= set(sub[100]) <= set(sub[1000])
    # different seeds draw different subsets from the same pool
    assert not np.array_equal(s["train"][0][100], s["train"][1][100])


def test_full_pool_is_a_permutation_of_non_test():
    s = make_splits(300, 100, [200], [5])
    rest = np.setdiff1d(np.arange(300), s["test"])
    assert np.array_equal(np.sort(s["train"][5][200]), rest)


def test_deterministic_and_extendable():
    a = make_splits(1000, 200, [10, 100], [0, 1])
    b = make_splits(1000, 200, [10, 100], [0, 1])
    assert np.array_equal(a["test"], b["test"])
    for seed in (0, 1):
        for n in (10, 100):
            assert np.array_equal(a["train"][seed][n], b["train"][seed][n])
    # adding an N or a seed leaves existing subsets untouched
    c = make_splits(1000, 200, [10, 50, 100, 800], [1, 0, 7])
    assert np.array_equal(a["test"], c["test"])
    assert np.array_equal(a["train"][1][100], c["train"][1][100])
    # the test seed moves the test set
    d = make_splits(1000, 200, [10], [0], test_seed=1)
    assert not np.array_equal(a["test"], d["test"])


def test_uniform_draw_is_unbiased():
    # every pool element is equally likely in the N=10 subset: over 400 seeds each of the 900
    # pool elements is expected 10 * 400 / 900 times; a chi-square test against uniform
    from scipy.stats import chisquare

    s = make_splits(1000, 100, [10], list(range(400)))
    counts = np.bincount(np.concatenate([s["train"][k][10] for k in range(400)]), minlength=1000)
    assert counts[s["test"]].sum() == 0
    assert chisquare(np.delete(counts, s["test"])).pvalue > 1e-3
    # and the test set itself is not concentrated at one end of the pool
    assert 0.4 < np.median(s["test"]) / 1000 < 0.6


def test_stratified_by_labels():
    labels = np.repeat([0, 1, 2], [600, 300, 100])
    s = make_splits(1000, 200, [10, 100, 500], [0, 1], labels=labels)
    assert s["stratified"]
    assert np.bincount(labels[s["test"]]).tolist() == [120, 60, 20]
    # the training pool has 480/240/80 of each class: prefixes stay within one or two of 6:3:1
    for seed in (0, 1):
        for n in (10, 100, 500):
            got = np.bincount(labels[s["train"][seed][n]], minlength=3)
            assert np.all(np.abs(got - n * np.array([0.6, 0.3, 0.1])) <= 2), (seed, n, got)
    # largest remainder: 7 test items over classes 2:1 -> 5 and 2 (4.67 and 2.33)
    s2 = make_splits(9, 7, [1], [0], labels=np.array([0, 0, 0, 0, 0, 0, 1, 1, 1]))
    assert np.bincount(np.array([0, 0, 0, 0, 0, 0, 1, 1, 1])[s2["test"]]).tolist() == [5, 2]


def test_errors():
    with pytest.raises(ConfigError, match=r"N=901.*900"):
        make_splits(1000, 100, [10, 901], [0])
    with pytest.raises(ConfigError, match="test_size"):
        make_splits(100, 100, [10], [0])
    with pytest.raises(ConfigError, match="seeds"):
        make_splits(100, 10, [10], [0, 0])
    with pytest.raises(ConfigError, match="sizes"):
        make_splits(100, 10, [0], [0])
    with pytest.raises(ConfigError, match="labels"):
        make_splits(100, 10, [10], [0], labels=np.zeros(99, int))


def test_h5_roundtrip(tmp_path):
    s = make_splits(500, 100, [10, 50], [0, 3], labels=np.arange(500) % 4)
    path = tmp_path / "splits" / "splits.h5"
    write_splits_h5(path, s)
    assert os.listdir(path.parent) == ["splits.h5"]
    r = read_splits_h5(path)
    assert np.array_equal(r["test"], s["test"])
    for key in ("n_pool", "test_size", "test_seed", "sizes", "seeds", "stratified"):
        assert r[key] == s[key]
    for seed in (0, 3):
        for n in (10, 50):
            assert np.array_equal(r["train"][seed][n], s["train"][seed][n])
    with h5py.File(path, "r") as f:
        assert f["train/seed3/N50"].dtype == np.int64


def test_h5_refuses_inconsistent(tmp_path):
    s = make_splits(200, 50, [10, 20], [0])
    path = tmp_path / "splits.h5"
    write_splits_h5(path, s)
    with h5py.File(path, "r+") as f:
        d = f["train/seed0/N20"]
        d[0] = s["test"][0]  # a training index that is also a test index
    with pytest.raises(DataError, match="overlaps the test set"):
        read_splits_h5(path)
    bad = dict(s, train={0: {10: s["train"][0][10], 20: s["train"][0][20][::-1].copy()}})
    with pytest.raises(DataError, match="prefix"):
        write_splits_h5(tmp_path / "bad.h5", bad)
    assert not (tmp_path / "bad.h5").exists()
    with h5py.File(path, "r+") as f:
        del f.attrs["complete"]
    with pytest.raises(DataError, match="incomplete"):
        read_splits_h5(path)
