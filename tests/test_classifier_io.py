"""oracle.classifiers.checkpoints, .targets and .data: stored models, training targets, and
the rows a classifier trains and is scored on, each against a direct computation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from oracle.classifiers.build import build_classifier
from oracle.classifiers.checkpoints import FORMAT, load_model, save_model
from oracle.classifiers.data import curve_monitor, evaluation_set, training_set
from oracle.classifiers.specs import effective_epochs
from oracle.classifiers.predict import predict_log_probs
from oracle.classifiers.targets import HARD_LABELS, training_targets
from oracle.classifiers.train import train_classifier
from oracle.errors import ConfigError, DataError
from oracle.io.shards import ShardWriter
from oracle.io.splits import make_splits, training_indices, write_splits_h5
from oracle.posterior import log_posterior

K = 3
PRIOR = [0.2, 0.3, 0.5]
T = 2.0


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
    attrs = {"oracle_sha256": "0" * 64, "prior": PRIOR, "label_temperature": T, "base_temperature": 1.0,
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


def _one_line_naming(exc_info, path):
    msg = str(exc_info.value)
    assert str(path) in msg and "\n" not in msg, msg


# --------------------------------------------------------------------------- stored models
def _trained_bn_model():
    """A test_resnet whose BatchNorm running statistics are no longer the initial 0 / 1, so a
    round trip that lost the buffers would change its eval-mode logits."""
    model = build_classifier("test_resnet", K, 1, 8, input_size=16, seed=3)
    with torch.no_grad():
        model.train()(torch.randn(16, 1, 8, 8, generator=torch.Generator().manual_seed(1)) + 0.7)
    assert any(float(b.abs().max()) > 0 for n, b in model.named_buffers() if n.endswith("running_mean"))
    return model.eval()


def test_model_round_trip_gives_identical_logits_in_eval_mode(tmp_path):
    model = _trained_bn_model()
    path = tmp_path / "model.pt"
    save_model(path, model, meta={"arch": "test_resnet", "N": 25})
    back, meta = load_model(path)
    assert meta == {"arch": "test_resnet", "N": 25} and back.spec == model.spec
    assert not any(m.training for m in back.modules())  # eval mode throughout
    a, b = model.state_dict(), back.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # weights and buffers
    x = torch.randn(5, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(x), back(x))  # same weights, same shapes, same process


def test_round_trip_needs_no_pretrained_file(tmp_path):
    weights = tmp_path / "pretrained.pth"
    torch.save(build_classifier("test_resnet", 5, 1, 8, seed=1).backbone.state_dict(), weights)
    model = build_classifier("test_resnet", K, 1, 8, pretrained_path=weights, seed=2).eval()
    save_model(tmp_path / "model.pt", model)
    weights.unlink()  # the state dict holds every weight
    back, meta = load_model(tmp_path / "model.pt")
    assert meta == {} and back.spec["pretrained_path"] == str(weights)
    x = torch.randn(4, 1, 8, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(x), back(x))


def test_missing_or_damaged_model_file_names_it(tmp_path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(DataError, match=r"does not exist.*train_classifier") as exc:
        load_model(missing)
    _one_line_naming(exc, missing)
    path = tmp_path / "model.pt"
    save_model(path, build_classifier("test_resnet", K, 1, 8, seed=0))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataError, match=rf"{re.escape(str(path))}.*unreadable") as exc:
        load_model(path)
    _one_line_naming(exc, path)
    other = tmp_path / "other.pt"
    torch.save({"format": "oracle-classifier-train/1", "model": {}}, other)
    with pytest.raises(DataError, match="not a classifier checkpoint") as exc:
        load_model(other)
    _one_line_naming(exc, other)


@pytest.mark.parametrize("damage,why", [("no_spec", "'spec'"), ("missing_weight", "backbone.fc.weight"),
                                        ("wrong_shape", "size mismatch")])
def test_classifier_file_that_does_not_rebuild_names_it(tmp_path, damage, why):
    """A file of the right format whose spec or weights do not fit (other code, hand edits)
    is a DataError naming the file in one line, not a KeyError or a multi-line RuntimeError."""
    path = tmp_path / "model.pt"
    save_model(path, build_classifier("test_resnet", K, 1, 8, seed=0))
    blob = torch.load(path, weights_only=True)
    assert blob["format"] == FORMAT
    if damage == "no_spec":
        del blob["spec"]
    elif damage == "missing_weight":
        del blob["state_dict"]["backbone.fc.weight"]
    else:
        blob["state_dict"]["backbone.fc.weight"] = torch.zeros(K + 1, 3)
    torch.save(blob, path)
    with pytest.raises(DataError, match=rf"does not rebuild.*{re.escape(why)}") as exc:
        load_model(path)
    _one_line_naming(exc, path)


# --------------------------------------------------------------------------- training targets
def test_training_targets_against_numpy():
    rng = np.random.default_rng(1)
    log_p = np.log(rng.dirichlet(np.ones(K), size=12))
    label, source = rng.integers(0, K, 12), rng.integers(0, K, 12)
    assert set(HARD_LABELS) == {"label", "posterior_argmax", "source"}
    cases = {"label": label, "posterior_argmax": np.argmax(log_p, axis=1), "source": source}
    for hard, expected in cases.items():
        got = training_targets("hard", hard, label, log_p, source_class=source)
        assert got.dtype == np.int64 and got.shape == (12,)
        np.testing.assert_array_equal(got, expected)
    assert not np.array_equal(cases["label"], cases["source"])  # the modes are told apart
    soft = training_targets("soft", None, label, log_p)
    assert soft.dtype == np.float32 and soft.shape == (12, K)
    # float32 targets: agreement to float32 rounding (2^-24 relative per entry)
    np.testing.assert_allclose(soft, np.exp(log_p), rtol=1e-6, atol=0)
    np.testing.assert_allclose(soft.astype(np.float64).sum(1), 1.0, rtol=0, atol=K * 2.0**-24)


def test_soft_targets_are_renormalized():
    """log_p off by a constant per row (a posterior normalized in lower precision) still gives rows summing to 1."""
    log_p = np.log(np.array([[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]])) + np.array([[1e-4], [-3e-4]])
    soft = training_targets("soft", None, np.array([0, 1]), log_p)
    np.testing.assert_allclose(soft, [[0.2, 0.3, 0.5], [0.7, 0.2, 0.1]], rtol=1e-6, atol=0)


def test_training_targets_refusals():
    log_p = np.log(np.full((4, K), 1 / K))
    label = source = np.array([0, 1, 2, 0])
    with pytest.raises(ConfigError, match="T=3"):
        training_targets("hard", "source", label, log_p, source_class=source, label_temperature=3.0)
    # at T = 1 the source class is a draw from the posterior: allowed
    np.testing.assert_array_equal(training_targets("hard", "source", label, log_p, source_class=source,
                                                   label_temperature=1.0), source)
    with pytest.raises(ConfigError, match="source_class"):
        training_targets("hard", "source", label, log_p)
    for labels, hard in (("fuzzy", "label"), ("hard", "nearest"), ("hard", None), ("Soft", None)):
        with pytest.raises(ConfigError, match="expected"):
            training_targets(labels, hard, label, log_p)


# --------------------------------------------------------------------------- training and evaluation sets
@pytest.mark.parametrize("labels,hard_label", [("hard", "label"), ("hard", "posterior_argmax"), ("soft", None)])
def test_training_set_is_the_seeds_prefix_with_its_targets(world_files, labels, hard_label):
    samples, splits, raw = world_files
    got = training_set(samples, splits, spec(labels, hard_label), seed=1)
    rows = training_indices(raw["splits"], 1, 25)
    np.testing.assert_array_equal(got.rows, rows)
    assert not np.isin(rows, raw["splits"]["test"]).any()
    np.testing.assert_array_equal(got.x, raw["x"][rows])  # in the seed's order, not sorted
    log_p = log_posterior(raw["loglik"][rows], PRIOR, T).numpy()
    if labels == "soft":
        assert got.targets.dtype == np.float32
        np.testing.assert_allclose(got.targets, np.exp(log_p), rtol=1e-6, atol=0)  # float32 targets
    elif hard_label == "label":
        np.testing.assert_array_equal(got.targets, raw["label"][rows])  # y ~ p_T, not the source class
        assert not np.array_equal(got.targets, raw["source"][rows])
    else:
        np.testing.assert_array_equal(got.targets, log_p.argmax(1))
    assert got.soft == (labels == "soft") and got.num_classes == K
    assert got.attrs["label_temperature"] == T


def test_training_sets_of_two_sizes_are_nested(world_files):
    samples, splits, _ = world_files
    small = training_set(samples, splits, spec(n=10), seed=0)
    large = training_set(samples, splits, spec(n=30), seed=0)
    np.testing.assert_array_equal(large.rows[:10], small.rows)
    other = training_set(samples, splits, spec(n=10), seed=1)
    assert not np.array_equal(other.rows, small.rows)


def test_training_on_the_source_class_of_a_tempered_world_is_refused(world_files):
    samples, splits, _ = world_files
    with pytest.raises(ConfigError, match="T=2"):
        training_set(samples, splits, spec("hard", "source"), seed=0)


def test_evaluation_set_is_the_test_set_with_exact_posteriors(world_files):
    samples, splits, raw = world_files
    ev = evaluation_set(samples, splits)
    test = raw["splits"]["test"]
    np.testing.assert_array_equal(ev.rows, test)
    np.testing.assert_array_equal(ev.x, raw["x"][test])
    np.testing.assert_array_equal(ev.labels, raw["label"][test])
    assert ev.log_p.dtype == np.float64
    # the file's prior and T applied to the stored loglik, in float64
    ref = log_posterior(raw["loglik"][test], PRIOR, T).numpy()
    np.testing.assert_allclose(ev.log_p, ref, rtol=0, atol=1e-12)
    # p_T(y|x) ∝ pi_y p(x|y)^(1/T), by hand
    w = np.array(PRIOR) * np.exp(raw["loglik"][test] / T)
    np.testing.assert_allclose(np.exp(ev.log_p), w / w.sum(1, keepdims=True), rtol=0, atol=1e-12)
    first = evaluation_set(samples, splits, limit=7)
    np.testing.assert_array_equal(first.rows, test[:7])
    np.testing.assert_array_equal(first.x, ev.x[:7])
    np.testing.assert_array_equal(first.labels, ev.labels[:7])
    np.testing.assert_array_equal(first.log_p, ev.log_p[:7])  # row-wise: the same numbers


# --------------------------------------------------------------------------- training curves
def test_monitor_records_curves_without_changing_training(world_files):
    """The monitor sees the model in eval mode after every epoch, its numbers land in every
    record, and neither its forward passes nor its random draws change the training: a
    dropout model gives bit-identical weights with and without it (same machine, same shapes)."""
    samples, splits, _ = world_files
    data = training_set(samples, splits, spec(), seed=0)
    x, t = torch.from_numpy(data.x), torch.from_numpy(data.targets)
    hyper = {"soft": False, "epochs": 3, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01, "seed": 2,
             "num_classes": K}

    def model():
        return build_classifier("test_efficientnet", K, 1, 8, seed=0, model_kwargs={"drop_rate": 0.5})

    seen = []

    def monitor(m):
        seen.append(not any(mod.training for mod in m.modules()))
        torch.rand(1000)  # a monitor that draws from the global RNG
        return {"draws": 1000, "epoch_seen": len(seen)}

    plain, plain_history = train_classifier(model(), x, t, **hyper)
    watched, history = train_classifier(model(), x, t, **hyper, monitor=monitor)
    a, b = plain.state_dict(), watched.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [h["train_loss"] for h in history] == [h["train_loss"] for h in plain_history]
    assert seen == [True] * 3
    assert [(h["epoch"], h["draws"], h["epoch_seen"]) for h in history] == [(1, 1000, 1), (2, 1000, 2), (3, 1000, 3)]


def test_curve_monitor_on_a_trained_model(world_files):
    samples, splits, _ = world_files
    data = training_set(samples, splits, spec(), seed=0)
    ev = evaluation_set(samples, splits, limit=10)
    x, t = torch.from_numpy(data.x), torch.from_numpy(data.targets)
    watched, history = train_classifier(build_classifier("test_resnet", K, 1, 8, seed=0), x, t, soft=False,
                                        epochs=2, batch_size=8, lr=1e-3, weight_decay=0.01, seed=2,
                                        monitor=curve_monitor(ev, torch.device("cpu")))
    assert len(history) == 2 and all({"curve_acc", "curve_epistemic"} <= set(h) for h in history)
    # the last record is the final model's. Training runs in channels-last memory format and the
    # returned model in the default one, whose float32 kernels round differently: float32 tolerance
    log_q = predict_log_probs(watched, torch.from_numpy(ev.x)).numpy()
    p = np.exp(ev.log_p)
    assert history[-1]["curve_acc"] == pytest.approx(np.mean(log_q.argmax(1) == ev.labels), abs=1e-15)
    assert history[-1]["curve_epistemic"] == pytest.approx(np.mean((p * (ev.log_p - log_q)).sum(1)), rel=1e-5)


class _FixedLogits(nn.Module):
    """Logits 4 * x[:, 0, 0, :K]: elementwise, exact in float32 and independent of the batch,
    so the monitor's log q is known in float64 whatever kernels or batch sizes it uses."""

    num_classes = K

    def forward(self, x):
        return x[:, 0, 0, :K] * 4.0


def test_curve_monitor_against_numpy(world_files):
    samples, splits, _ = world_files
    ev = evaluation_set(samples, splits)
    got = curve_monitor(ev, torch.device("cpu"), batch_size=3)(_FixedLogits())
    z = ev.x[:, 0, 0, :K].astype(np.float64) * 4.0
    log_q = z - np.log(np.exp(z).sum(1, keepdims=True))
    p = np.exp(ev.log_p)
    acc = np.mean(log_q.argmax(1) == ev.labels)
    assert 0 < acc < 1  # the labels and the argmax disagree somewhere: the check can fail
    assert got["curve_acc"] == pytest.approx(acc, abs=1e-15)
    assert got["curve_epistemic"] == pytest.approx(np.mean((p * (ev.log_p - log_q)).sum(1)), rel=0, abs=1e-12)
    assert got["curve_epistemic"] > 0


@pytest.mark.parametrize(("n", "val_fraction", "batch", "expected"), [
    (70, None, 64, 50), (70, 0.2, 64, 100), (50, 0.0, 64, 100), (1000, 0.2, 64, 10), (2000, None, 64, 10),
    (45, 0.1, 8, 17)])
def test_training_epochs_count_the_rows_left_after_the_validation_split(n, val_fraction, batch, expected):
    """Epochs of a training spec (10 epochs, at least 100 steps): 70 rows are 2 batches of 64 (50
    epochs), but 56 after a 20% validation split are 1 (100 epochs). 45 rows with a 10% split
    hold out round(4.5) = 4, as train_classifier does, and fit on 41 (6 batches of 8: 17 epochs);
    the GPU-cost projection used to count round(45 * 0.9) = 40 rows (5 batches: 20 epochs).
    Checked against counting steps epoch by epoch."""
    from oracle.classifiers.specs import training_epochs, validation_rows

    training = {"epochs": 10, "batch_size": batch, "min_steps": 100}
    n_fit = n - round((val_fraction or 0.0) * n)
    assert validation_rows(n, val_fraction) == n - n_fit
    brute = 10
    while brute * -(-n_fit // batch) < 100:
        brute += 1
    assert training_epochs(training, n, val_fraction) == brute == expected


def test_effective_epochs():
    assert effective_epochs(50, 10, 64, 100) == 100  # one step per epoch
    assert effective_epochs(2000, 10, 64, 100) == 10  # 32 steps/epoch * 10 >= 100
    assert effective_epochs(1000, 1, 64, 0) == 1
    for n, e, b, m in [(37, 3, 8, 50), (640, 2, 64, 25)]:
        eff = effective_epochs(n, e, b, m)
        assert eff >= e and eff * math.ceil(n / b) >= m and (eff == e or (eff - 1) * math.ceil(n / b) < m)
