"""Feature networks for the validation metrics; nothing here downloads anything.

Three kinds of feature network, each an ``nn.Module`` with the same small interface:

- ``forward_features(x) -> Tensor[n, F]`` for images ``x`` float ``[n, C, H, W]`` on [-1, 1];
- ``logits_from_features(f) -> Tensor[n, K]`` (softmax gives p(y|x) for an IS-like score);
- attributes ``feature_kind`` (one of ``FEATURE_KINDS``) and ``feature_space`` (a sentence that
  every artifact built from these features must carry).

The pretrained kinds (Inception-v3, ResNet) are loaded by `oracle.validation.pretrained_nets`.

Kinds:
``inception-fid``          Inception-v3 pool3 (2048-d) with the TF-FID weights
                           (``pt_inception-2015-12-05-*.pth``: 1008 classes), run by torchmetrics'
                           FID network (torch-fidelity's port of the TF graph) on images rounded
                           to uint8. The only kind whose Frechet distance is called "FID" and
                           comparable to published FID values computed with torchmetrics' defaults.
``inception-torchvision``  Inception-v3 pool3 from a torchvision-layout state dict (e.g. the
                           IMAGENET1K_V1 weights saved locally); its FID differs from TF-FID.
``resnet``                 torchvision ResNet-18/34/50/101/152 penultimate (avgpool) features from
                           a local state dict (the paper's appendix B uses "ResNet features").
``domain``                 a small CNN trained here on the real training split; used when no
                           pretrained weights are available (e.g. the 8x8 digits default run).
                           Its Frechet distance is reported as "FD (domain features)".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from oracle.devices import adamw
from oracle.io.atomic import torch_save_atomic
from oracle.errors import DataError, OracleError
from oracle.io.state_dicts import read_checkpoint
from oracle.progress import track

__all__ = [
    "FEATURE_KINDS",
    "DomainFeatureNet",
    "train_domain_feature_net",
    "save_feature_net",
    "load_feature_net",
    "features_and_probs",
    "extract_features",
    "class_probs",
    "feature_space_name",
    "frechet_metric_name",
    "inception_score_name",
]

FEATURE_KINDS = ("inception-fid", "inception-torchvision", "resnet", "domain")


# --------------------------------------------------------------------------------------------
# domain CNN trained on the real training split
# --------------------------------------------------------------------------------------------


class DomainFeatureNet(nn.Module):
    """A small CNN classifier whose penultimate layer serves as a feature space.

    Trunk: conv3x3 -> GroupNorm -> GELU, then stride-2 conv stages (width doubling up to 4x)
    until the map is 4x4 or four stages are done; global average pool; ``embed`` linear to
    ``feature_dim`` + GELU (the features); ``head`` linear to the class logits. Inputs larger
    than ``max_input_size`` are first shrunk (antialiased bilinear) so the net stays small at
    256x256. GroupNorm instead of BatchNorm: outputs do not depend on batch composition.
    """

    def __init__(self, in_channels: int, num_classes: int, img_size: int, feature_dim: int = 128,
                 width: int = 32, max_input_size: int = 64, dataset_name: str = "real"):
        super().__init__()
        self.config = {"in_channels": int(in_channels), "num_classes": int(num_classes),
                       "img_size": int(img_size), "feature_dim": int(feature_dim), "width": int(width),
                       "max_input_size": int(max_input_size), "dataset_name": str(dataset_name)}
        size = min(img_size, max_input_size)
        layers: list[nn.Module] = [nn.Conv2d(in_channels, width, 3, padding=1),
                                   nn.GroupNorm(min(8, width), width), nn.GELU()]
        ch, stages = width, 0
        while size > 4 and stages < 4:
            out = min(2 * ch, 4 * width)
            layers += [nn.Conv2d(ch, out, 3, stride=2, padding=1), nn.GroupNorm(min(8, out), out), nn.GELU()]
            ch, size, stages = out, math.ceil(size / 2), stages + 1
        self.trunk = nn.Sequential(*layers)
        self.embed = nn.Linear(ch, feature_dim)
        self.head = nn.Linear(feature_dim, num_classes)
        self.feature_kind = "domain"
        self.feature_dim = int(feature_dim)
        self.feature_space = (f"domain CNN trained on {dataset_name} train split "
                              f"({feature_dim}-d penultimate layer)")
        self.train_info: dict = {}

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        limit = self.config["max_input_size"]
        if min(x.shape[-2:]) > limit:
            scale = limit / min(x.shape[-2:])
            x = F.interpolate(x, size=(round(x.shape[-2] * scale), round(x.shape[-1] * scale)),
                              mode="bilinear", align_corners=False, antialias=True)
        h = self.trunk(x).mean(dim=(2, 3))
        return F.gelu(self.embed(h))

    def logits_from_features(self, f: torch.Tensor) -> torch.Tensor:
        return self.head(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits_from_features(self.forward_features(x))


def _to_model_space(x, device: torch.device) -> torch.Tensor:
    """A batch as float32 on [-1, 1]: uint8 -> /127.5 - 1; floats must already be on [-1, 1]."""
    t = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
    if t.dtype == torch.uint8:
        return t.to(device=device, dtype=torch.float32) / 127.5 - 1.0
    t = t.to(device=device, dtype=torch.float32)
    if t.numel() and (not torch.isfinite(t).all() or t.abs().max() > 3.0):
        raise OracleError("images must be uint8 or float on the [-1, 1] scale (got values outside "
                          "[-3, 3] or NaN); map uint8 as x/127.5 - 1")
    return t


def train_domain_feature_net(images, labels, *, epochs: int = 10, seed: int = 0,
                             device: str | torch.device = "cpu", feature_dim: int = 128,
                             num_classes: int | None = None, batch_size: int = 64, lr: float = 3e-3,
                             weight_decay: float = 1e-4, width: int = 32, max_input_size: int = 64,
                             dataset_name: str = "real", progress: bool | None = None) -> DomainFeatureNet:
    """Train a ``DomainFeatureNet`` classifier on REAL training images; return it in eval mode.

    ``images`` uint8 ``[N, C, H, W]`` (or float on [-1, 1]), ``labels`` int ``[N]`` in [0, K).
    AdamW (`oracle.devices.adamw`, as every training loop of the project) with cosine
    learning-rate decay, cross-entropy, no augmentation (flips would be wrong for digits).
    Initialization and shuffling draw only from ``seed`` (the global torch RNG is left
    untouched), so on CPU the same inputs give bit-identical weights.
    ``net.train_info`` records epochs, seed, n_train, the last epoch's mean loss (nats) and
    training accuracy.
    """
    x_all = images if isinstance(images, torch.Tensor) else torch.as_tensor(np.asarray(images))
    y_all = torch.as_tensor(np.asarray(labels)).long()
    if x_all.ndim != 4:
        raise OracleError(f"train_domain_feature_net: images must be [N, C, H, W], got {tuple(x_all.shape)}")
    if y_all.shape != (x_all.shape[0],):
        raise OracleError(f"train_domain_feature_net: labels shape {tuple(y_all.shape)} does not match "
                          f"{x_all.shape[0]} images")
    k = int(num_classes) if num_classes is not None else int(y_all.max()) + 1
    if y_all.min() < 0 or y_all.max() >= k:
        raise OracleError(f"train_domain_feature_net: labels must lie in [0, {k}), got "
                          f"[{int(y_all.min())}, {int(y_all.max())}]")
    if epochs < 1:
        raise OracleError(f"train_domain_feature_net: epochs={epochs} must be >= 1")
    device = torch.device(device)
    n = x_all.shape[0]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = DomainFeatureNet(x_all.shape[1], k, min(x_all.shape[-2:]), feature_dim=feature_dim,
                               width=width, max_input_size=max_input_size, dataset_name=dataset_name)
    net.to(device).train()
    opt = adamw(net.parameters(), device, lr=lr, weight_decay=weight_decay)
    steps = epochs * math.ceil(n / batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    gen = torch.Generator().manual_seed(seed)
    loss_sum = correct = 0.0
    for _ in track(range(epochs), "domain feature net", unit="epoch", enabled=progress is not False):
        perm = torch.randperm(n, generator=gen)
        loss_sum = correct = 0.0
        for start in range(0, n, batch_size):
            idx = perm[start:start + batch_size]
            xb = _to_model_space(x_all[idx], device)
            yb = y_all[idx].to(device)
            logits = net(xb)
            loss = F.cross_entropy(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += float(loss.detach()) * idx.numel()
            correct += float((logits.argmax(1) == yb).sum())
    net.train_info = {"epochs": int(epochs), "seed": int(seed), "n_train": int(n),
                      "final_loss_nats": loss_sum / n, "train_accuracy": correct / n,
                      "batch_size": int(batch_size), "lr": float(lr)}
    return net.eval()


def save_feature_net(path: str | os.PathLike, net: DomainFeatureNet) -> None:
    """Write a trained domain feature net (config, train_info, CPU state dict) atomically."""
    if not isinstance(net, DomainFeatureNet):
        raise OracleError("save_feature_net: only DomainFeatureNet is saved; pretrained nets are "
                          "referenced by their local weights file")
    torch_save_atomic({"format_version": 1, "kind": "domain", "config": dict(net.config),
                       "train_info": dict(net.train_info),
                       "state_dict": {k: v.detach().cpu() for k, v in net.state_dict().items()}}, path)


def load_feature_net(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> DomainFeatureNet:
    """Read a net written by ``save_feature_net``; returned in eval mode."""
    p = Path(path)
    obj = read_checkpoint(p, "feature net file", map_location=map_location)
    if not isinstance(obj, dict) or obj.get("kind") != "domain" or obj.get("format_version") != 1:
        raise DataError(f"feature net file {str(p)!r} was not written by save_feature_net (format 1)")
    net = DomainFeatureNet(**obj["config"])
    net.load_state_dict(obj["state_dict"])
    net.train_info = dict(obj.get("train_info", {}))
    return net.to(map_location).eval()


# --------------------------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------------------------


def _device_of(net: nn.Module) -> torch.device:
    return next(net.parameters()).device


@torch.no_grad()
def features_and_probs(net: nn.Module, x, batch_size: int = 256, device: str | torch.device | None = None,
                       want_probs: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Features ``[n, F]`` and softmax class probabilities ``[n, K]`` (both float64) in one pass.

    ``x``: images ``[n, C, H, W]``, uint8 or float on [-1, 1]; a numpy array, tensor or h5py
    dataset (read in blocks of ``batch_size``). The net runs in eval mode on ``device`` (default:
    where its parameters are). Probabilities are a float64 softmax of the logits.
    """
    if not hasattr(net, "forward_features"):
        raise OracleError(f"{type(net).__name__} is not a feature network (no forward_features)")
    n = int(x.shape[0])
    dev = torch.device(device) if device is not None else _device_of(net)
    was_training = net.training
    net.eval()
    net.to(dev)
    feats, probs = [], []
    try:
        for start in track(range(0, n, batch_size), "features"):
            xb = _to_model_space(x[start:start + batch_size], dev)
            f = net.forward_features(xb)
            feats.append(f.double().cpu().numpy())
            if want_probs:
                probs.append(torch.softmax(net.logits_from_features(f).double(), dim=1).cpu().numpy())
    finally:
        net.train(was_training)
    out_f = np.concatenate(feats) if feats else np.empty((0, getattr(net, "feature_dim", 0)))
    out_p = (np.concatenate(probs) if probs else None) if want_probs else None
    return out_f, out_p


def extract_features(net: nn.Module, x, batch_size: int = 256,
                     device: str | torch.device | None = None) -> np.ndarray:
    """Penultimate-layer features float64 ``[n, F]`` of images on [-1, 1] (or uint8)."""
    return features_and_probs(net, x, batch_size, device, want_probs=False)[0]


def class_probs(net: nn.Module, x, batch_size: int = 256,
                device: str | torch.device | None = None) -> np.ndarray:
    """Softmax class probabilities float64 ``[n, K]`` of the feature net's classifier head."""
    return features_and_probs(net, x, batch_size, device)[1]


# --------------------------------------------------------------------------------------------
# naming: every artifact says which feature space its numbers live in
# --------------------------------------------------------------------------------------------

_GENERIC_SPACE = {
    "inception-fid": "inception-v3 pool3 (local TF-FID weights, torchmetrics/torch-fidelity network)",
    "inception-torchvision": "inception-v3 pool3 (local weights, torchvision layout)",
    "resnet": "resnet avgpool (local torchvision weights)",
    "domain": "domain CNN trained on the real train split",
}


def _kind(net_or_kind) -> str:
    kind = net_or_kind if isinstance(net_or_kind, str) else getattr(net_or_kind, "feature_kind", None)
    if kind not in FEATURE_KINDS:
        raise OracleError(f"unknown feature kind {kind!r}; expected one of {FEATURE_KINDS}")
    return kind


def feature_space_name(net_or_kind) -> str:
    """The sentence naming a feature space, e.g. "inception-v3 pool3 (local weights: f.pth, ...)".

    A net gives its specific name (weights file, dataset); a kind string gives the generic one.
    """
    if not isinstance(net_or_kind, str) and isinstance(getattr(net_or_kind, "feature_space", None), str):
        _kind(net_or_kind)
        return net_or_kind.feature_space
    return _GENERIC_SPACE[_kind(net_or_kind)]


def frechet_metric_name(feature_kind) -> str:
    """"FID" only for Inception-v3 with the TF-FID weights; every other space is an "FD".

    torchvision's Inception weights give "FID (torchvision Inception weights)", known to differ
    from TF-FID; ResNet and domain features give "FD (ResNet features)" / "FD (domain features)".
    """
    return {"inception-fid": "FID",
            "inception-torchvision": "FID (torchvision Inception weights)",
            "resnet": "FD (ResNet features)",
            "domain": "FD (domain features)"}[_kind(feature_kind)]


def inception_score_name(feature_kind) -> str:
    """"IS" for Inception classifiers; otherwise an IS-like score bounded by the net's K classes."""
    return {"inception-fid": "IS",
            "inception-torchvision": "IS (torchvision Inception weights)",
            "resnet": "IS-like score (ResNet classifier)",
            "domain": "IS-like score (domain classifier)"}[_kind(feature_kind)]
