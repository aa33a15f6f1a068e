"""The classifier: a timm backbone behind the oracle input pipeline (see the package docstring)."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from oracle.errors import ConfigError, DataError
from oracle.io.state_dicts import read_state_dict

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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
    meta: bool = False,
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
        meta: build the backbone on the meta device: shapes without weights (nothing is drawn,
            for counting FLOPs; a ViT-B's initialisation alone takes ~1 s of CPU).
    Returns:
        ``ImageClassifier`` in train mode, on the CPU (its backbone on the meta device if `meta`).
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
    if meta and pretrained_path is not None:
        raise ConfigError("build_classifier: a meta backbone has no weights to load pretrained_path into")
    with rng, (torch.device("meta") if meta else contextlib.nullcontext()):
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
    try:
        state = read_state_dict(path, "pretrained weights file", "classifiers.archs.<arch>.pretrained")
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    if any(k.startswith("backbone.") for k in state):  # an ImageClassifier: keep the backbone part
        state = {k[len("backbone."):]: v for k, v in state.items() if k.startswith("backbone.")}
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
