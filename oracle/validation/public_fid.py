"""The public TarFlow FID protocol's samples: annealed classifier-free guidance, then one
self-denoising gradient step. For FID numbers comparable with published TarFlow FIDs and for
pictures ONLY: these images do not follow the flow's density, so they are never oracle data
(DESIGN rule 5) and nothing here writes them where an experiment reads samples.

Protocol (facts of the public release's FID script, re-implemented here): draw the latent at
base temperature 1; invert with guidance weight ``g * (i + 1) / (T - 1)`` at token i + 1 of
every block; then move each image one step along the gradient of its log density, with the
step ``sigma^2`` (``sigma`` = the flow's training dequantization noise): by Tweedie's formula
``x + sigma^2 * grad log p_sigma(x)`` estimates the clean image behind a noisy one. Images are
clipped to [-1, 1]; a batch with a non-finite image is drawn again.
"""

from __future__ import annotations

import torch
from torch import Tensor

from oracle.errors import OracleError


def self_denoise(model, x: Tensor, y: Tensor | None, noise_std: float, lr_scale: float = 1.0) -> Tensor:
    """One gradient step ``x + lr_scale * noise_std**2 * grad_x log p(x | y)`` per image.

    ``x`` [n, C, H, W] on [-1, 1] (float); ``y`` LongTensor[n] or None; ``noise_std`` the flow's
    Gaussian dequantization sigma in [-1, 1] units. The gradient is that of the per-image
    negative log density (the training loss is its mean over images and dimensions, so it is
    scaled back by n * D). Returns a new tensor; the model's parameters get no gradient.
    """
    if noise_std < 0 or lr_scale < 0:
        raise OracleError(f"self_denoise: noise_std={noise_std} and lr_scale={lr_scale} must be >= 0")
    n, d = x.shape[0], x[0].numel()
    xg = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        z, _, logdets = model(xg, y)
        loss = model.loss(z, logdets)
        (grad,) = torch.autograd.grad(loss, [xg])
    return (x - lr_scale * noise_std**2 * n * d * grad).detach()


def public_protocol_samples(model, y: Tensor | None, *, guidance: float, noise_std: float,
                            generator: torch.Generator | None = None, n: int | None = None,
                            denoise: bool = True, annealed: bool = True, max_redraws: int = 10) -> Tensor:
    """Images [n, C, H, W] on [-1, 1] drawn by the public TarFlow FID protocol (not oracle data).

    ``y`` LongTensor[n] (or None with ``n`` for an unconditional flow); ``guidance`` the CFG
    weight (0 = none; e.g. 2.3 in the public ImageNet-64 command); ``noise_std`` the flow's
    training noise (the denoising step size); ``denoise``/``annealed`` switch the two parts off.
    """
    if guidance < 0:
        raise OracleError(f"public_protocol_samples: guidance={guidance} must be >= 0")
    model.eval()
    for _ in range(max_redraws + 1):
        if y is None:
            z = model.draw_noise(int(n), 1.0, generator)
        else:
            z = model.draw_noise(int(y.numel()), 1.0, generator)
        x = model.reverse(z, y, guidance, annealed_guidance=annealed)
        if denoise:
            x = self_denoise(model, x, y, noise_std)
        if torch.isfinite(x).all():
            return x.clamp(-1.0, 1.0)
    raise OracleError(f"public_protocol_samples: non-finite images in {max_redraws + 1} draws")
