"""Feature networks for the validation metrics; nothing here downloads anything.

Three kinds of feature network, each an ``nn.Module`` with the same small interface:

- ``forward_features(x) -> Tensor[n, F]`` for images ``x`` float ``[n, C, H, W]`` on [-1, 1];
- ``logits_from_features(f) -> Tensor[n, K]`` (softmax gives p(y|x) for an IS-like score);
- attributes ``feature_kind`` (one of ``FEATURE_KINDS``) and ``feature_space`` (a sentence that
  every artifact built from these features must carry).

Kinds:
``inception-fid``          Inception-v3 pool3 (2048-d) with the TF-FID weights in pytorch-fid's
                           layout (``pt_inception-2015-12-05-*.pth``: 1008 classes, the
                           FIDInceptionA/C/E pooling patches). The only kind whose Frechet
                           distance is called "FID" and comparable to published FID values (up to
                           the resize differences noted in pytorch-fid).
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
import torchvision
from torch import nn
from tqdm import tqdm

from oracle.io.atomic import torch_save_atomic
from oracle.errors import DataError, OracleError

__all__ = [
    "FEATURE_KINDS",
    "InceptionFeatureNet",
    "ResNetFeatureNet",
    "DomainFeatureNet",
    "load_inception",
    "load_resnet",
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
# loading local weight files
# --------------------------------------------------------------------------------------------


def _load_state_dict(path: str | os.PathLike, what: str) -> dict[str, torch.Tensor]:
    """Read a raw state dict (or one wrapped under "state_dict"/"model"), strip "module."."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{what} weights file {str(p)!r} does not exist; nothing is downloaded, "
                        "place the file there or set the config key to null")
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means the same to the user
        raise DataError(f"{what} weights file {str(p)!r} is not a readable torch state dict: {exc}") from None
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise DataError(f"{what} weights file {str(p)!r} does not hold a state dict of tensors")
    return {k.removeprefix("module."): v for k, v in obj.items()}


def _check_keys(sd: dict, expected: dict, path, what: str, supported: str) -> None:
    """Raise OracleError unless ``sd`` has exactly the names and shapes of ``expected``."""
    # Old checkpoints (pytorch-fid's among them) predate BatchNorm's num_batches_tracked buffer;
    # BatchNorm fills it in on load, and it plays no part in eval mode.
    missing = sorted(k for k in set(expected) - set(sd) if not k.endswith(".num_batches_tracked"))
    unexpected = sorted(set(sd) - set(expected))
    if missing or unexpected:
        raise OracleError(
            f"{what} weights {str(path)!r}: parameter names do not match the supported layout "
            f"({supported}); missing {missing[:3]}{'...' if len(missing) > 3 else ''}, "
            f"unexpected {unexpected[:3]}{'...' if len(unexpected) > 3 else ''}")
    for k, v in expected.items():
        if k in sd and sd[k].shape != v.shape:
            raise OracleError(f"{what} weights {str(path)!r}: {k} has shape {tuple(sd[k].shape)}, "
                              f"expected {tuple(v.shape)} ({supported})")


# --------------------------------------------------------------------------------------------
# Inception-v3
# --------------------------------------------------------------------------------------------


def _tf_avg_pool(x: torch.Tensor) -> torch.Tensor:
    # TF's average pool divides by the number of real (unpadded) pixels.
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)


def _tf_max_pool(x: torch.Tensor) -> torch.Tensor:
    # The TF graph behind FID has a max pool in the last block's pool branch.
    return F.max_pool2d(x, kernel_size=3, stride=1, padding=1)


class _PoolPatched:
    """Mixin: recompute the pool branch of a torchvision Inception block with ``_pool``.

    torchvision's blocks hard-code an average pool that counts padding. The TF-FID graph pools
    differently; parameter names stay identical, so a pytorch-fid file loads with strict=True.
    The parent's pool branch is computed and discarded (a 1x1 conv: a few % of the block).
    """

    _pool = staticmethod(_tf_avg_pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = self._forward(x)
        outputs[-1] = self.branch_pool(self._pool(x))
        return torch.cat(outputs, 1)


class _FIDInceptionA(_PoolPatched, torchvision.models.inception.InceptionA):
    pass


class _FIDInceptionC(_PoolPatched, torchvision.models.inception.InceptionC):
    pass


class _FIDInceptionE1(_PoolPatched, torchvision.models.inception.InceptionE):
    pass


class _FIDInceptionE2(_PoolPatched, torchvision.models.inception.InceptionE):
    _pool = staticmethod(_tf_max_pool)


def _build_inception(layout: str, num_classes: int) -> torchvision.models.Inception3:
    from torchvision.models.inception import BasicConv2d, InceptionAux, InceptionB, InceptionD

    if layout == "fid":
        blocks = [BasicConv2d, _FIDInceptionA, InceptionB, _FIDInceptionC, InceptionD,
                  _FIDInceptionE1, InceptionAux]
    else:
        blocks = None
    net = torchvision.models.Inception3(num_classes=num_classes, aux_logits=False,
                                        transform_input=False, inception_blocks=blocks,
                                        init_weights=False)
    if layout == "fid":
        net.Mixed_7c = _FIDInceptionE2(2048)
    return net


class InceptionFeatureNet(nn.Module):
    """Inception-v3 pool3 features (2048-d) of images on [-1, 1].

    Inputs are resized to 299x299 (bilinear, align_corners=False, as pytorch-fid) and fed on the
    [-1, 1] scale both weight sets expect (pytorch-fid maps [0, 1] -> [-1, 1]; torchvision's
    ``transform_input`` maps ImageNet-normalized input to the same scale). Grayscale inputs are
    repeated to 3 channels.
    """

    def __init__(self, net: torchvision.models.Inception3, layout: str, weights_file: str,
                 has_head: bool):
        super().__init__()
        self.net = net
        self.layout = layout
        self.has_head = has_head
        self.weights_file = weights_file
        self.feature_kind = "inception-fid" if layout == "fid" else "inception-torchvision"
        self.feature_space = (f"inception-v3 pool3 (local weights: {Path(weights_file).name}, "
                              f"{'pytorch-fid/TF-FID' if layout == 'fid' else 'torchvision'} layout)")
        self.feature_dim = 2048

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        m = self.net
        for layer in (m.Conv2d_1a_3x3, m.Conv2d_2a_3x3, m.Conv2d_2b_3x3, m.maxpool1, m.Conv2d_3b_1x1,
                      m.Conv2d_4a_3x3, m.maxpool2, m.Mixed_5b, m.Mixed_5c, m.Mixed_5d, m.Mixed_6a,
                      m.Mixed_6b, m.Mixed_6c, m.Mixed_6d, m.Mixed_6e, m.Mixed_7a, m.Mixed_7b,
                      m.Mixed_7c, m.avgpool):
            x = layer(x)
        return torch.flatten(x, 1)

    def logits_from_features(self, f: torch.Tensor) -> torch.Tensor:
        if not self.has_head:
            raise OracleError(f"{self.weights_file!r} has no fc layer: class probabilities (IS) "
                              "need the classifier head")
        return self.net.fc(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits_from_features(self.forward_features(x))


_INCEPTION_SUPPORTED = ("torchvision Inception3 parameter names; fc with 1008 outputs = pytorch-fid "
                        "pt_inception-2015-12-05 (TF-FID), otherwise torchvision inception_v3")


def load_inception(path: str | os.PathLike, layout: str = "auto") -> InceptionFeatureNet:
    """Inception-v3 feature network from a LOCAL state-dict file (eval mode, on CPU).

    Supported layouts (both use torchvision's Inception3 parameter names):
    - ``"fid"``: pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth`` (TF-FID weights,
      fc [1008, 2048], no AuxLogits), run with the TF pooling patches of FIDInceptionA/C/E;
    - ``"torchvision"``: a torchvision ``inception_v3`` state dict (AuxLogits.* are ignored).
    ``layout="auto"`` picks "fid" when fc has 1008 outputs, else "torchvision". A file without
    ``fc.*`` gives features only. Anything else raises OracleError naming these layouts.
    """
    if layout not in ("auto", "fid", "torchvision"):
        raise OracleError(f"load_inception: layout={layout!r}, expected 'auto', 'fid' or 'torchvision'")
    sd = _load_state_dict(path, "Inception")
    sd = {k: v for k, v in sd.items() if not k.startswith("AuxLogits.")}
    has_head = "fc.weight" in sd
    num_classes = int(sd["fc.weight"].shape[0]) if has_head else 1000
    if layout == "auto":
        layout = "fid" if num_classes == 1008 else "torchvision"
    net = _build_inception(layout, num_classes)
    expected = {k: v for k, v in net.state_dict().items() if has_head or not k.startswith("fc.")}
    _check_keys(sd, expected, path, "Inception", _INCEPTION_SUPPORTED)
    net.load_state_dict(sd, strict=has_head)
    return InceptionFeatureNet(net, layout, str(path), has_head).eval()


# --------------------------------------------------------------------------------------------
# ResNet
# --------------------------------------------------------------------------------------------

_RESNET_DEPTHS = {("basic", (2, 2, 2, 2)): 18, ("basic", (3, 4, 6, 3)): 34,
                  ("bottleneck", (3, 4, 6, 3)): 50, ("bottleneck", (3, 4, 23, 3)): 101,
                  ("bottleneck", (3, 8, 36, 3)): 152}
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


class ResNetFeatureNet(nn.Module):
    """torchvision ResNet penultimate features of images on [-1, 1].

    Inputs are resized to ``size`` x ``size`` (bilinear, antialiased when shrinking), mapped to
    [0, 1] and normalized with the ImageNet mean/std the torchvision weights were trained with.
    """

    def __init__(self, net: torchvision.models.ResNet, depth: int, weights_file: str, size: int = 224):
        super().__init__()
        self.net, self.size, self.weights_file = net, size, weights_file
        self.feature_kind = "resnet"
        self.feature_dim = int(net.fc.in_features)
        self.feature_space = (f"resnet-{depth} avgpool ({self.feature_dim}-d, local weights: "
                              f"{Path(weights_file).name})")
        self.register_buffer("mean", torch.tensor(_IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = F.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False,
                          antialias=x.shape[-1] > self.size)
        x = ((x + 1) / 2 - self.mean) / self.std
        m = self.net
        for layer in (m.conv1, m.bn1, m.relu, m.maxpool, m.layer1, m.layer2, m.layer3, m.layer4, m.avgpool):
            x = layer(x)
        return torch.flatten(x, 1)

    def logits_from_features(self, f: torch.Tensor) -> torch.Tensor:
        return self.net.fc(f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits_from_features(self.forward_features(x))


def load_resnet(path: str | os.PathLike, size: int = 224) -> ResNetFeatureNet:
    """torchvision ResNet-18/34/50/101/152 feature network from a LOCAL state dict (eval, CPU).

    The depth is read off the parameter names (bottleneck blocks have ``conv3``; the block
    counts come from the largest ``layerN.i`` index).
    """
    sd = _load_state_dict(path, "ResNet")
    block = "bottleneck" if "layer1.0.conv3.weight" in sd else "basic"
    counts = tuple(1 + max((int(k.split(".")[1]) for k in sd if k.startswith(f"layer{i}.")), default=-1)
                   for i in range(1, 5))
    depth = _RESNET_DEPTHS.get((block, counts))
    if depth is None or "fc.weight" not in sd:
        raise OracleError(f"ResNet weights {str(path)!r}: {block} blocks {counts} with fc="
                          f"{'fc.weight' in sd} is not a torchvision resnet18/34/50/101/152 state dict")
    cls = torchvision.models.resnet.Bottleneck if block == "bottleneck" else torchvision.models.resnet.BasicBlock
    net = torchvision.models.ResNet(cls, list(counts), num_classes=int(sd["fc.weight"].shape[0]))
    _check_keys(sd, net.state_dict(), path, "ResNet", f"torchvision resnet{depth}")
    net.load_state_dict(sd)
    return ResNetFeatureNet(net, depth, str(path), size).eval()


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
    AdamW with cosine learning-rate decay, cross-entropy, no augmentation (flips would be wrong
    for digits). Initialization and shuffling draw only from ``seed`` (the global torch RNG is
    left untouched), so on CPU the same inputs give bit-identical weights.
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
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    steps = epochs * math.ceil(n / batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    gen = torch.Generator().manual_seed(seed)
    loss_sum = correct = 0.0
    for _ in tqdm(range(epochs), desc="domain feature net", disable=None if progress is None else not progress):
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
    if not p.is_file():
        raise DataError(f"feature net file {str(p)!r} does not exist")
    try:
        obj = torch.load(p, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"feature net file {str(p)!r} is unreadable: {exc}") from None
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
        for start in tqdm(range(0, n, batch_size), desc="features", disable=None if n > 4 * batch_size else True):
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
    "inception-fid": "inception-v3 pool3 (local weights, pytorch-fid/TF-FID layout)",
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
