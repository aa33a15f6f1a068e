"""Model log-probabilities log q(y|x) of a trained classifier, and its raw logits (what
logit-based accuracy estimators such as MaNo read, `oracle.measures.estimators`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from oracle.classifiers.train import _check_images
from oracle.devices import autocast, pick_device


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
    for start in tqdm(range(0, x.shape[0], batch_size), desc="predict", disable=None, leave=False):
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
