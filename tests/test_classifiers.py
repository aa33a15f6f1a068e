"""Classifier stage: input pipeline, training (hard/soft, determinism, resume), prediction, evaluation."""

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.functional as TF

import oracle.classifiers.train as training
from oracle.classifiers.build import IMAGENET_MEAN, IMAGENET_STD, InputPipeline, build_classifier
from oracle.classifiers.evaluate import evaluate_predictions, metrics_row
from oracle.classifiers.predict import predict_log_probs
from oracle.classifiers.train import train_classifier
from oracle.errors import ConfigError, DataError
from oracle.measures.calibration import expected_calibration_error

HYPER = dict(epochs=2, batch_size=16, lr=3e-3, weight_decay=0.01, seed=7)


@pytest.fixture(scope="module")
def data():
    """Three classes of 8x8 grey images told apart by brightness, in [-1, 1]."""
    g = torch.Generator().manual_seed(0)
    y = torch.arange(96) % 3
    x = (torch.randn(96, 1, 8, 8, generator=g) * 0.3 + (y.float() - 1).view(-1, 1, 1, 1) * 0.5).clamp(-1, 1)
    return x, y


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- input pipeline
def test_pipeline_maps_minus_one_one_to_imagenet_normalization():
    x = torch.rand(4, 3, 5, 5) * 2 - 1
    expected = TF.normalize((x + 1) / 2, mean=list(IMAGENET_MEAN), std=list(IMAGENET_STD))
    torch.testing.assert_close(InputPipeline(3)(x), expected, rtol=0, atol=1e-6)
    ends = InputPipeline(3)(torch.stack([torch.full((3, 1, 1), -1.0), torch.full((3, 1, 1), 1.0)]))
    for c in range(3):
        assert ends[0, c, 0, 0].item() == pytest.approx(-IMAGENET_MEAN[c] / IMAGENET_STD[c], abs=1e-6)
        assert ends[1, c, 0, 0].item() == pytest.approx((1 - IMAGENET_MEAN[c]) / IMAGENET_STD[c], abs=1e-6)


def _dyadic(*shape, seed=0):
    """Images in [-1, 1] on the grid k/64: (x + 1) * 0.5 - 0.5 and / 0.5 are exact in float32 there."""
    return torch.randint(-64, 65, shape, generator=torch.Generator().manual_seed(seed)).float() / 64


def test_pipeline_other_channel_counts_use_half_half():
    # (x+1)/2 then (.-0.5)/0.5: the identity; exactly so where no step rounds
    for c in (1, 2):
        xd = _dyadic(2, c, 4, 4)
        assert torch.equal(InputPipeline(c)(xd), xd)
        # x + 1 rounds to float32 for general x (up to half an ulp of 1, 6e-8): float32 tolerance
        x = torch.randn(2, c, 4, 4, generator=torch.Generator().manual_seed(c)).clamp(-1, 1)
        torch.testing.assert_close(InputPipeline(c)(x), x, rtol=0, atol=1e-6)


def test_pipeline_resizes_bilinearly():
    x = torch.rand(2, 3, 8, 8) * 2 - 1
    out = InputPipeline(3, input_size=16)(x)
    ref = TF.resize(TF.normalize((x + 1) / 2, list(IMAGENET_MEAN), list(IMAGENET_STD)), [16, 16],
                    interpolation=TF.InterpolationMode.BILINEAR, antialias=False)
    assert out.shape == (2, 3, 16, 16)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)


def test_classifier_applies_pipeline_first():
    model = build_classifier("test_vit", 3, 1, 8, input_size=16, seed=0).eval()

    def manual(x):  # 1 channel: the normalization is the identity, then the resize
        return model.backbone(F.interpolate(x, size=(16, 16), mode="bilinear", align_corners=False))

    with torch.no_grad():
        # on the dyadic grid the normalization is exact: the same float32 computation, same shapes
        xd = _dyadic(3, 1, 8, 8, seed=1)
        assert torch.equal(model(xd), manual(xd))
        # general x: the normalization rounds x + 1 (6e-8), which the network carries on: float32 tolerance
        x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(2)).clamp(-1, 1)
        torch.testing.assert_close(model(x), manual(x), rtol=1e-5, atol=1e-5)
    assert model.spec["input_size"] == 16 and model.num_classes == 3


# --------------------------------------------------------------------------- build errors, pretrained
def test_a_meta_backbone_has_the_shapes_of_a_real_one(tmp_path):
    real = build_classifier("test_vit", 10, 1, 8, input_size=32, seed=0)
    meta = build_classifier("test_vit", 10, 1, 8, input_size=32, meta=True)
    assert {k: v.shape for k, v in real.state_dict().items()} == {k: v.shape for k, v in meta.state_dict().items()}
    assert all(p.is_meta for p in meta.backbone.parameters()) and not any(p.is_meta for p in real.parameters())
    assert meta.spec == real.spec
    weights = tmp_path / "w.pt"
    torch.save(real.backbone.state_dict(), weights)
    with pytest.raises(ConfigError, match="meta backbone"):
        build_classifier("test_vit", 10, 1, 8, input_size=32, pretrained_path=weights, meta=True)


def test_missing_pretrained_path_raises_config_error(tmp_path):
    missing = tmp_path / "nope.pth"
    with pytest.raises(ConfigError, match="nope.pth"):
        build_classifier("test_resnet", 3, 1, 8, pretrained_path=missing)


def test_unknown_arch_and_bad_sizes_raise():
    with pytest.raises(ConfigError, match="arch"):
        build_classifier("no_such_net", 3, 1, 8)
    with pytest.raises(ConfigError, match="num_classes"):
        build_classifier("test_resnet", 1, 1, 8)


def test_pretrained_weights_load_except_head(tmp_path):
    # A 5-class, 3-channel "pretrained" model loaded into a 3-class, 1-channel classifier.
    source = build_classifier("test_resnet", 5, 3, 8, seed=1).backbone
    path = tmp_path / "weights.pth"
    torch.save(source.state_dict(), path)
    model = build_classifier("test_resnet", 3, 1, 8, pretrained_path=path, seed=2)
    report = model.pretrained_report
    assert report["dropped_head"] == ["fc.bias", "fc.weight"]
    assert report["missing"] == [] and report["unexpected"] == []
    first = source.pretrained_cfg["first_conv"] + ".weight"
    assert report["adapted"] == [first]
    got, ref = model.backbone.state_dict(), source.state_dict()
    for key in ref:
        if key.startswith("fc.") or key == first:
            continue
        assert torch.equal(got[key], ref[key]), key
    # timm's channel adaptation for one channel sums the RGB filters.
    torch.testing.assert_close(got[first], ref[first].sum(dim=1, keepdim=True))
    assert got["fc.weight"].shape == (3, ref["fc.weight"].shape[1])


def test_pretrained_from_a_trained_image_classifier(tmp_path):
    source = build_classifier("test_resnet", 3, 1, 8, seed=1)
    path = tmp_path / "classifier.pth"
    torch.save({"model": source.state_dict()}, path)  # keys backbone.* and preprocess.*
    model = build_classifier("test_resnet", 4, 1, 8, pretrained_path=path, seed=2)
    assert model.pretrained_report["unexpected"] == [] and model.pretrained_report["missing"] == []
    assert torch.equal(model.backbone.conv1[0].weight, source.backbone.conv1[0].weight)


def test_pretrained_vit_position_embedding_is_resampled(tmp_path):
    source = build_classifier("test_vit", 3, 1, 16, seed=1).backbone
    path = tmp_path / "vit.pth"
    torch.save({"state_dict": source.state_dict()}, path)
    model = build_classifier("test_vit", 3, 1, 32, pretrained_path=path, seed=2)
    assert "pos_embed" in model.pretrained_report["adapted"]


def test_pretrained_from_other_architecture_is_refused(tmp_path):
    path = tmp_path / "vit.pth"
    torch.save(build_classifier("test_vit", 3, 1, 16, seed=1).backbone.state_dict(), path)
    with pytest.raises(ConfigError, match="vit.pth"):
        build_classifier("test_resnet", 3, 1, 8, pretrained_path=path)


# --------------------------------------------------------------------------- training
def test_training_reduces_loss(data):
    x, y = data
    model = build_classifier("test_resnet", 3, 1, 8, seed=0)
    model, history = train_classifier(model, x, y, soft=False, **{**HYPER, "epochs": 3}, val_fraction=0.25)
    assert [h["epoch"] for h in history] == [1, 2, 3]
    assert history[-1]["train_loss"] < 0.7 * history[0]["train_loss"]
    assert history[0]["train_loss"] < 2 * math.log(3)  # started near chance, not diverged
    assert 0.0 <= history[-1]["val_acc"] <= 1.0 and math.isfinite(history[-1]["val_loss"])
    assert history[-1]["lr"] == pytest.approx(0.0, abs=1e-12)  # cosine reaches 0 at the end
    assert not model.training


def test_soft_one_hot_equals_hard_labels(data):
    x, y = data
    hard, _ = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **HYPER)
    soft, _ = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x,
                               F.one_hot(y, 3).to(torch.float32), soft=True, **HYPER)
    a, b = _weights(hard), _weights(soft)
    # Both losses reach the logits through the same log_softmax backward with the same incoming
    # gradient (-1/n at the label, 0 elsewhere), so the float32 gradients agree bit for bit; a
    # looser tolerance would be needed otherwise (AdamW amplifies noise in near-zero gradients).
    for k in a:
        if a[k].is_floating_point():
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)


def test_soft_labels_train_toward_the_distribution(data):
    x, y = data
    targets = torch.full((len(y), 3), 0.1)
    targets[torch.arange(len(y)), y] = 0.8
    model, history = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, targets, soft=True,
                                      **{**HYPER, "epochs": 3})
    entropy = -(targets * targets.log()).sum(1).mean().item()
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert history[-1]["train_loss"] >= entropy - 1e-6  # cross-entropy cannot beat H(t)


def test_training_is_deterministic_and_leaves_global_rng_alone(data):
    x, y = data
    rng_before = torch.get_rng_state()
    runs = []
    for _ in range(2):
        model = build_classifier("test_efficientnet", 3, 1, 8, seed=3, model_kwargs={"drop_rate": 0.2})
        model, history = train_classifier(model, x, y, soft=False, **HYPER)
        runs.append((_weights(model), history))
    assert torch.equal(torch.get_rng_state(), rng_before)
    assert _same(runs[0][0], runs[1][0])
    assert [h["train_loss"] for h in runs[0][1]] == [h["train_loss"] for h in runs[1][1]]
    other = build_classifier("test_efficientnet", 3, 1, 8, seed=3, model_kwargs={"drop_rate": 0.2})
    other, _ = train_classifier(other, x, y, soft=False, **{**HYPER, "seed": 8})
    assert not _same(runs[0][0], _weights(other))


def test_checkpoint_resume_matches_uninterrupted_run(data, tmp_path, monkeypatch):
    x, y = data
    hyper = {**HYPER, "epochs": 3}
    full, full_history = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper)

    real_save = training.torch_save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        if state["epoch"] == 1:
            raise KeyboardInterrupt  # the job is killed right after the first checkpoint

    ckpt, log_path = tmp_path / "train.ckpt", tmp_path / "train.jsonl"
    monkeypatch.setattr(training, "torch_save_atomic", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper,
                         checkpoint_path=ckpt, log_path=log_path, checkpoint_seconds=0)
    monkeypatch.setattr(training, "torch_save_atomic", real_save)
    assert len(log_path.read_text().splitlines()) == 1
    # A fresh process builds the model again (same seed: same initial weights) and resumes
    model = build_classifier("test_resnet", 3, 1, 8, seed=0)
    resumed, history = train_classifier(model, x, y, soft=False, **hyper, checkpoint_path=ckpt, log_path=log_path,
                                        checkpoint_seconds=0)
    assert _same(_weights(full), _weights(resumed))
    assert [h["train_loss"] for h in history] == [h["train_loss"] for h in full_history]
    lines = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [1, 2, 3]
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries


@pytest.mark.parametrize(("epochs", "points", "expected"), [
    (100, 10, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]),
    (15, 10, [2, 3, 5, 6, 8, 9, 11, 12, 14, 15]),
    (10, 10, list(range(1, 11))),
    (3, 10, [1, 2, 3]),
    (7, None, list(range(1, 8))),
    (5, 1, [5]),
])
def test_curve_epochs_spread_evenly_and_end_with_the_last(epochs, points, expected):
    assert training.curve_epochs(epochs, points) == expected


@pytest.mark.parametrize("points", [0, -2, 2.5])
def test_curve_epochs_rejects_a_bad_count(points):
    with pytest.raises(ConfigError, match="curve_points"):
        training.curve_epochs(10, points)


def test_sparse_monitor_leaves_training_unchanged(data):
    """The monitor runs only at `monitor_epochs`, and when it runs does not change the weights
    (its random draws are forked off)."""
    x, y = data
    hyper = {**HYPER, "epochs": 4}
    plain, _ = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper)
    seen = []

    def monitor(model):
        seen.append(torch.rand(()).item())  # draws from the global generator
        return {"probe": float(len(seen))}

    monitored, history = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False,
                                          **hyper, monitor=monitor, monitor_epochs=[2, 4])
    assert _same(_weights(plain), _weights(monitored))
    assert [h.get("probe") for h in history] == [None, 1.0, None, 2.0]


def test_checkpoints_are_spaced_by_checkpoint_seconds(data, tmp_path, monkeypatch):
    """0 s: a checkpoint after every epoch but the last (the outputs follow it); a long
    interval: none in a run shorter than it; a clock past the interval: one per interval."""
    x, y = data
    saved = []
    monkeypatch.setattr(training, "torch_save_atomic", lambda state, path: saved.append(state["epoch"]))
    hyper = {**HYPER, "epochs": 4}
    for seconds, expected in ((0, [1, 2, 3]), (3600, [])):
        saved.clear()
        train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper,
                         checkpoint_path=tmp_path / "state.pt", checkpoint_seconds=seconds)
        assert saved == expected, seconds
    now = [0.0]  # a clock that advances 40 s per epoch (the monitor runs once per epoch)
    monkeypatch.setattr(training.time, "perf_counter", lambda: now[0])
    hyper = {**HYPER, "epochs": 6}

    def tick(model):
        now[0] += 40.0
        return {}

    saved.clear()
    train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper, monitor=tick,
                     checkpoint_path=tmp_path / "state.pt", checkpoint_seconds=60)
    assert saved == [2, 4]  # 80 s and 160 s; epoch 6 is the last


@pytest.mark.parametrize("change", ["lr", "initial_weights", "targets", "truncated"])
def test_stale_or_damaged_train_state_is_discarded(data, tmp_path, monkeypatch, capsys, change):
    """A training checkpoint of another run (here: another lr, other initial weights, other
    targets) or one truncated by a kill is discarded with one printed line; the result equals a
    fresh run bit for bit."""
    x, y = data
    hyper = {**HYPER, "epochs": 3}
    real_save = training.torch_save_atomic

    def save_then_die(state, path):
        real_save(state, path)
        raise KeyboardInterrupt

    ckpt = tmp_path / "train_state.pt"
    monkeypatch.setattr(training, "torch_save_atomic", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=False, **hyper,
                         checkpoint_path=ckpt, checkpoint_seconds=0)
    monkeypatch.setattr(training, "torch_save_atomic", real_save)
    new_hyper, seed, targets = dict(hyper), 0, y
    if change == "lr":
        new_hyper["lr"] = 1e-3
    elif change == "initial_weights":
        seed = 5
    elif change == "targets":
        targets = (y + 1) % 3
    else:
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 3])
    capsys.readouterr()
    got, _ = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=seed), x, targets, soft=False,
                              **new_hyper, checkpoint_path=ckpt, checkpoint_seconds=0)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("discarding")]
    assert len(lines) == 1 and str(ckpt) in lines[0]
    fresh, _ = train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=seed), x, targets, soft=False,
                                **new_hyper)
    assert _same(_weights(got), _weights(fresh))


@pytest.mark.parametrize(
    "make, soft, error",
    [
        (lambda x, y: (x.to(torch.float64), y), False, DataError),
        (lambda x, y: (x, y + 3), False, DataError),
        (lambda x, y: (x, y.float()), False, DataError),
        (lambda x, y: (x, torch.full((len(y), 3), 0.5)), True, DataError),
        (lambda x, y: (x, F.one_hot(y, 3).float()[:, :2]), True, DataError),
    ],
)
def test_bad_training_input_raises(data, make, soft, error):
    x, y = make(*data)
    with pytest.raises(error):
        train_classifier(build_classifier("test_resnet", 3, 1, 8, seed=0), x, y, soft=soft, **HYPER)


# --------------------------------------------------------------------------- prediction and evaluation
def test_predict_log_probs_is_normalized_float64(data):
    x, _ = data
    model = build_classifier("test_convnext", 3, 1, 8, input_size=32, seed=0)
    log_q = predict_log_probs(model, x[:20], batch_size=7, device="cpu")
    assert log_q.dtype == torch.float64 and log_q.shape == (20, 3)
    # normalized in float64: exact
    torch.testing.assert_close(torch.logsumexp(log_q, dim=1), torch.zeros(20, dtype=torch.float64), rtol=0, atol=1e-12)
    with torch.no_grad():
        ref = torch.log_softmax(model.eval()(x[:20]).double(), dim=1)
    # the logits are float32 and batches of 7 vs 20 take different kernels (oneDNN picks by
    # shape and CPU model): float32 agreement, not float64 (6e-8 apart on an Intel Xeon)
    torch.testing.assert_close(log_q, ref, rtol=1e-5, atol=1e-5)


def _random_log_probs(g, n, k, scale):
    return torch.log_softmax(torch.randn(n, k, generator=g, dtype=torch.float64) * scale, dim=1)


def test_evaluate_predictions_against_independent_computation():
    g = torch.Generator().manual_seed(1)
    n, k = 500, 4
    log_p = _random_log_probs(g, n, k, 3.0)
    log_q = _random_log_probs(g, n, k, 2.0)
    y = torch.multinomial(log_p.exp(), 1, generator=g).squeeze(1)
    m = evaluate_predictions(log_q, log_p, y)
    json.dumps(m, allow_nan=False)  # plain floats and ints only
    assert m["total"]["mean"] == pytest.approx(m["aleatoric"]["mean"] + m["epistemic"]["mean"], abs=1e-12)
    p, q = log_p.exp().numpy(), log_q.exp().numpy()
    yn = y.numpy()
    assert m["total"]["mean"] == pytest.approx(np.mean(-(p * np.log(q)).sum(1)), abs=1e-12)
    assert m["aleatoric"]["mean"] == pytest.approx(np.mean(-(p * np.log(p)).sum(1)), abs=1e-12)
    assert m["acc"]["mean"] == pytest.approx(np.mean(q.argmax(1) == yn), abs=1e-15)
    assert m["acc_posterior"]["mean"] == pytest.approx(np.mean(q.argmax(1) == p.argmax(1)), abs=1e-15)
    assert m["bayes_accuracy"]["mean"] == pytest.approx(np.mean(p.max(1)), abs=1e-12)
    nll = -np.log(q[np.arange(n), yn])
    assert m["nll"]["mean"] == pytest.approx(nll.mean(), abs=1e-12)
    assert m["nll"]["se"] == pytest.approx(nll.std(ddof=1) / np.sqrt(n), rel=1e-9)
    assert m["brier"]["mean"] == pytest.approx(((q - np.eye(k)[yn]) ** 2).sum(1).mean(), abs=1e-12)
    assert m["ece"] == pytest.approx(expected_calibration_error(q, yn, 10), abs=1e-15)
    assert m["n"] == n and m["num_classes"] == k
    # calibration against labels and against the truth, by hand
    conf, pred = q.max(1), q.argmax(1)
    truth = p[np.arange(n), pred]
    assert m["overconfidence"] == pytest.approx(conf.mean() - np.mean(pred == yn), abs=1e-12)
    assert m["overconfidence_truth"] == pytest.approx(conf.mean() - truth.mean(), abs=1e-12)
    assert m["calibration_pointwise"]["mean"] == pytest.approx(np.abs(conf - truth).mean(), abs=1e-12)
    rel = m["reliability"]
    assert sum(rel["count"]) == n and len(rel["count"]) == 10
    top = int(np.argmax(rel["count"]))
    members = (conf > top / 10) & (conf <= (top + 1) / 10)
    assert rel["true_probability"][top] == pytest.approx(truth[members].mean(), abs=1e-12)
    assert all(v is None for c, v in zip(rel["count"], rel["accuracy"]) if c == 0)


def test_evaluate_predictions_of_the_oracle_itself():
    g = torch.Generator().manual_seed(2)
    log_p = _random_log_probs(g, 300, 3, 2.0)
    y = torch.multinomial(log_p.exp(), 1, generator=g).squeeze(1)
    m = evaluate_predictions(log_p, log_p, y)
    assert m["epistemic"]["mean"] == pytest.approx(0.0, abs=1e-14)
    assert m["acc_posterior"]["mean"] == 1.0
    assert m["ece_posterior"] == pytest.approx(0.0, abs=1e-15)
    assert m["calibration_pointwise"]["mean"] == pytest.approx(0.0, abs=1e-15)
    assert m["acc"]["mean"] == pytest.approx(m["bayes_accuracy"]["mean"], abs=4 * m["acc"]["se"])


def test_evaluate_predictions_rejects_bad_labels():
    log_p = torch.log(torch.full((4, 3), 1 / 3, dtype=torch.float64))
    with pytest.raises(DataError, match="labels"):
        evaluate_predictions(log_p, log_p, torch.tensor([0, 1, 2, 3]))


def test_metrics_row_has_the_report_columns():
    log_p = torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], dtype=torch.float64))
    row = metrics_row(evaluate_predictions(log_p, log_p, torch.tensor([0, 2])))
    for col in ["acc", "acc_posterior", "total", "total_se", "aleatoric", "aleatoric_se", "epistemic",
                "epistemic_se", "ece", "nll", "bayes_accuracy", "brier"]:
        assert col in row
    assert row["nll"] == pytest.approx(-(math.log(0.7) + math.log(0.8)) / 2)


def test_label_checks_have_the_labels_own_se_and_find_wrong_labels():
    """oracle_nll_minus_floor and nll_regret: their SE is the spread of y ~ p(y|x) given the
    rows (brute force over every class), so a sharp world whose 1,000 labels hold no surprise is
    not flagged, and labels drawn from another posterior are."""
    import math

    from oracle.classifiers.evaluate import evaluate_predictions

    rng = np.random.default_rng(4)
    n, k = 1000, 4
    logits = rng.normal(size=(n, k)) * 6.0  # a sharp world: most rows almost certain
    lp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    p = np.exp(lp)
    lq = np.log(0.7 * p + 0.3 / k)
    y = np.array([rng.choice(k, p=row) for row in p])
    m = evaluate_predictions(lq, lp, y)
    h = -(p * lp).sum(1)
    var = np.array([sum(p[i, c] * lp[i, c] ** 2 for c in range(k)) - h[i] ** 2 for i in range(n)])
    assert m["oracle_nll_minus_floor"]["mean"] == pytest.approx(np.mean(-lp[np.arange(n), y] - h), rel=1e-12)
    assert m["oracle_nll_minus_floor"]["se"] == pytest.approx(math.sqrt(var.sum()) / n, rel=1e-10)
    d = lp - lq
    kl = (p * d).sum(1)
    var_r = np.array([sum(p[i, c] * d[i, c] ** 2 for c in range(k)) - kl[i] ** 2 for i in range(n)])
    assert m["nll_regret"]["se"] == pytest.approx(math.sqrt(var_r.sum()) / n, rel=1e-10)
    assert abs(m["oracle_nll_minus_floor"]["mean"]) < 2.5 * m["oracle_nll_minus_floor"]["se"]
    # labels drawn from a flatter posterior than the world's: far outside the labels' own spread
    wrong = np.array([rng.choice(k, p=np.exp(0.3 * row) / np.exp(0.3 * row).sum()) for row in logits])
    w = evaluate_predictions(lq, lp, wrong)["oracle_nll_minus_floor"]
    assert w["mean"] / w["se"] > 10
