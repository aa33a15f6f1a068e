"""The validation checks that use the oracle's density: posterior stability under small input
noise (KL in nats) and bits per dimension (on the flow's [-1, 1] scale and at uint8 scale)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from oracle.errors import OracleError
from oracle.validation.metrics import _mean_se


# --------------------------------------------------------------------------------------------


def posterior_stability(log_post_fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                        noise_std: float, generator: torch.Generator | None = None,
                        batch_size: int = 256) -> dict:
    """Mean KL(p(.|x) || p(.|x + eps)), eps ~ N(0, noise_std^2 I), in nats (paper Table 3).

    ``log_post_fn`` maps a batch ``[b, ...]`` to normalized log posteriors ``[b, K]`` (float64,
    e.g. ``lambda x: log_posterior(log_likelihoods(world, x), prior, T)``). The noise is drawn
    from ``generator`` batch by batch in order, so results are reproducible for a given seed
    and batch size. Returns ``{"mean_kl", "se", "n", "noise_std"}`` with se the standard error
    over samples.
    """
    if not (math.isfinite(noise_std) and noise_std >= 0):
        raise OracleError(f"posterior_stability: noise_std={noise_std} must be finite and >= 0")
    if x.shape[0] < 1:
        raise OracleError("posterior_stability: x is empty")
    kls = []
    with torch.no_grad():
        for start in range(0, x.shape[0], batch_size):
            xb = x[start:start + batch_size]
            eps = torch.randn(xb.shape, generator=generator, dtype=xb.dtype, device=xb.device)
            lp = log_post_fn(xb).to(torch.float64)
            lq = log_post_fn(xb + noise_std * eps).to(torch.float64)
            if lp.shape != lq.shape or lp.ndim != 2 or lp.shape[0] != xb.shape[0]:
                raise OracleError(f"posterior_stability: log_post_fn returned shape {tuple(lp.shape)}, "
                                  f"expected [{xb.shape[0]}, K]")
            if not (torch.isfinite(lp).all() and torch.isfinite(lq).all()):
                raise OracleError("posterior_stability: log_post_fn returned NaN or +-Inf")
            p = lp.exp()
            kls.append(torch.where(p > 0, p * (lp - lq), torch.zeros_like(p)).sum(dim=1).cpu())
    mean, se = _mean_se(torch.cat(kls).numpy())
    return {"mean_kl": mean, "se": se, "n": int(x.shape[0]), "noise_std": float(noise_std)}


# --------------------------------------------------------------------------------------------
# likelihood in bits per dimension
# --------------------------------------------------------------------------------------------


def uint8_scale_log_det(D: int) -> float:
    """log|det dx/du| (nats per image) for x = u/127.5 - 1, u the [0, 255] pixel scale: -D ln 127.5."""
    return -D * math.log(127.5)


def bits_per_dim(log_prob_nats, D: int, data_scale_log_det: float = 0.0) -> dict:
    """Oracle likelihood of held-out images in bits per dimension.

    ``log_prob_nats [n]`` is ``log p_x(x)`` in nats per image for x in model space: real images
    mapped as x = uint8/127.5 - 1 to [-1, 1] plus the Gaussian dequantization noise of std
    sigma that the flow was trained with. A change of variables x = g(u) gives
    ``log p_u(u) = log p_x(x) + log|det dg/du|``; ``data_scale_log_det`` is that log-Jacobian in
    nats per image. Then ``bpd = -log p_u(u) / (D ln 2)``.

    - ``data_scale_log_det=0``: bpd of the continuous density on the [-1, 1] scale.
    - ``data_scale_log_det=uint8_scale_log_det(D)`` (= -D ln 127.5): bpd on the [0, 255] pixel
      scale, which equals the [-1, 1] value + log2(127.5) (~6.994 bits).
    Caveat: with Gaussian (not uniform) dequantization this is the differential entropy rate of
    the *noisy* images, not an upper bound on a discrete code length; it is comparable across
    models only for equal sigma. Returns ``{"bpd", "se", "n", "D"}``.
    """
    lp = np.asarray(log_prob_nats, dtype=np.float64)
    if lp.ndim != 1 or lp.shape[0] < 1:
        raise OracleError(f"bits_per_dim: log_prob_nats must have shape [n], got {lp.shape}")
    if not np.isfinite(lp).all():
        raise OracleError("bits_per_dim: log_prob_nats contains NaN or Inf")
    if int(D) != D or D < 1:
        raise OracleError(f"bits_per_dim: D={D} must be a positive integer (dimensions per image)")
    bpd = -(lp + data_scale_log_det) / (D * math.log(2.0))
    mean, se = _mean_se(bpd)
    return {"bpd": mean, "se": se, "n": int(lp.shape[0]), "D": int(D)}


# --------------------------------------------------------------------------------------------
# split consistency (Xiao, Zenn & Bamler, SVHN split mismatch, eq. 2 / Table 1)
