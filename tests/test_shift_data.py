"""Training-time shift (oracle.classifiers.shifted, oracle.classifiers.data.training_set) and noisy
test sets (oracle.noisy_test_sets): multinomial class counts, per-class rows with replacement when
short, clipped noise after selection, and a noisy test set whose log-likelihoods are the world's
density at the stored x'."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from oracle.classifiers import shifted
from oracle.classifiers.data import evaluation_set, training_set
from oracle.errors import DataError, OracleError
from oracle.io.sample_rows import read_rows
from oracle.io.splits import make_splits, read_splits_h5, write_splits_h5
from oracle.noisy_test_sets import add_clipped_noise, noise_seed, posterior_shift, write_noisy_test_set
from oracle.posterior import log_posterior
from oracle.worlds import GaussianWorld

K = 3


def test_class_counts_are_multinomial_draws_of_the_seed():
    counts = shifted.class_counts(5000, [0.7, 0.2, 0.1], shifted.prior_rng(0))
    assert counts.sum() == 5000 and counts.dtype == np.int64
    again = shifted.class_counts(5000, [0.7, 0.2, 0.1], shifted.prior_rng(0))
    np.testing.assert_array_equal(counts, again)
    draws = np.array([shifted.class_counts(1000, [0.5, 0.3, 0.2], shifted.prior_rng(s)) for s in range(400)])
    # mean and variance of Multinomial(n, pi): n pi and n pi (1 - pi), checked over 400 seeds
    pi = np.array([0.5, 0.3, 0.2])
    assert np.all(np.abs(draws.mean(0) - 1000 * pi) < 4 * np.sqrt(1000 * pi * (1 - pi) / 400))
    assert np.allclose(draws.var(0, ddof=1), 1000 * pi * (1 - pi), rtol=0.25)
    with pytest.raises(OracleError):
        shifted.class_counts(10, [0.5, 0.6], shifted.prior_rng(0))


def test_select_by_counts_takes_the_permutation_prefix_or_draws_with_replacement():
    order = np.array([9, 4, 7, 1, 0, 3, 8, 2, 6, 5])
    labels = np.array([0, 1, 0, 2, 0, 1, 0, 1, 2, 0])  # class 0 has 5 rows, class 1 three, class 2 two
    rows, info = shifted.select_by_counts(order, labels, np.array([3, 2, 4]), np.random.default_rng(0))
    np.testing.assert_array_equal(rows[:3], [9, 7, 0])  # the first three class-0 rows, in permutation order
    np.testing.assert_array_equal(rows[3:5], [4, 3])
    assert set(rows[5:].tolist()) <= {1, 6} and len(rows[5:]) == 4  # class 2: 4 asked, 2 exist -> replacement
    assert info["resampled"] == [2] and info["counts"] == [3, 2, 4] and info["pool_counts"] == [5, 3, 2]
    assert info["unique_rows"] == len(set(rows.tolist()))
    with pytest.raises(DataError, match="class 1"):
        shifted.select_by_counts(order, np.zeros(10, int), np.array([2, 1]), np.random.default_rng(0))


def test_clipped_noise():
    x = np.array([[-1.0, -0.5, 0.0, 0.5, 1.0]] * 2000, dtype=np.float32)
    out = add_clipped_noise(x, 0.3, np.random.default_rng(0))
    assert out.dtype == np.float32 and out.min() >= -1.0 and out.max() <= 1.0
    assert np.mean(out[:, 4] == 1.0) == pytest.approx(0.5, abs=0.05)  # half of the noise at x = 1 is clipped
    inner = out[:, 2].astype(np.float64)  # x = 0: clipped only beyond 3.3 sigma
    assert inner.std() == pytest.approx(0.3, rel=0.05) and abs(inner.mean()) < 0.03
    # computed in float64, rounded once: the same draws by hand
    eps = np.random.default_rng(0).standard_normal(x.shape) * 0.3
    np.testing.assert_array_equal(out, np.clip(x.astype(np.float64) + eps, -1, 1).astype(np.float32))
    np.testing.assert_array_equal(add_clipped_noise(x, 0.0, np.random.default_rng(0)), x)
    assert noise_seed(0, 0.1) != noise_seed(0, 0.2) != noise_seed(1, 0.2)
    assert noise_seed(0, 0.1, "train") != noise_seed(0, 0.1)


@pytest.fixture
def gaussian_files(tmp_path):
    """A three-class Gaussian world's samples (T = 1) written as the workflow does, and splits."""
    from oracle.sample_shards import write_sample_shard

    rng = np.random.default_rng(0)
    world = GaussianWorld(rng.normal(size=(K, 16)) * 0.4, std=0.3, event_shape=(1, 4, 4))
    samples = tmp_path / "all.h5"
    write_sample_shard(world, samples, n=300, seed=3, shard=0, n_shards=1, batch_size=100, progress=False)
    labels = read_rows(samples, None, fields=("label",))["label"]
    write_splits_h5(tmp_path / "splits.h5", make_splits(300, 100, [0, 1], labels=labels))
    return world, samples, tmp_path / "splits.h5"


def spec(n, prior=None, noise=0.0):
    return {"world": "base", "n": n, "labels": "hard", "hard_label": "label", "class_prior": prior,
            "noise_std": noise, "val_fraction": 0.2,
            "training": {"epochs": 1, "min_steps": 0, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.0}}


def test_prior_shifted_training_set(gaussian_files):
    _, samples, splits = gaussian_files
    data = training_set(samples, splits, spec(150, [0.8, 0.1, 0.1]), seed=1)
    pool = read_splits_h5(splits)["order"][1]
    labels = read_rows(samples, None, fields=("label",))["label"]
    counts = np.bincount(labels[data.rows], minlength=K)
    assert data.shift["counts"] == counts.tolist() and counts.sum() == 150
    assert set(data.rows.tolist()) <= set(pool.tolist())
    # class 0 is asked ~120 rows but the pool of 200 holds ~67: drawn with replacement
    assert 0 in data.shift["resampled"] and data.shift["unique_rows"] < 150
    np.testing.assert_array_equal(data.targets, labels[data.rows])  # the world's labels of the selected rows
    np.testing.assert_array_equal(data.x, read_rows(samples, data.rows, fields=("x",))["x"])
    again = training_set(samples, splits, spec(150, [0.8, 0.1, 0.1]), seed=1)
    np.testing.assert_array_equal(again.rows, data.rows)
    other = training_set(samples, splits, spec(150, [0.8, 0.1, 0.1]), seed=0)
    assert not np.array_equal(other.rows, data.rows)
    with pytest.raises(DataError, match="class_prior has 2 entries"):
        training_set(samples, splits, spec(150, [0.5, 0.5]), seed=1)


def test_noise_is_applied_after_selection(gaussian_files):
    _, samples, splits = gaussian_files
    clean = training_set(samples, splits, spec(120, [0.2, 0.4, 0.4]), seed=0)
    noisy = training_set(samples, splits, spec(120, [0.2, 0.4, 0.4], noise=0.2), seed=0)
    np.testing.assert_array_equal(noisy.rows, clean.rows)  # same rows: common random numbers
    np.testing.assert_array_equal(noisy.targets, clean.targets)
    assert noisy.shift["noise_std"] == 0.2 and noisy.x.min() >= -1 and noisy.x.max() <= 1
    want = add_clipped_noise(clean.x, 0.2, np.random.default_rng(noise_seed(0, 0.2, "train")))
    np.testing.assert_array_equal(noisy.x, want)
    # a row drawn twice gets two noise draws
    dup = np.flatnonzero(np.bincount(noisy.rows) > 1)
    if dup.size:
        where = np.flatnonzero(noisy.rows == dup[0])
        assert not np.array_equal(noisy.x[where[0]], noisy.x[where[1]])
    plain = training_set(samples, splits, spec(120), seed=0)  # no prior: the seed's nested prefix
    np.testing.assert_array_equal(plain.rows, read_splits_h5(splits)["order"][0][:120])
    assert plain.shift == {}


def test_noisy_test_set_has_the_worlds_density_at_the_stored_x(gaussian_files, tmp_path):
    world, samples, splits = gaussian_files
    out = tmp_path / "noise0.5" / "test.h5"
    stats = write_noisy_test_set(world, samples, splits, out, 0.5, seed=11, batch_size=32)
    test_rows = read_splits_h5(splits)["test"]
    fields = ("x", "source_class", "label", "loglik", "index")
    clean = read_rows(samples, test_rows, fields)
    noisy = read_rows(out, None, fields)
    assert noisy["attrs"]["noise_std"] == 0.5 and noisy["attrs"]["derived_test_set"]
    np.testing.assert_array_equal(noisy["label"], clean["label"])
    np.testing.assert_array_equal(noisy["index"], clean["index"])
    np.testing.assert_array_equal(noisy["x"], add_clipped_noise(clean["x"], 0.5, np.random.default_rng(11)))
    # log p(x'|k) written out for isotropic Gaussians at the stored float32 x'
    x = noisy["x"].reshape(len(test_rows), -1).astype(np.float64)
    d2 = ((x[:, None, :] - world.means.numpy()[None]) ** 2).sum(-1)
    want = -0.5 * d2 / 0.3**2 - 0.5 * 16 * math.log(2 * math.pi * 0.3**2)
    np.testing.assert_allclose(noisy["loglik"], want, rtol=1e-12, atol=1e-9)
    # what the file reports, against a direct computation
    lp = log_posterior(clean["loglik"]).numpy()
    ln = log_posterior(want).numpy()
    kl = (np.exp(lp) * (lp - ln)).sum(1)
    assert stats["posterior_shift"]["mean"] == pytest.approx(kl.mean(), rel=1e-9)
    assert stats["oracle_accuracy_noisy"]["mean"] == pytest.approx(np.mean(ln.argmax(1) == clean["label"]))
    assert stats["bayes_accuracy_clean"]["mean"] == pytest.approx(np.exp(lp.max(1)).mean(), rel=1e-12)
    assert stats["n"] == len(test_rows) and stats["sigma"] == 0.5
    # as an evaluation set: the file's rows in order, indexed by the world's rows
    ev = evaluation_set(out, splits)
    np.testing.assert_array_equal(ev.rows, test_rows)
    np.testing.assert_array_equal(ev.x, noisy["x"])
    np.testing.assert_allclose(ev.log_p, ln, rtol=1e-12, atol=1e-12)
    short = evaluation_set(out, splits, limit=10)
    np.testing.assert_array_equal(short.rows, test_rows[:10])


def test_posterior_shift_is_zero_without_noise():
    rng = np.random.default_rng(2)
    lp = log_posterior(torch.from_numpy(rng.normal(size=(50, 4)))).numpy()
    labels = lp.argmax(1)
    out = posterior_shift(lp, lp, labels)
    assert out["posterior_shift"]["mean"] == 0.0 and out["argmax_agreement"]["mean"] == 1.0
    assert out["oracle_accuracy_noisy"]["mean"] == 1.0
