"""Pretrained feature networks read from local weight files: Inception-v3 (pytorch-fid's
TF-FID layout or torchvision's) and torchvision ResNets; see `oracle.validation.features` for
the interface every feature network keeps and what each kind's distances may be called.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from oracle.errors import OracleError
from oracle.io.state_dicts import read_state_dict


# --------------------------------------------------------------------------------------------
# loading local weight files
# --------------------------------------------------------------------------------------------


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
    sd = read_state_dict(path, "Inception weights file", "validation.inception_weights")
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
    sd = read_state_dict(path, "ResNet weights file", "validation.resnet_weights")
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
