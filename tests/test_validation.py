"""oracle.validation.run.run_validation end to end on sklearn digits with a tiny flow world."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from oracle.validation import artifacts
from oracle.validation import run as validation
from oracle.errors import ConfigError
from oracle.flow_checkpoints import build_flow
from oracle.worlds import FlowWorld

PARAMS = {"enabled": True, "n_samples": 300, "inception_weights": None, "resnet_weights": None,
          "feature_epochs": 4, "memorization_threshold": None, "memorization_quantile": 0.05,
          "stability_noise_std": 1e-3, "density_rows": 1000, "split_consistency_seeds": 3, "is_splits": 5}




@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    imgs = np.round(d.images * (255.0 / 16.0)).astype(np.uint8)[:, None]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(y))
    imgs, y = imgs[perm], y[perm]
    return imgs[:900], y[:900], imgs[900:], y[900:]


@pytest.fixture(scope="module")
def ideal(digits, tmp_path_factory):
    """Samples = held-out real images: what a perfect generator would produce."""
    tr, ytr, te, yte = digits
    samples = te[:450].astype(np.float32) / 127.5 - 1
    path = tmp_path_factory.mktemp("val") / "feature_net.pt"
    res = validation.run_validation(tr, ytr, te[450:], yte[450:], samples, yte[:450], PARAMS,
                                    dataset_name="digits", feature_net_path=path, seed=0)
    return res, path


def test_ideal_generator_passes_every_check(ideal):
    res, path = ideal
    assert path.is_file()
    assert res["primary_space"] == "domain"
    space = res["feature_spaces"]["domain"]
    assert space["frechet_name"] == "FD (domain features)"
    assert "digits train split" in space["feature_space"]
    # held-out real images are as far from train as the other held-out set
    assert space["frechet_samples_train"] == pytest.approx(space["frechet_test_train"], rel=0.5)
    assert 1 <= space["inception_score_samples"]["mean"] <= 10
    assert not res["split_consistency"]["oracle_mismatch"]
    assert not res["split_consistency"]["test_mismatch"]
    mem = res["memorization"]
    assert mem["rate"] == pytest.approx(mem["test_rate"], abs=0.06)
    cov = res["coverage"]["naeem"]
    assert cov["coverage"] == pytest.approx(cov["expected_if_same_distribution"], abs=0.05)
    assert res["coverage"]["paper_rule"]["coverage"] == pytest.approx(0.9, abs=0.01)
    for c, d in res["diversity"].items():
        assert 0.6 < d["variance_ratio"] < 1.6, (c, d)
    assert len(res["nn_distances"]["samples_to_train"]) == 300  # n_samples caps the 450 rows
    assert res["samples_clipped_fraction"] == 0.0
    json.dumps(res)  # JSON-able as returned


def test_rerun_reloads_the_feature_net_and_is_deterministic(digits, ideal):
    res, path = ideal
    tr, ytr, te, yte = digits
    samples = te[:450].astype(np.float32) / 127.5 - 1
    again = validation.run_validation(tr, ytr, te[450:], yte[450:], samples, yte[:450], PARAMS,
                                      dataset_name="digits", feature_net_path=path, seed=0)
    res = {k: v for k, v in res.items() if k != "timings_s"}
    again = {k: v for k, v in again.items() if k != "timings_s"}
    assert again == res


def test_copies_of_training_images_are_flagged_as_memorized(digits):
    tr, ytr, te, yte = digits
    copies = tr[:300].astype(np.float32) / 127.5 - 1
    res = validation.run_validation(tr, ytr, te, yte, copies, ytr[:300], {**PARAMS, "feature_epochs": 2},
                                    dataset_name="digits")
    assert res["memorization"]["rate"] == 1.0
    assert res["memorization"]["median_nn"] == pytest.approx(0.0, abs=1e-9)
    assert res["memorization"]["test_rate"] < 0.2


def test_flow_world_checks_and_tables(digits, tmp_path):
    tr, ytr, te, yte = digits
    spec = {"in_channels": 1, "img_size": 8, "patch_size": 2, "channels": 16, "num_blocks": 2,
            "layers_per_block": 1, "head_dim": 8, "num_classes": 10}
    world = FlowWorld(build_flow(spec, seed=0))
    x, y = world.sample(120, torch.Generator().manual_seed(0))
    params = {**PARAMS, "n_samples": 120, "feature_epochs": 1, "split_consistency_seeds": 2, "density_rows": 40}
    res = validation.run_validation(tr, ytr, te, yte, x.numpy(), y.numpy(), params, world,
                                    dequant_std=0.05, dataset_name="digits")
    stab = res["posterior_stability"]
    assert res["bpd"]["test"]["n"] == res["bpd"]["train"]["n"] == 40  # density_rows of each
    assert stab["n"] == 40 and stab["mean_kl"] >= 0 and math.isfinite(stab["se"])
    for split in ("test", "train"):
        for kind in ("conditional", "marginal"):
            b = res["bpd"][split][kind]
            assert b["pixel_scale"]["bpd"] - b["model_scale"]["bpd"] == pytest.approx(math.log2(127.5))
    # marginal p(x) >= pi_y p(x|y): marginal bpd <= conditional bpd + log2(K)/D
    t = res["bpd"]["test"]
    assert t["marginal"]["model_scale"]["bpd"] <= t["conditional"]["model_scale"]["bpd"] + math.log2(10) / 64 + 1e-12
    t3 = artifacts.validation_table("checks", res, "digits")
    assert "FD (domain features) ↓" in t3.columns and "Post. stab. KL ↓" in t3.columns
    t4 = artifacts.validation_table("summary", res, "digits")
    assert "Test BPD ([-1, 1] scale, marginal)" in set(t4["Metric"])
    paths = artifacts.nn_distances_figure(res, tmp_path / "fig4")
    assert paths["pdf"].is_file() and paths["png"].is_file()


def test_bad_params_are_rejected(digits):
    tr, ytr, te, yte = digits
    samples = te[:50].astype(np.float32) / 127.5 - 1
    with pytest.raises(ConfigError, match="split_consistency_seeds"):
        validation.run_validation(tr, ytr, te, yte, samples, yte[:50], {**PARAMS, "split_consistency_seeds": 1})
    with pytest.raises(ConfigError, match="missing"):
        validation.run_validation(tr, ytr, te, yte, samples, yte[:50], {"n_samples": 3})
    with pytest.raises(ConfigError, match="is_splits"):
        validation.run_validation(tr, ytr, te, yte, samples, yte[:50], {**PARAMS, "is_splits": 51})


def test_flow_world_posteriors_run_class_batch_classes_per_pass(digits):
    """Posterior stability and BPD score K classes per image: like the sample shards, they take
    `class_batch` classes per flow pass (ImageNet: 1,000 classes in one pass does not fit in
    memory; found by the imagenet64 rehearsal)."""
    tr, ytr, te, yte = digits
    spec = {"in_channels": 1, "img_size": 8, "patch_size": 2, "channels": 16, "num_blocks": 2,
            "layers_per_block": 1, "head_dim": 8, "num_classes": 10}
    world = FlowWorld(build_flow(spec, seed=0))
    x, y = world.sample(40, torch.Generator().manual_seed(0))
    seen = []
    inner = world.log_likelihood_classes

    def counting(xb, classes):
        seen.append(int(classes.numel()))
        return inner(xb, classes)

    world.log_likelihood_classes = counting
    params = {**PARAMS, "n_samples": 40, "feature_epochs": 1, "split_consistency_seeds": 2, "is_splits": 2,
              "density_rows": 10}
    res = validation.run_validation(tr, ytr, te, yte, x.numpy(), y.numpy(), params, world, dequant_std=0.05,
                                    dataset_name="digits", class_batch=4)
    assert seen and max(seen) == 4 and 2 in seen  # 10 classes as 4 + 4 + 2
    assert math.isfinite(res["posterior_stability"]["mean_kl"]) and "test" in res["bpd"]
