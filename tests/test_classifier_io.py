"""oracle.classifiers.checkpoints, .targets and .data: stored models, training targets, and
the rows a classifier trains and is scored on, each against a direct computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oracle.classifiers.build import build_classifier
from oracle.classifiers.checkpoints import load_model, save_model
from oracle.classifiers.data import curve_monitor, evaluation_set, training_set
from oracle.classifiers.targets import training_targets
from oracle.classifiers.train import train_classifier
from oracle.errors import ConfigError, DataError
from oracle.io.shards import ShardWriter
from oracle.io.splits import make_splits, training_indices, write_splits_h5
from oracle.posterior import log_posterior

K = 3


@pytest.fixture
def world_files(tmp_path):
    """A shard of 60 labelled 1x8x8 samples (T = 2: labels differ from source classes) and its splits."""
    rng = np.random.default_rng(0)
    n = 60
    source = rng.integers(0, K, n)
    x = (rng.normal(size=(n, 1, 8, 8)) * 0.3 + (source - 1)[:, None, None, None] * 0.5).astype(np.float32)
    label = rng.integers(0, K, n)
    loglik = rng.normal(size=(n, K)) * 2.0
    samples = tmp_path / "all.h5"
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 2.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(samples, K, (1, 8, 8), attrs) as w:
        w.write(x, source, label, loglik, np.arange(n))
    splits = make_splits(n, 20, [0, 1], labels=label, test_seed=0)
    write_splits_h5(tmp_path / "splits.h5", splits)
    return samples, tmp_path / "splits.h5", {"x": x, "source": source, "label": label, "loglik": loglik,
                                             "splits": splits}


def spec(labels="hard", hard_label="label", n=25):
    return {"world": "base", "n": n, "labels": labels, "hard_label": hard_label,
            "training": {"epochs": 2, "min_steps": 0, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01}}


def test_model_round_trip_gives_identical_logits_in_eval_mode(tmp_path):
    model = build_classifier("test_resnet", K, 1, 8, input_size=16, seed=3)
    path = tmp_path / "model.pt"
    save_model(path, model, meta={"arch": "test_resnet"})
    back, meta = load_model(path)
    assert meta == {"arch": "test_resnet"} and not back.training and back.spec == model.spec
    x = torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model.eval()(x), back(x))  # same weights, same shapes, same process


def test_missing_or_damaged_model_file_names_it(tmp_path):
    with pytest.raises(DataError, match=r"does not exist.*train_classifier"):
        load_model(tmp_path / "nope.pt")
    path = tmp_path / "model.pt"
    save_model(path, build_classifier("test_resnet", K, 1, 8, seed=0))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataError, match=rf"{path}.*unreadable"):
        load_model(path)


def test_training_targets_against_numpy():
    rng = np.random.default_rng(1)
    log_p = np.log(rng.dirichlet(np.ones(K), size=12))
    label, source = rng.integers(0, K, 12), rng.integers(0, K, 12)
    np.testing.assert_array_equal(training_targets("hard", "label", label, log_p), label)
    np.testing.assert_array_equal(training_targets("hard", "posterior_argmax", label, log_p), log_p.argmax(1))
    np.testing.assert_array_equal(training_targets("hard", "source", label, log_p, source_class=source), source)
    soft = training_targets("soft", None, label, log_p)
    assert soft.dtype == np.float32
    np.testing.assert_allclose(soft, np.exp(log_p), rtol=1e-6)
    np.testing.assert_allclose(soft.sum(1), 1.0, rtol=1e-6)
    with pytest.raises(ConfigError, match="T=3"):
        training_targets("hard", "source", label, log_p, source_class=source, label_temperature=3.0)
    for labels, hard in (("fuzzy", "label"), ("hard", "nearest")):
        with pytest.raises(ConfigError):
            training_targets(labels, hard, label, log_p)


@pytest.mark.parametrize("labels,hard_label", [("hard", "label"), ("hard", "posterior_argmax"), ("soft", None)])
def test_training_set_is_the_seeds_prefix_with_its_targets(world_files, labels, hard_label):
    samples, splits, raw = world_files
    got = training_set(samples, splits, spec(labels, hard_label), seed=1)
    rows = training_indices(raw["splits"], 1, 25)
    np.testing.assert_array_equal(got.rows, rows)
    np.testing.assert_array_equal(got.x, raw["x"][rows])
    log_p = log_posterior(raw["loglik"][rows], [0.2, 0.3, 0.5], 2.0).numpy()
    if labels == "soft":
        np.testing.assert_allclose(got.targets, np.exp(log_p), rtol=1e-6)
    elif hard_label == "label":
        np.testing.assert_array_equal(got.targets, raw["label"][rows])  # y ~ p_T, not the source class
    else:
        np.testing.assert_array_equal(got.targets, log_p.argmax(1))
    assert got.soft == (labels == "soft") and got.num_classes == K


def test_evaluation_set_is_the_test_set_with_exact_posteriors(world_files):
    samples, splits, raw = world_files
    ev = evaluation_set(samples, splits)
    test = raw["splits"]["test"]
    np.testing.assert_array_equal(ev.rows, test)
    np.testing.assert_array_equal(ev.labels, raw["label"][test])
    # p_T(y|x) ∝ pi_y p(x|y)^(1/T), by hand in float64
    w = np.array([0.2, 0.3, 0.5]) * np.exp(raw["loglik"][test] / 2.0)
    np.testing.assert_allclose(np.exp(ev.log_p), w / w.sum(1, keepdims=True), rtol=0, atol=1e-12)
    first = evaluation_set(samples, splits, limit=7)
    np.testing.assert_array_equal(first.rows, test[:7])


def test_monitor_records_curves_without_changing_training(world_files):
    samples, splits, _ = world_files
    data = training_set(samples, splits, spec(), seed=0)
    ev = evaluation_set(samples, splits, limit=10)
    x, t = torch.from_numpy(data.x), torch.from_numpy(data.targets)
    hyper = dict(soft=False, epochs=3, batch_size=8, lr=1e-3, weight_decay=0.01, seed=2, num_classes=K)
    plain, _ = train_classifier(build_classifier("test_resnet", K, 1, 8, seed=0), x, t, **hyper)
    watched, history = train_classifier(build_classifier("test_resnet", K, 1, 8, seed=0), x, t, **hyper,
                                        monitor=curve_monitor(ev, torch.device("cpu")))
    a, b = plain.state_dict(), watched.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # measuring does not touch the training
    assert len(history) == 3 and all({"curve_acc", "curve_epistemic"} <= set(h) for h in history)
    # the last record equals an independent computation on the final model
    from oracle.classifiers.predict import predict_log_probs

    log_q = predict_log_probs(watched, torch.from_numpy(ev.x)).numpy()
    p = np.exp(ev.log_p)
    assert history[-1]["curve_acc"] == pytest.approx(np.mean(log_q.argmax(1) == ev.labels), abs=1e-12)
    assert history[-1]["curve_epistemic"] == pytest.approx(np.mean((p * (ev.log_p - log_q)).sum(1)), abs=1e-12)
