"""The oracle validation stage (paper section 2.3, appendix B, Tables 3-4, Figure 4) as one call.

``run_validation`` compares oracle samples with the real images the flow was trained on and
with held-out real images, in one or two feature spaces, and returns a JSON-able dict; the
Snakemake script only reads files and writes the result. ``table3``, ``table4`` and
``figure4`` turn that dict into the paper's artifacts.

Conventions (the choices the paper leaves open, made explicit):

- Reference real images are on the flow's training distribution: ``uint8/127.5 - 1`` plus
  Gaussian dequantization noise of std ``dequant_std`` (seeded per row). Oracle samples carry
  that noise too (no denoising step, DESIGN rule 5), so clean real images would make every
  distance look worse for a reason that is not the flow's fault. Texture is reported against
  both noisy and clean real images.
- Samples are clipped to [-1, 1] before feature extraction and texture (the image as displayed);
  the fraction of clipped pixel values is reported. Posterior stability uses the stored x.
- The "primary" feature space (coverage, memorization, diversity, split consistency, Figure 4)
  is ResNet when ``resnet_weights`` is given (as in appendix B), else a domain CNN trained on
  the real training split. Inception (``inception_weights``) adds FID and IS. Every block says
  which space it lives in; "FID" appears only for Inception (``oracle.validation.features``).
- Coverage uses held-out (test) real images; memorization measures generated->train nearest
  neighbours, with held-out test->train distances as the baseline a non-memorizing generator
  should match.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from oracle.validation import features as ft
from oracle.validation.pretrained_nets import load_inception, load_resnet
from oracle.validation import density_checks as dc
from oracle.validation import metrics as mt
from oracle.validation.split_consistency import split_consistency
from oracle.errors import ConfigError, OracleError

__all__ = ["VALIDATION_KEYS", "run_validation"]

VALIDATION_KEYS = ("n_samples", "inception_weights", "resnet_weights", "feature_epochs",
                   "memorization_threshold", "memorization_quantile", "stability_noise_std", "density_rows",
                   "split_consistency_seeds", "is_splits")

# The paper's absolute memorization threshold (appendix B.5, Figure 4), in its feature space.
PAPER_MEMORIZATION_THRESHOLD = 10.0


class _ImageView:
    """Rows of an image array as float32 on [-1, 1], read lazily by slices.

    uint8 rows map to ``x/127.5 - 1`` plus ``noise_std`` Gaussian noise drawn from
    ``default_rng([seed, row])`` (the same noise for a row whatever the batch size); float rows
    are optionally clipped to [-1, 1]. Works over numpy arrays and h5py datasets.
    """

    def __init__(self, images, n: int | None = None, noise_std: float = 0.0, seed: int = 0,
                 clip: bool = False):
        self.images, self.noise_std, self.seed, self.clip = images, float(noise_std), int(seed), clip
        self.n = int(images.shape[0]) if n is None else min(int(n), int(images.shape[0]))
        self.shape = (self.n, *tuple(images.shape[1:]))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("_ImageView supports contiguous slices only")
        start, stop, _ = key.indices(self.n)
        raw = np.asarray(self.images[start:stop])
        if raw.dtype == np.uint8:
            x = raw.astype(np.float32) / np.float32(127.5) - np.float32(1.0)
            if self.noise_std > 0:
                for i in range(x.shape[0]):
                    rng = np.random.default_rng([self.seed, start + i])
                    x[i] += np.float32(self.noise_std) * rng.standard_normal(x.shape[1:], dtype=np.float32)
            return x
        x = raw.astype(np.float32)
        return np.clip(x, -1.0, 1.0) if self.clip else x


def _timed(timings: dict, key: str):
    class _T:
        def __enter__(self):
            self.t = time.time()

        def __exit__(self, *exc):
            timings[key] = round(time.time() - self.t, 3)
    return _T()


def _check_params(params: Mapping) -> dict:
    missing = [k for k in VALIDATION_KEYS if k not in params]
    if missing:
        raise ConfigError(f"validation config: missing key(s) {missing}")
    p = {k: params[k] for k in VALIDATION_KEYS}
    if int(p["split_consistency_seeds"]) < 2:
        raise ConfigError(f"config key 'validation.split_consistency_seeds'={p['split_consistency_seeds']}: "
                          "expected >= 2 (a spread over seeds is needed for the mismatch flag)")
    if not 0 < float(p["memorization_quantile"]) < 1:
        raise ConfigError(f"config key 'validation.memorization_quantile'={p['memorization_quantile']}: "
                          "expected a number in (0, 1)")
    return p


def _check_images(name: str, x, labels, shape: tuple | None) -> np.ndarray:
    if len(x.shape) != 4:
        raise OracleError(f"run_validation: {name} must be [n, C, H, W], got shape {tuple(x.shape)}")
    if shape is not None and tuple(x.shape[1:]) != shape:
        raise OracleError(f"run_validation: {name} has image shape {tuple(x.shape[1:])}, expected {shape} "
                          "(the real images' shape)")
    y = np.asarray(labels)
    if y.shape != (x.shape[0],):
        raise OracleError(f"run_validation: {name} labels have shape {y.shape}, expected ({x.shape[0]},)")
    return y.astype(np.int64)


def _naeem_expected(n_real: int, n_fake: int, k: int) -> float:
    """Coverage (Naeem rule) expected when reals and fakes are i.i.d. from one distribution."""
    return 1.0 - math.comb(n_real - 1, k) / math.comb(n_real - 1 + n_fake, k)


def _bpd_block(world, images, labels, noise_std: float, seed: int, n: int, image_batch: int,
               class_batch: int | None = None) -> dict:
    """Conditional (true label) and marginal bits/dim of real images under the world's flow."""
    from oracle.posterior import log_likelihoods, pass_rows

    view = _ImageView(images, n=n, noise_std=noise_std, seed=seed)
    x = torch.from_numpy(view[0:view.n])
    ll = log_likelihoods(world, x, class_batch=class_batch, image_batch=image_batch,
                         max_rows=pass_rows(image_batch, class_batch)).numpy()  # [n, K] nats
    y = np.asarray(labels[:view.n], dtype=np.int64)
    log_prior = np.log(world.prior.double().cpu().numpy())
    cond = ll[np.arange(view.n), y]
    marg = np.logaddexp.reduce(ll + log_prior[None, :], axis=1)
    d = int(np.prod(view.shape[1:]))
    to_pixels = dc.uint8_scale_log_det(d)
    return {"n": int(view.n),
            "conditional": {"model_scale": dc.bits_per_dim(cond, d),
                            "pixel_scale": dc.bits_per_dim(cond, d, to_pixels)},
            "marginal": {"model_scale": dc.bits_per_dim(marg, d),
                         "pixel_scale": dc.bits_per_dim(marg, d, to_pixels)}}


def _feature_net(kind: str, p: Mapping, train_images, train_labels, *, seed: int, device,
                 dataset_name: str, feature_net_path, progress) -> torch.nn.Module:
    if kind == "inception":
        return load_inception(p["inception_weights"]).to(device)
    if kind == "resnet":
        return load_resnet(p["resnet_weights"]).to(device)
    if feature_net_path is not None and Path(feature_net_path).is_file():
        net = ft.load_feature_net(feature_net_path, map_location=device)
        info = net.train_info
        # reuse only a net trained with these settings on a training set of this size
        if (info.get("epochs"), info.get("seed"), info.get("n_train"), net.config["dataset_name"]) == \
                (int(p["feature_epochs"]), int(seed), int(train_images.shape[0]), dataset_name):
            return net
    net = ft.train_domain_feature_net(np.asarray(train_images), np.asarray(train_labels),
                                      epochs=int(p["feature_epochs"]), seed=seed, device=device,
                                      dataset_name=dataset_name, progress=progress)
    if feature_net_path is not None:
        ft.save_feature_net(feature_net_path, net)
    return net


def run_validation(train_images, train_labels, test_images, test_labels, sample_x, sample_y,
                   params: Mapping, world=None, *, dequant_std: float = 0.0, seed: int = 0,
                   device: str | torch.device = "cpu", dataset_name: str = "real",
                   feature_net_path: str | os.PathLike | None = None, batch_size: int = 128,
                   class_batch: int | None = None, progress: bool | None = None) -> dict:
    """Every validation metric of the paper for one oracle world; returns a JSON-able dict.

    Args:
        train_images, test_images: real uint8 ``[N, C, H, W]`` (numpy or h5py datasets).
        train_labels, test_labels: int ``[N]``.
        sample_x: oracle samples float32 ``[n, C, H, W]`` on [-1, 1] (the shard ``x``);
            sample_y: their source classes ``[n]``. The first ``params["n_samples"]`` rows are used.
        params: the ``validation`` config section (keys ``VALIDATION_KEYS``); ``density_rows``
            is how many rows each flow-density check scores (posterior stability: the first
            oracle samples, each costing 2 K flow passes; bits/dim: the first real test and
            train images, K passes each).
        world: the oracle world (``oracle.worlds``); None skips posterior stability and BPD.
        dequant_std: the flow's Gaussian dequantization std in [-1, 1] units (added to real
            reference images and used for BPD).
        feature_net_path: where the domain CNN is saved / reloaded (resume), or None.

    Returns a dict with ``feature_spaces`` (per space: name, metric names, Frechet distances,
    IS), ``primary_space``, ``coverage``, ``memorization``, ``nn_distances`` (Figure 4 arrays
    as lists), ``diversity``, ``texture``, ``split_consistency``, ``posterior_stability``,
    ``bpd``, ``counts`` and ``timings_s``.
    """
    p = _check_params(params)
    device = torch.device(device)
    y_train = _check_images("train_images", train_images, train_labels, None)
    shape = tuple(train_images.shape[1:])
    y_test = _check_images("test_images", test_images, test_labels, shape)
    y_samp = _check_images("sample_x", sample_x, sample_y, shape)
    n = min(int(p["n_samples"]), int(sample_x.shape[0]))
    if n < 2:
        raise OracleError(f"run_validation: need >= 2 samples, got {n}")
    if int(p["is_splits"]) > n:
        raise ConfigError(f"config key 'validation.is_splits'={p['is_splits']} exceeds the {n} samples")
    y_samp = y_samp[:n]

    train_ref = _ImageView(train_images, noise_std=dequant_std, seed=seed * 3 + 1)
    test_ref = _ImageView(test_images, noise_std=dequant_std, seed=seed * 3 + 2)
    samples = _ImageView(sample_x, n=n, clip=True)
    timings: dict[str, float] = {}
    out: dict[str, Any] = {
        "counts": {"train": int(train_ref.n), "test": int(test_ref.n), "samples": int(n)},
        "dequant_std": float(dequant_std), "seed": int(seed), "feature_spaces": {},
    }
    # fraction of sample pixel values that clipping to [-1, 1] changes
    outside = 0
    for start in range(0, n, 1024):
        outside += int((np.abs(np.asarray(sample_x[start:min(start + 1024, n)])) > 1.0).sum())
    out["samples_clipped_fraction"] = outside / (n * int(np.prod(shape)))

    kinds = (["inception"] if p["inception_weights"] else []) + \
        (["resnet"] if p["resnet_weights"] else ["domain"])
    primary = kinds[-1]
    feats: dict[str, dict[str, np.ndarray]] = {}
    for kind in kinds:
        with _timed(timings, f"features_{kind}"):
            net = _feature_net(kind, p, train_images, y_train, seed=seed, device=device,
                               dataset_name=dataset_name, feature_net_path=feature_net_path,
                               progress=progress)
            f_tr, _ = ft.features_and_probs(net, train_ref, batch_size, device, want_probs=False)
            f_te, p_te = ft.features_and_probs(net, test_ref, batch_size, device)
            f_s, p_s = ft.features_and_probs(net, samples, batch_size, device)
        feats[kind] = {"train": f_tr, "test": f_te, "samples": f_s}
        splits = int(p["is_splits"])
        block = {
            "feature_space": ft.feature_space_name(net),
            "feature_kind": net.feature_kind,
            "frechet_name": ft.frechet_metric_name(net),
            "is_name": ft.inception_score_name(net),
            "feature_dim": int(f_s.shape[1]),
            "frechet_samples_train": mt.frechet_distance_features(f_s, f_tr),
            "frechet_samples_test": mt.frechet_distance_features(f_s, f_te),
            "frechet_test_train": mt.frechet_distance_features(f_te, f_tr),
            "inception_score_samples": dict(zip(("mean", "std"), mt.inception_score(p_s, splits))),
            "inception_score_test": dict(zip(("mean", "std"), mt.inception_score(p_te, min(splits, len(p_te))))),
            "num_classes_head": int(p_s.shape[1]),
        }
        if kind == "domain":
            block["train_info"] = dict(getattr(net, "train_info", {}))
        out["feature_spaces"][kind] = block
        del net

    out["primary_space"] = primary
    f = feats[primary]
    with _timed(timings, "coverage"):
        paper = mt.coverage(f["test"], f["samples"], k=1, quantile=0.9, rule="adaptive")
        naeem = mt.coverage(f["test"], f["samples"], k=5, rule="naeem")
        naeem["expected_if_same_distribution"] = _naeem_expected(len(f["test"]), n, 5)
        out["coverage"] = {"paper_rule": paper, "naeem": naeem, "real_set": "test"}
    with _timed(timings, "memorization"):
        if p["memorization_threshold"] is not None:
            thr, source = float(p["memorization_threshold"]), "config (absolute)"
        else:
            q = float(p["memorization_quantile"])
            thr = mt.calibrated_memorization_threshold(f["train"], quantile=q)
            source = f"calibrated: quantile {q} of leave-one-out train NN distances"
        gen = mt.memorization(f["samples"], f["train"], thr)
        base = mt.memorization(f["test"], f["train"], thr)
        out["memorization"] = {
            "threshold": thr, "threshold_source": source,
            "rate": gen["rate"], "median_nn": gen["median_nn"],
            "test_rate": base["rate"], "test_median_nn": base["median_nn"],
            "rate_at_paper_threshold": float(np.mean(gen["nn_distances"] <= PAPER_MEMORIZATION_THRESHOLD)),
        }
        out["nn_distances"] = {"samples_to_train": gen["nn_distances"].tolist(),
                               "test_to_train": base["nn_distances"].tolist(), "threshold": thr,
                               "feature_space": out["feature_spaces"][primary]["feature_space"]}
    with _timed(timings, "diversity"):
        out["diversity"] = {str(c): v for c, v in mt.diversity_ratios(
            f["train"], f["samples"], y_train, y_samp, max_samples=2000, seed=seed).items()}
    with _timed(timings, "texture"):
        noisy = mt.texture_variance_ratio(train_ref, samples, y_train, y_samp)
        clean = mt.texture_variance_ratio(train_images, samples, y_train, y_samp)
        out["texture"] = {"vs_noisy_real": {str(c): v for c, v in noisy.items()},
                          "vs_clean_real": {str(c): v for c, v in clean.items()}}
    with _timed(timings, "split_consistency"):
        out["split_consistency"] = split_consistency(
            f["train"], f["test"], f["samples"], n_seeds=int(p["split_consistency_seeds"]), seed=seed)
        out["split_consistency"]["feature_space"] = out["feature_spaces"][primary]["feature_space"]

    if world is not None:
        from oracle.posterior import log_likelihoods, log_posterior, pass_rows

        def log_post(xb: torch.Tensor) -> torch.Tensor:
            return log_posterior(log_likelihoods(world, xb, class_batch=class_batch,
                                                 max_rows=pass_rows(batch_size, class_batch)),
                                 world.prior, world.label_temperature)

        rows = int(p["density_rows"])
        with _timed(timings, "posterior_stability"):
            m = min(rows, n)
            xs = torch.from_numpy(np.asarray(sample_x[:m], dtype=np.float32))
            gen_t = torch.Generator().manual_seed(seed)
            out["posterior_stability"] = dc.posterior_stability(
                log_post, xs, float(p["stability_noise_std"]), gen_t, batch_size=batch_size)
        with _timed(timings, "bpd"):
            out["bpd"] = {
                "dequant_std": float(dequant_std),
                "test": _bpd_block(world, test_images, y_test, dequant_std, seed * 3 + 2,
                                   min(rows, len(y_test)), batch_size, class_batch),
                "train": _bpd_block(world, train_images, y_train, dequant_std, seed * 3 + 1,
                                    min(rows, len(y_train)), batch_size, class_batch),
                "convention": "x = uint8/127.5 - 1 + N(0, dequant_std^2); model_scale = bits/dim of "
                              "that density on [-1, 1]; pixel_scale = model_scale + log2(127.5)",
            }
    out["timings_s"] = timings
    return out


# --------------------------------------------------------------------------------------------
# Tables 3 and 4, Figure 4
# --------------------------------------------------------------------------------------------
