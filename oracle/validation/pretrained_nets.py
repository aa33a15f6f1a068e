"""Pretrained feature networks read from local weight files: Inception-v3 (the TF-FID weights
run by torchmetrics' FID network, or torchvision's) and torchvision ResNets; see
`oracle.validation.features` for the interface every feature network keeps and what each
kind's distances may be called.
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


def _to_uint8(x: torch.Tensor) -> torch.Tensor:
    """Images on [-1, 1] -> uint8 [0, 255] by rounding (uint8 inputs, mapped x/127.5 - 1 by the
    extraction helpers, come back exactly). FID is defined on 8-bit images; the public TarFlow
    script truncates ``(x + 1) / 2 * 255`` instead, half a level lower on average."""
    return ((x + 1) * 127.5).round().clamp(0, 255).to(torch.uint8)


class FIDInceptionFeatureNet(nn.Module):
    """TF-FID Inception-v3 pool3 features (2048-d) through torchmetrics' FID network.

    The network is ``torchmetrics.image.fid.NoTrainInceptionV3`` (torch-fidelity's port of the
    TF graph behind FID), built from a LOCAL weights file; nothing is downloaded. Images on
    [-1, 1] are rounded to uint8 and handed to the library unchanged, which resizes them to
    299x299 as torchmetrics' ``FrechetInceptionDistance`` does by default (bilinear,
    antialiased; the public TarFlow FID script uses these defaults) and maps them to
    ``(x - 128) / 128``. Grayscale inputs are repeated to 3 channels. Class logits are
    torch-fidelity's ``logits_unbiased`` (fc without bias), the ones torchmetrics' Inception
    Score uses.
    """

    def __init__(self, path: str, antialias: bool = True):
        super().__init__()
        from torchmetrics.image.fid import NoTrainInceptionV3

        try:
            self.net = NoTrainInceptionV3(name="inception-v3-compat", features_list=["2048"],
                                          feature_extractor_weights_path=str(path), antialias=antialias)
        except Exception as e:  # the library reads the file itself: a wrapped dict fails there
            raise OracleError(f"Inception weights {str(path)!r}: torchmetrics/torch-fidelity could not "
                              f"load it ({type(e).__name__}); save the plain state dict, as in "
                              "pt_inception-2015-12-05-6726825d.pth") from e
        self.weights_file = str(path)
        self.layout = "fid"
        self.has_head = True
        self.feature_kind = "inception-fid"
        self.feature_space = (f"inception-v3 pool3 (local weights: {Path(path).name}, TF-FID "
                              "network of torchmetrics/torch-fidelity)")
        self.feature_dim = 2048

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        u8 = x if x.dtype == torch.uint8 else _to_uint8(x)
        return self.net(u8)

    def logits_from_features(self, f: torch.Tensor) -> torch.Tensor:
        return f @ self.net.fc.weight.T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits_from_features(self.forward_features(x))


class TorchvisionInceptionFeatureNet(nn.Module):
    """torchvision Inception-v3 pool3 features (2048-d) of images on [-1, 1].

    Inputs are resized to 299x299 (bilinear, align_corners=False) and fed on the [-1, 1] scale
    torchvision's ``transform_input`` maps ImageNet-normalized input to. Grayscale inputs are
    repeated to 3 channels. Its Frechet distance differs from TF-FID.
    """

    def __init__(self, net: torchvision.models.Inception3, weights_file: str, has_head: bool):
        super().__init__()
        self.net = net
        self.layout = "torchvision"
        self.has_head = has_head
        self.weights_file = weights_file
        self.feature_kind = "inception-torchvision"
        self.feature_space = (f"inception-v3 pool3 (local weights: {Path(weights_file).name}, "
                              "torchvision layout)")
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


_INCEPTION_SUPPORTED = ("torchvision Inception3 parameter names; fc with 1008 outputs = the TF-FID "
                        "weights pt_inception-2015-12-05 (pytorch-fid / torch-fidelity), otherwise "
                        "torchvision inception_v3")


def load_inception(path: str | os.PathLike, layout: str = "auto") -> nn.Module:
    """Inception-v3 feature network from a LOCAL state-dict file (eval mode, on CPU).

    Supported layouts (both use torchvision's Inception3 parameter names):
    - ``"fid"``: the TF-FID weights ``pt_inception-2015-12-05-6726825d.pth`` (pytorch-fid's
      file; torch-fidelity's ``weights-inception-2015-12-05-6726825d.pth`` is the same; fc
      [1008, 2048], no AuxLogits), run by torchmetrics' FID network: ``FIDInceptionFeatureNet``;
    - ``"torchvision"``: a torchvision ``inception_v3`` state dict (AuxLogits.* are ignored):
      ``TorchvisionInceptionFeatureNet``.
    ``layout="auto"`` picks "fid" when fc has 1008 outputs, else "torchvision". A torchvision
    file without ``fc.*`` gives features only. Anything else raises OracleError naming these
    layouts.
    """
    if layout not in ("auto", "fid", "torchvision"):
        raise OracleError(f"load_inception: layout={layout!r}, expected 'auto', 'fid' or 'torchvision'")
    sd = read_state_dict(path, "Inception weights file", "validation.inception_weights")
    sd = {k: v for k, v in sd.items() if not k.startswith("AuxLogits.")}
    has_head = "fc.weight" in sd
    num_classes = int(sd["fc.weight"].shape[0]) if has_head else 1000
    if layout == "auto":
        layout = "fid" if num_classes == 1008 else "torchvision"
    # parameter names and shapes are checked on torchvision's Inception3, whose names the TF-FID
    # file shares, so a wrong file gets a one-line error before the library reads it
    net = torchvision.models.Inception3(num_classes=num_classes, aux_logits=False,
                                        transform_input=False, init_weights=False)
    expected = {k: v for k, v in net.state_dict().items() if has_head or not k.startswith("fc.")}
    if layout == "fid" and not has_head:
        expected = net.state_dict()  # the library's network always has the 1008-way fc
    _check_keys(sd, expected, path, "Inception", _INCEPTION_SUPPORTED)
    if layout == "fid":
        return FIDInceptionFeatureNet(str(path)).eval()
    net.load_state_dict(sd, strict=has_head)
    return TorchvisionInceptionFeatureNet(net, str(path), has_head).eval()


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
