"""Model log-probabilities log q(y|x) of a trained classifier."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from oracle.classifiers.train import _check_images
from oracle.devices import autocast, pick_device


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
