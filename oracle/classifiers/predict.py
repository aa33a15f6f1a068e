"""Model log-probabilities log q(y|x) of a trained classifier, and its raw logits (what
logit-based accuracy estimators such as MaNo read, `oracle.measures.accuracy_estimators`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from oracle.classifiers.train import _check_images
from oracle.devices import autocast, pick_device
from oracle.progress import track


@torch.no_grad()
def predict_logits(
    model: nn.Module,
    x: Tensor,
    batch_size: int = 256,
    device: str | torch.device | None = "cpu",
    amp: bool = False,
) -> Tensor:
    """The model's logits: Tensor[n, K] float64 on the CPU.

    By default the forward pass runs in float32 even on CUDA: the epistemic KL is a small
    difference of log-probabilities and bf16 logits (3 significant digits) would blur it;
    ``amp=True`` trades that for speed.
    """
    device = device if isinstance(device, torch.device) else pick_device(device)
    x = _check_images(x)
    model.to(device).eval()
    out = []
    for start in track(range(0, x.shape[0], batch_size), "predict"):
        xb = x[start:start + batch_size].to(device, non_blocking=True)
        with autocast(device, enabled=amp):
            logits = model(xb)
        out.append(logits.to(torch.float64).cpu())
    return torch.cat(out)


def predict_log_probs(
    model: nn.Module,
    x: Tensor,
    batch_size: int = 256,
    device: str | torch.device | None = "cpu",
    amp: bool = False,
) -> Tensor:
    """Model log-probabilities ``log q(y|x)``: Tensor[n, K] float64 on the CPU (natural log),
    the log-softmax in float64 of `predict_logits`."""
    return torch.log_softmax(predict_logits(model, x, batch_size, device, amp), dim=1)
@torch.no_grad()
def mc_dropout_log_probs(
    model: nn.Module,
    x: Tensor,
    passes: int,
    seed: int,
    batch_size: int = 256,
    device: str | torch.device | None = "cpu",
) -> Tensor:
    """``log q_t(y|x)`` of `passes` MC-dropout forward passes: Tensor[T, n, K] float64 on the CPU.

    The model must be an ``ImageClassifier`` built with ``model_kwargs={"drop_rate": p}``,
    p in (0, 1). timm puts that dropout in one place for every architecture: on the pre-logits
    features, right before the classifier head (``forward_head(..., pre_logits=True)`` returns
    its input; checked for ResNet, ViT, ConvNeXt, EfficientNet, MobileNetV3, Swin). So the
    features are computed once with the whole model in eval mode (BatchNorm uses its running
    statistics and nothing updates them) and each pass draws its own inverted-dropout mask on
    them (keep with probability 1 - p, scale 1 / (1 - p)) before the head: the same
    distribution as keeping that dropout layer active at scoring time, at the cost of T head
    evaluations instead of T full forwards. Masks come from a CPU generator seeded with
    `seed`, drawn batch by batch (pass-major within a batch), so the result is a function of
    (model, x, passes, seed, batch_size) on any device.
    """
    from oracle.errors import ConfigError

    p = float(((getattr(model, "spec", None) or {}).get("model_kwargs") or {}).get("drop_rate", 0.0))
    if not 0.0 < p < 1.0:
        raise ConfigError(f"MC dropout needs a model built with drop_rate in (0, 1), got drop_rate={p}")
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise ConfigError(f"passes={passes!r}: expected a positive integer")
    backbone = model.backbone
    if not all(hasattr(backbone, a) for a in ("forward_features", "forward_head", "get_classifier")):
        raise ConfigError(f"MC dropout needs a timm backbone with forward_features/forward_head/get_classifier, "
                          f"got {type(backbone).__name__}")
    device = device if isinstance(device, torch.device) else pick_device(device)
    x = _check_images(x)
    model.to(device).eval()
    head = backbone.get_classifier()
    generator = torch.Generator().manual_seed(int(seed))
    out = []
    for start in track(range(0, x.shape[0], batch_size), "MC dropout"):
        xb = x[start:start + batch_size].to(device, non_blocking=True)
        features = backbone.forward_head(backbone.forward_features(model.preprocess(xb)), pre_logits=True).float()
        batch = []
        for _ in range(passes):
            keep = (torch.rand(features.shape, generator=generator) >= p).to(device, features.dtype)
            logits = head(features * keep / (1.0 - p))
            batch.append(torch.log_softmax(logits.to(torch.float64), dim=1).cpu())
        out.append(torch.stack(batch))
    return torch.cat(out, dim=1)
