"""oracle.io.sample_rows and oracle.io.predictions: rows of a sample file, their exact posteriors,
the world they were drawn from, and prediction files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oracle.errors import DataError
from oracle.io.predictions import read_predictions, write_predictions
from oracle.io.sample_rows import read_rows
from oracle.posterior import posterior_rows
from oracle.worlds import sample_world


def log_softmax_np(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


@pytest.fixture
def shard(tmp_path):
    from oracle.io.shards import ShardWriter

    rng = np.random.default_rng(0)
    n, k = 37, 3
    x = rng.normal(size=(n, 1, 2, 2)).astype(np.float32)
    sc = rng.integers(0, k, n)
    lab = rng.integers(0, k, n)
    ll = rng.normal(size=(n, k)) * 3.0
    path = tmp_path / "shard-0000.h5"
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 2.0,
             "base_temperature": 1.0, "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(path, k, (1, 2, 2), attrs, chunk_rows=8) as w:
        w.write(x, sc, lab, ll, np.arange(n))
    return path, x, sc, lab, ll


def test_read_rows_keeps_requested_order_and_duplicates(shard):
    path, x, sc, lab, ll = shard
    idx = np.array([5, 0, 36, 5, 17])
    got = read_rows(path, idx)
    np.testing.assert_array_equal(got["x"], x[idx])
    np.testing.assert_array_equal(got["source_class"], sc[idx])
    np.testing.assert_array_equal(got["label"], lab[idx])
    np.testing.assert_array_equal(got["loglik"], ll[idx])
    assert got["attrs"]["label_temperature"] == 2.0
    every = read_rows(path, None, fields=("loglik",))
    np.testing.assert_array_equal(every["loglik"], ll)
    with pytest.raises(DataError):
        read_rows(path, np.array([37]))


def test_posterior_rows_is_tempered_bayes_rule(shard):
    path, _, _, _, ll = shard
    attrs = read_rows(path, None, fields=())["attrs"]
    got = posterior_rows(ll, attrs)
    # p(y|x) ∝ pi_y p(x|y)^(1/T), written out by hand
    w = np.array([0.2, 0.3, 0.5]) * np.exp(ll / 2.0)
    np.testing.assert_allclose(np.exp(got), w / w.sum(axis=1, keepdims=True), rtol=1e-12)


def test_sample_world_checks_the_model_file(tmp_path):
    from oracle.sample_shards import write_sample_shard
    from oracle.io.hashing import file_sha256
    from oracle.worlds import GaussianWorld, save_gaussian_world

    world = GaussianWorld(torch.tensor([[0.0, 0.0], [2.0, 0.0]], dtype=torch.float64), std=1.0, prior=[0.3, 0.7])
    model = tmp_path / "world.pt"
    save_gaussian_world(model, world)
    samples = tmp_path / "shard.h5"
    write_sample_shard(world, samples, n=20, seed=0, shard=0, n_shards=1, progress=False,
                       attrs={"oracle_sha256": file_sha256(model), "code_version": "test"})
    got = sample_world(model, samples)
    np.testing.assert_allclose(got.prior.numpy(), [0.3, 0.7])
    other = tmp_path / "other.pt"
    save_gaussian_world(other, GaussianWorld(torch.tensor([[0.0, 0.0], [3.0, 0.0]], dtype=torch.float64), std=1.0))
    with pytest.raises(DataError, match="not the model"):
        sample_world(other, samples)


def test_predictions_roundtrip_and_atomicity(tmp_path):
    lq = log_softmax_np(np.random.default_rng(1).normal(size=(6, 3)))
    path = tmp_path / "predictions.h5"
    write_predictions(path, lq, np.arange(10, 16), np.array([0, 1, 2, 0, 1, 2]), attrs={"arch": "x", "N": 5})
    got = read_predictions(path)
    np.testing.assert_array_equal(got["log_q"], lq)
    np.testing.assert_array_equal(got["index"], np.arange(10, 16))
    np.testing.assert_array_equal(got["label"], [0, 1, 2, 0, 1, 2])
    assert got["attrs"] == {"arch": "x", "N": 5}
    bad = tmp_path / "bad.h5"
    with pytest.raises(DataError):
        write_predictions(bad, lq, np.arange(5), np.zeros(6))
    assert list(tmp_path.iterdir()) == [path]
