"""Classifiers trained on oracle samples: build (timm), train, predict, evaluate.

The input pipeline is part of the classifier
--------------------------------------------
The oracle's posterior ``p(y|x)`` is computed on ``x`` exactly as stored in the sample
shards (float32 in [-1, 1], DESIGN rule 2). Any preprocessing a classifier wants is therefore
a layer of the classifier, never a transform of the data: ``build_classifier`` returns an
``ImageClassifier`` whose first module, ``InputPipeline``, does (paper, appendix F.2)

1. ``u = (x + 1) / 2``                      [-1, 1] -> [0, 1]
2. ``v = (u - mean_c) / std_c``              per channel: ImageNet mean/std for 3 channels;
                                            0.5/0.5 for any other channel count (for one
                                            channel that makes steps 1-2 the identity)
3. bilinear resize to ``input_size``        only when asked, for architectures whose stem or
                                            patch size needs larger inputs than the data
                                            (e.g. 8x8 digits into a ViT with 16x16 patches).

Steps 2 and 3 commute (bilinear weights sum to one), so their order is immaterial.

Training (``train_classifier``)
-------------------------------
AdamW with a cosine schedule stepped per optimizer step from ``lr`` to 0 over all epochs
(paper, Table 6: AdamW, weight decay 0.01, lr 1e-4, cosine over 40 epochs, batch 32).
Hard labels (int64 ``[n]``) use cross-entropy; soft labels (probabilities ``[n, K]``, the
oracle posterior) use the cross-entropy against the distribution, ``-sum_k t_k log q_k``.
On CUDA the forward pass runs under bf16 autocast; the loss is computed in float32.
A run is a function of (data, hyperparameters, seed, initial weights): the validation split,
the shuffling and every random draw inside the model (dropout, drop-path) come from streams
derived from ``seed``; the caller's global RNG is left untouched. With ``checkpoint_path``
the state (weights, optimizer, schedule, RNG streams, history) is saved atomically after
every epoch and a rerun resumes from it, giving the same weights as an uninterrupted run.

Evaluation (``evaluate_predictions``)
-------------------------------------
Exact quantities come from ``oracle.decomposition`` (total = aleatoric + epistemic, nats) and
``oracle.calibration``. Two label notions coexist and are reported separately:

* ``source_class``: the class a sample was drawn from, ``x ~ p(x|y)``. Accuracy, NLL, ECE and
  Brier "against labels" use it, as the paper does.
* the oracle posterior ``p(y|x)``: accuracy against its argmax, the exact calibration error
  (``ece_posterior``: ECE with the 0/1 correctness replaced by ``p(yhat|x)``) and the Brier
  score in expectation over ``y ~ p(y|x)``.

With label temperature 1 the source class *is* a draw from ``p(y|x)`` and the label-based
numbers are unbiased estimates of the posterior-based ones; with T != 1 (AFHQ, T = 500) they
measure different things and only the posterior-based ones refer to the oracle world.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from oracle import calibration as cal
from oracle.decomposition import accuracy, bayes_accuracy, decompose, mean_se
from oracle.devices import autocast, pick_device
from oracle.errors import ConfigError, DataError, OracleError
from oracle.provenance import atomic_output, torch_save_atomic

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "InputPipeline",
    "ImageClassifier",
    "build_classifier",
    "load_pretrained_backbone",
    "train_classifier",
    "predict_log_probs",
    "evaluate_predictions",
    "metrics_row",
]

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CHECKPOINT_FORMAT = "oracle-classifier-train/1"


# --------------------------------------------------------------------------- model
class InputPipeline(nn.Module):
    """x in [-1, 1] -> (x + 1) / 2 -> per-channel (v - mean) / std -> optional bilinear resize.

    Args:
        in_chans: number of channels C.
        mean, std: per-channel statistics on the [0, 1] scale; default ImageNet for C = 3,
            0.5 / 0.5 otherwise.
        input_size: side length the image is resized to (bilinear, align_corners=False), or
            None to keep the stored size.
    Shapes: [n, C, H, W] -> [n, C, H', W'] float32.
    """

    def __init__(self, in_chans: int, mean=None, std=None, input_size: int | None = None):
        super().__init__()
        if mean is None:
            mean = IMAGENET_MEAN if in_chans == 3 else (0.5,) * in_chans
        if std is None:
            std = IMAGENET_STD if in_chans == 3 else (0.5,) * in_chans
        if len(mean) != in_chans or len(std) != in_chans or min(std) <= 0:
            raise ConfigError(f"InputPipeline: mean/std need {in_chans} entries with std > 0, got {mean}, {std}")
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1))
        self.input_size = input_size

    def forward(self, x: Tensor) -> Tensor:
        x = ((x + 1.0) * 0.5 - self.mean) / self.std
        if self.input_size is not None and tuple(x.shape[-2:]) != (self.input_size, self.input_size):
            x = F.interpolate(x, size=(self.input_size, self.input_size), mode="bilinear", align_corners=False)
        return x

    def extra_repr(self) -> str:
        return f"input_size={self.input_size}"


class ImageClassifier(nn.Module):
    """``backbone(preprocess(x))``: logits [n, K] for images [n, C, H, W] in [-1, 1].

    Attributes: ``spec`` (the arguments of ``build_classifier``, enough to rebuild it),
    ``num_classes``, and ``pretrained_report`` (None or the dict of
    ``load_pretrained_backbone``).
    """

    def __init__(self, backbone: nn.Module, preprocess: InputPipeline, spec: dict):
        super().__init__()
        self.preprocess = preprocess
        self.backbone = backbone
        self.spec = dict(spec)
        self.num_classes = int(spec["num_classes"])
        self.pretrained_report: dict | None = None

    def forward(self, x: Tensor) -> Tensor:
        return self.backbone(self.preprocess(x))


def _create_timm(arch: str, num_classes: int, in_chans: int, img_size: int, model_kwargs: dict) -> nn.Module:
    import timm

    if not timm.is_model(arch):
        close = timm.list_models(f"*{arch.split('_')[0]}*")[:8]
        raise ConfigError(f"arch={arch!r} is not a timm model name; similar names: {close}")
    kwargs = dict(pretrained=False, num_classes=num_classes, in_chans=in_chans, **model_kwargs)
    try:
        # ViT/Swin/... size their position embeddings and windows from img_size.
        return timm.create_model(arch, img_size=img_size, **kwargs)
    except TypeError as err:
        if "img_size" not in str(err):
            raise
    return timm.create_model(arch, **kwargs)


def build_classifier(
    arch: str,
    num_classes: int,
    in_chans: int,
    img_size: int,
    input_size: int | None = None,
    pretrained_path: str | os.PathLike | None = None,
    *,
    seed: int | None = None,
    mean=None,
    std=None,
    model_kwargs: dict | None = None,
) -> ImageClassifier:
    """A timm model with the oracle input pipeline in front (see the module docstring).

    Args:
        arch: timm model name (paper: resnet18/resnet50, vit_base_patch16_224, convnext_tiny,
            swin_tiny_patch4_window7_224, mobilenetv3_large_100; CPU tests: test_resnet,
            test_vit, test_convnext, test_efficientnet, ...).
        num_classes: K, the size of the classification head.
        in_chans: C of the stored images.
        img_size: H = W of the stored images.
        input_size: side length the pipeline resizes to before the backbone (None: img_size).
            The backbone is built for this size.
        pretrained_path: local weights file for the backbone (``torch.save`` state dict or
            ``.safetensors``); never downloaded. The head is always fresh.
        seed: when given, the initial weights are a function of it (the global RNG is not
            touched); otherwise they come from the global RNG.
        mean, std: override the per-channel normalization ([0, 1] scale).
        model_kwargs: extra keyword arguments for ``timm.create_model`` (e.g. drop_path_rate).
    Returns:
        ``ImageClassifier`` in train mode, on the CPU.
    """
    for key, value, lo in (("num_classes", num_classes, 2), ("in_chans", in_chans, 1), ("img_size", img_size, 1)):
        if not isinstance(value, (int, np.integer)) or value < lo:
            raise ConfigError(f"{key}={value!r}: expected an integer >= {lo}")
    if input_size is not None and (not isinstance(input_size, (int, np.integer)) or input_size < 1):
        raise ConfigError(f"input_size={input_size!r}: expected a positive integer or None")
    if pretrained_path is not None and not Path(pretrained_path).is_file():
        raise ConfigError(f"pretrained_path={str(pretrained_path)!r}: no such file (weights are never downloaded)")
    size = int(input_size or img_size)
    rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        backbone = _create_timm(arch, int(num_classes), int(in_chans), size, dict(model_kwargs or {}))
    pipeline = InputPipeline(int(in_chans), mean, std, input_size=None if size == img_size else size)
    spec = {
        "arch": arch,
        "num_classes": int(num_classes),
        "in_chans": int(in_chans),
        "img_size": int(img_size),
        "input_size": int(input_size) if input_size is not None else None,
        "pretrained_path": str(pretrained_path) if pretrained_path is not None else None,
        "mean": pipeline.mean.flatten().tolist(),
        "std": pipeline.std.flatten().tolist(),
        "model_kwargs": dict(model_kwargs or {}),
    }
    model = ImageClassifier(backbone, pipeline, spec)
    if pretrained_path is not None:
        model.pretrained_report = load_pretrained_backbone(backbone, pretrained_path)
    return model


def _read_state_dict(path: Path) -> dict[str, Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            obj = load_file(str(path))
        else:
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any reader failure means the same to the user
        raise ConfigError(f"pretrained_path={str(path)!r}: not a readable weights file ({type(err).__name__}: {err})") from None
    for key in ("state_dict_ema", "state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
            break
    if not isinstance(obj, dict) or not all(isinstance(v, Tensor) for v in obj.values()):
        raise ConfigError(f"pretrained_path={str(path)!r}: expected a state dict of tensors")
    if obj and all(k.startswith("module.") for k in obj):  # saved from DistributedDataParallel
        obj = {k[len("module."):]: v for k, v in obj.items()}
    if any(k.startswith("backbone.") for k in obj):  # an ImageClassifier: keep the backbone part
        obj = {k[len("backbone."):]: v for k, v in obj.items() if k.startswith("backbone.")}
    return obj


def _head_prefix(backbone: nn.Module) -> str | None:
    head = backbone.get_classifier() if hasattr(backbone, "get_classifier") else None
    if isinstance(head, nn.Module):
        for name, module in backbone.named_modules():
            if module is head and name:
                return name + "."
    name = getattr(backbone, "pretrained_cfg", {}).get("classifier")
    return name + "." if name else None


def load_pretrained_backbone(backbone: nn.Module, path: str | os.PathLike) -> dict[str, Any]:
    """Load local weights into a timm backbone, keeping its fresh classification head.

    Head parameters in the file are dropped; the rest is loaded with ``strict=False``. Two
    shape mismatches are adapted with timm's own helpers: the first convolution when the
    channel count differs (``adapt_input_conv``) and a ViT's absolute position embedding
    when the image size differs (``resample_abs_pos_embed``). Any other mismatch, or a file
    sharing no parameter name with the model, raises ``ConfigError``.

    Returns ``{"path", "loaded", "missing", "unexpected", "dropped_head", "adapted"}`` (key
    lists); missing and unexpected keys are also logged as warnings.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"pretrained_path={str(path)!r}: no such file (weights are never downloaded)")
    state = _read_state_dict(path)
    head = _head_prefix(backbone)
    dropped = sorted(k for k in state if head and k.startswith(head))
    state = {k: v for k, v in state.items() if k not in set(dropped)}
    own = backbone.state_dict()
    first_conv = getattr(backbone, "pretrained_cfg", {}).get("first_conv")
    adapted = []
    for key, value in list(state.items()):
        if key not in own or own[key].shape == value.shape:
            continue
        if first_conv and key == f"{first_conv}.weight" and value.ndim == 4 and value.shape[0] == own[key].shape[0]:
            from timm.models import adapt_input_conv

            state[key] = adapt_input_conv(own[key].shape[1], value)
        elif key == "pos_embed" and hasattr(backbone, "patch_embed"):
            from timm.layers import resample_abs_pos_embed

            prefix = 0 if getattr(backbone, "no_embed_class", False) else getattr(backbone, "num_prefix_tokens", 1)
            state[key] = resample_abs_pos_embed(value, list(backbone.patch_embed.grid_size), num_prefix_tokens=prefix)
        else:
            raise ConfigError(
                f"pretrained_path={str(path)!r}: parameter {key!r} has shape {tuple(value.shape)}, "
                f"the model expects {tuple(own[key].shape)}"
            )
        if state[key].shape != own[key].shape:
            raise ConfigError(f"pretrained_path={str(path)!r}: could not adapt {key!r} to {tuple(own[key].shape)}")
        adapted.append(key)
    loaded = sorted(k for k in state if k in own)
    if not loaded:
        raise ConfigError(f"pretrained_path={str(path)!r}: shares no parameter name with the model; wrong architecture?")
    result = backbone.load_state_dict(state, strict=False)
    missing = sorted(k for k in result.missing_keys if not (head and k.startswith(head)))
    unexpected = sorted(result.unexpected_keys)
    if missing:
        log.warning("%s: %d parameters not in the file, left at init: %s", path, len(missing), missing[:10])
    if unexpected:
        log.warning("%s: %d entries not used by the model: %s", path, len(unexpected), unexpected[:10])
    return {"path": str(path), "loaded": loaded, "missing": missing, "unexpected": unexpected,
            "dropped_head": dropped, "adapted": adapted}


# --------------------------------------------------------------------------- training
def _derive_seed(seed: int, stream: str) -> int:
    """An independent 63-bit seed per named random stream."""
    return int.from_bytes(hashlib.sha256(f"{int(seed)}:{stream}".encode()).digest()[:8], "little") >> 1


def _check_images(x: Tensor) -> Tensor:
    if not isinstance(x, Tensor) or x.ndim != 4 or x.dtype != torch.float32:
        raise DataError(f"x: expected a float32 tensor [n, C, H, W], got {getattr(x, 'dtype', type(x))} "
                        f"{tuple(getattr(x, 'shape', ()))}")
    if x.shape[0] == 0:
        raise DataError("x: no images")
    return x


def _check_targets(targets, n: int, num_classes: int, soft: bool) -> Tensor:
    t = targets if isinstance(targets, Tensor) else torch.as_tensor(np.asarray(targets))
    if soft:
        if t.shape != (n, num_classes) or not t.is_floating_point():
            raise DataError(f"targets: soft labels must be float [{n}, {num_classes}], got {t.dtype} {tuple(t.shape)}")
        t = t.to(torch.float32)
        if not bool(torch.isfinite(t).all()) or float(t.min()) < 0 or float((t.sum(1) - 1).abs().max()) > 1e-4:
            raise DataError("targets: soft labels must be finite probabilities with rows summing to 1")
        return t
    if t.shape != (n,) or t.is_floating_point() or t.dtype == torch.bool:
        raise DataError(f"targets: hard labels must be int64 [{n}], got {t.dtype} {tuple(t.shape)}")
    t = t.to(torch.int64)
    if int(t.min()) < 0 or int(t.max()) >= num_classes:
        raise DataError(f"targets: labels must lie in [0, {num_classes}), got [{int(t.min())}, {int(t.max())}]")
    return t


def _loss(logits: Tensor, target: Tensor, soft: bool) -> Tensor:
    if soft:
        return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    return F.cross_entropy(logits, target)


def _batches(order: Tensor, batch_size: int) -> list[Tensor]:
    chunks = list(order.split(batch_size))
    # A batch of one breaks BatchNorm in train mode; fold it into the previous batch.
    if len(chunks) > 1 and len(chunks[-1]) == 1:
        chunks[-2:] = [torch.cat(chunks[-2:])]
    return chunks


@torch.no_grad()
def _evaluate_loss(model, x, t, idx, soft, batch_size, device) -> dict[str, float]:
    model.eval()
    loss_sum, correct = 0.0, 0
    for b in idx.split(batch_size):
        logits = model(x[b].to(device)).float()
        tb = t[b].to(device)
        loss_sum += float(_loss(logits, tb, soft)) * len(b)
        labels = tb.argmax(1) if soft else tb
        correct += int((logits.argmax(1) == labels).sum())
    return {"val_loss": loss_sum / len(idx), "val_acc": correct / len(idx)}


def _tensor_sha256(t: Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()


def _fingerprint(model, x, t, **hyper) -> dict:
    """What a checkpoint must match to be resumed: model spec, data and hyperparameters."""
    return {
        "spec": json.loads(json.dumps(getattr(model, "spec", {"class": type(model).__name__}))),
        "x_shape": list(x.shape),
        "x_sha256": _tensor_sha256(x),
        "targets_sha256": _tensor_sha256(t),
        **hyper,
    }


def _write_log(path: Path, history: list[dict]) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in history), encoding="utf-8")


def train_classifier(
    model: nn.Module,
    x: Tensor,
    targets,
    *,
    soft: bool,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    device: str | torch.device | None = "cpu",
    val_fraction: float = 0.0,
    log_path: str | os.PathLike | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    num_classes: int | None = None,
) -> tuple[nn.Module, list[dict]]:
    """Train ``model`` on images ``x`` with hard or soft labels (see the module docstring).

    Args:
        model: maps float32 [b, C, H, W] in [-1, 1] to logits [b, K] (``build_classifier``).
        x: training images, float32 [n, C, H, W], on the CPU (batches are moved to ``device``).
        targets: int64 [n] class labels (``soft=False``) or float [n, K] probabilities
            (``soft=True``, e.g. the oracle posterior ``exp(log_p)``).
        soft: which loss to use.
        epochs, batch_size, lr, weight_decay: AdamW + cosine schedule to 0 per step.
        seed: derives the validation split, the shuffling and the model's random draws.
        device: "cpu", "cuda", "auto", or a torch.device.
        val_fraction: fraction held out (after the split, training uses the rest); per-epoch
            ``val_loss`` and ``val_acc`` (against labels or soft-label argmax) are reported.
        log_path: JSON-lines file rewritten atomically after each epoch with the history.
        checkpoint_path: training state saved atomically after each epoch; an existing
            checkpoint of the same run is resumed (one of another run raises ConfigError).
        num_classes: K when the model lacks a ``num_classes`` attribute.
    Returns:
        ``(model, history)``: the trained model in eval mode on ``device`` and one dict per
        epoch with ``epoch``, ``train_loss`` (mean over the epoch's steps, nats), ``lr`` (at the
        end of the epoch), ``seconds`` and, with validation, ``val_loss`` and ``val_acc``.
    """
    device = device if isinstance(device, torch.device) else pick_device(device)
    x = _check_images(x)
    n = x.shape[0]
    k = num_classes or getattr(model, "num_classes", None)
    if not k:
        raise ConfigError("num_classes: the model has no num_classes attribute; pass num_classes=K")
    t = _check_targets(targets, n, int(k), soft)
    for key, value in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{key}={value!r}: expected a positive integer")
    if not (lr > 0 and weight_decay >= 0):
        raise ConfigError(f"lr={lr!r}, weight_decay={weight_decay!r}: expected lr > 0 and weight_decay >= 0")
    if not 0.0 <= val_fraction < 1.0:
        raise ConfigError(f"val_fraction={val_fraction!r}: expected a value in [0, 1)")

    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_derive_seed(seed, "split")))
    n_val = int(round(val_fraction * n))
    if val_fraction > 0 and not 1 <= n_val <= n - 2:
        raise ConfigError(f"val_fraction={val_fraction} leaves {n_val} validation and {n - n_val} training images of {n}")
    val_idx, train_idx = perm[:n_val].sort().values, perm[n_val:].sort().values
    if len(train_idx) < 2:
        raise DataError(f"x: need at least 2 training images, got {len(train_idx)}")
    steps_per_epoch = len(_batches(train_idx, batch_size))

    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch, eta_min=0.0)
    shuffle = torch.Generator().manual_seed(_derive_seed(seed, "shuffle"))
    fingerprint = _fingerprint(model, x, t, soft=bool(soft), epochs=int(epochs), batch_size=int(batch_size),
                               lr=float(lr), weight_decay=float(weight_decay), seed=int(seed),
                               val_fraction=float(val_fraction))
    history: list[dict] = []
    start_epoch = 0
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    cuda_devices = [device] if device.type == "cuda" else []

    with torch.random.fork_rng(devices=cuda_devices):
        torch.manual_seed(_derive_seed(seed, "model"))
        if ckpt is not None and ckpt.exists():
            state = torch.load(ckpt, map_location="cpu", weights_only=True)
            if state.get("format") != CHECKPOINT_FORMAT:
                raise ConfigError(f"checkpoint_path={str(ckpt)!r}: not a classifier training checkpoint")
            if state["fingerprint"] != fingerprint:
                diff = sorted(key for key in fingerprint if state["fingerprint"].get(key) != fingerprint[key])
                raise ConfigError(f"checkpoint_path={str(ckpt)!r} belongs to another run (differs in {diff}); "
                                  "delete it or choose another path")
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            shuffle.set_state(state["shuffle_rng"])
            torch.set_rng_state(state["torch_rng"])
            if cuda_devices and state.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            history = list(state["history"])
            start_epoch = int(state["epoch"])
            log.info("resumed %s at epoch %d/%d", ckpt, start_epoch, epochs)

        bar = tqdm(total=(epochs - start_epoch) * steps_per_epoch, desc="train classifier", disable=None,
                   unit="step", leave=False)
        for epoch in range(start_epoch, epochs):
            started = time.perf_counter()
            model.train()
            order = train_idx[torch.randperm(len(train_idx), generator=shuffle)]
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            for batch in _batches(order, batch_size):
                xb = x[batch].to(device, non_blocking=True)
                tb = t[batch].to(device, non_blocking=True)
                with autocast(device):
                    logits = model(xb)
                loss = _loss(logits.float(), tb, soft)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                scheduler.step()
                loss_sum += loss.detach().double() * len(batch)
                bar.update(1)
            record = {"epoch": epoch + 1, "train_loss": float(loss_sum) / len(train_idx),
                      "lr": float(scheduler.get_last_lr()[0])}
            if not math.isfinite(record["train_loss"]):
                raise OracleError(f"training diverged: train_loss={record['train_loss']} at epoch {epoch + 1}; lower lr={lr}")
            if n_val:
                record.update(_evaluate_loss(model, x, t, val_idx, soft, batch_size, device))
            record["seconds"] = time.perf_counter() - started
            history.append(record)
            bar.set_postfix(loss=f"{record['train_loss']:.4f}")
            log.info("epoch %s", json.dumps(record, sort_keys=True))
            if log_path is not None:
                _write_log(Path(log_path), history)
            if ckpt is not None:
                torch_save_atomic({
                    "format": CHECKPOINT_FORMAT, "epoch": epoch + 1, "fingerprint": fingerprint,
                    "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "shuffle_rng": shuffle.get_state(),
                    "torch_rng": torch.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state(device) if cuda_devices else None,
                    "history": history,
                }, ckpt)
        bar.close()
    model.eval()
    return model, history


# --------------------------------------------------------------------------- prediction
@torch.no_grad()
def predict_log_probs(
    model: nn.Module,
    x: Tensor,
    batch_size: int = 256,
    device: str | torch.device | None = "cpu",
    amp: bool = False,
) -> Tensor:
    """Model log-probabilities ``log q(y|x)``: Tensor[n, K] float64 on the CPU (natural log).

    The log-softmax is taken in float64 on the logits. By default the forward pass runs in
    float32 even on CUDA: the epistemic KL is a small difference of log-probabilities and
    bf16 logits (3 significant digits) would blur it; ``amp=True`` trades that for speed.
    """
    device = device if isinstance(device, torch.device) else pick_device(device)
    x = _check_images(x)
    model.to(device).eval()
    out = []
    for start in tqdm(range(0, x.shape[0], batch_size), desc="predict", disable=None, leave=False):
        xb = x[start:start + batch_size].to(device, non_blocking=True)
        with autocast(device, enabled=amp):
            logits = model(xb)
        out.append(torch.log_softmax(logits.to(torch.float64), dim=1).cpu())
    return torch.cat(out)


# --------------------------------------------------------------------------- evaluation
def evaluate_predictions(log_q, log_p, source_class, n_bins: int = 10) -> dict[str, Any]:
    """Every per-classifier number of the paper, from model and oracle log-probabilities.

    Args:
        log_q: model log-probabilities [n, K] (``predict_log_probs``).
        log_p: oracle log-posteriors [n, K] at the same x (``oracle.posterior.log_posterior``).
        source_class: int [n], the class each x was drawn from.
        n_bins: equal-width confidence bins of the ECEs.
    Returns:
        A JSON-serializable dict; ``{"mean", "se"}`` entries are Monte Carlo means over the n
        test samples with their standard errors:

        * ``acc_source``, ``acc_posterior``: top-1 accuracy against the source class and
          against ``argmax p(y|x)``; ``bayes_accuracy``: ``E[max_y p(y|x)]``.
        * ``total``, ``aleatoric``, ``epistemic``: ``E[-sum p log q]``, ``E[H(p)]``,
          ``E[KL(p||q)]`` in nats (``oracle.decomposition.decompose``).
        * ``nll_source``: ``E[-log q(source|x)]`` in nats.
        * ``brier_source``: multi-class Brier against the source class; ``brier_expected``: its
          expectation over ``y ~ p(y|x)``.
        * ``ece_source`` (float): top-label ECE against the source class;
          ``ece_posterior`` (float): the same bins with correctness replaced by
          ``p(argmax q|x)``, an oracle-only exact calibration error;
          ``calibration_pointwise``: ``E|max q - p(argmax q|x)|``.
        * ``n``, ``num_classes``, ``n_bins``.
    """
    lq = torch.as_tensor(np.asarray(log_q)) if not isinstance(log_q, Tensor) else log_q.detach()
    lp = torch.as_tensor(np.asarray(log_p)) if not isinstance(log_p, Tensor) else log_p.detach()
    lq, lp = lq.to("cpu", torch.float64), lp.to("cpu", torch.float64)
    parts = decompose(lp, lq)  # validates shapes and normalization of both
    n, k = lq.shape
    y = source_class.detach().cpu() if isinstance(source_class, Tensor) else torch.as_tensor(np.asarray(source_class))
    if y.shape != (n,) or y.is_floating_point() or (n and (int(y.min()) < 0 or int(y.max()) >= k)):
        raise DataError(f"source_class: expected integer classes in [0, {k}) of shape ({n},), got {y.dtype} {tuple(y.shape)}")
    y = y.to(torch.int64)
    q, p = lq.exp().numpy(), lp.exp().numpy()
    yn = y.numpy()
    return {
        "n": int(n),
        "num_classes": int(k),
        "n_bins": int(n_bins),
        "acc_source": accuracy(lq, y),
        "acc_posterior": accuracy(lq, lp.argmax(dim=1)),
        "bayes_accuracy": bayes_accuracy(lp),
        "total": parts["total"],
        "aleatoric": parts["aleatoric"],
        "epistemic": parts["epistemic"],
        "nll_source": mean_se(-lq[torch.arange(n), y]),
        "brier_source": mean_se(cal.brier_per_sample(q, yn)),
        "brier_expected": mean_se(cal.expected_brier_score(q, p)),
        "ece_source": cal.expected_calibration_error(q, yn, n_bins),
        "ece_posterior": cal.true_calibration_error(q, p, n_bins),
        "calibration_pointwise": mean_se(cal.pointwise_calibration_errors(q, p)),
    }


def metrics_row(metrics: dict[str, Any]) -> dict[str, float]:
    """Flatten ``evaluate_predictions`` output to the columns of the analysis data frame.

    ``{"mean", "se"}`` entries become ``name`` and ``name_se``; the short names the report
    uses are added: ``nll`` (= nll_source), ``ece`` (= ece_source), ``brier`` (= brier_source).
    The caller adds ``arch``, ``N``, ``seed``, ``label_mode``.
    """
    row: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            row[key] = float(value["mean"])
            row[f"{key}_se"] = float(value["se"])
        else:
            row[key] = value
    row["nll"], row["nll_se"] = row["nll_source"], row["nll_source_se"]
    row["ece"] = row["ece_source"]
    row["brier"], row["brier_se"] = row["brier_source"], row["brier_source_se"]
    return row
