"""Exact posteriors of a world: batched log-likelihoods, then Bayes' rule in log space.

Two steps, kept apart so any prior or label temperature can be applied later without running
the flow again (DESIGN.md, rule 4):

1. :func:`log_likelihoods` -- ``log p(x_i | y=k)`` for every image and every class, float64
   ``[n, K]`` in nats. Classes are evaluated ``class_batch`` at a time: one forward pass per
   (image batch, class batch) pair, the scheme the paper uses for ImageNet (50 classes per
   image batch).
2. :func:`log_posterior` -- ``log p(y|x) = log pi_y + log p(x|y)/T - logsumexp(...)``.

:func:`posterior_rows` applies step 2 to rows read from a sample file, with the file's prior
and temperature.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from oracle.errors import WorldError
from oracle.progress import track
from oracle.worlds import validate_prior

__all__ = ["log_likelihoods", "log_posterior"]


def _positive_int_or_none(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise WorldError(f"{name}={value!r}: expected a positive integer or None")
    return int(value)


def log_likelihoods(world, x, class_batch: int | None = None, image_batch: int | None = None,
                    progress: bool = False, max_rows: int | None = None) -> Tensor:
    """``log p(x_i | y=k)`` for all i and all K classes of ``world``: Tensor[n, K] float64, nats.

    Args:
        world: any :mod:`oracle.worlds` world.
        x: [n, *world.event_shape] inputs, exactly the array classifiers will read (rule 2).
        class_batch: classes per forward pass (None = all K at once). A flow evaluates
            ``rows * class_batch`` images per pass, so this bounds activation memory.
        image_batch: rows of ``x`` per pass (None = all n at once).
        progress: progress lines over the passes (`oracle.progress.track`) in a long call.
        max_rows: at most this many (image, class) pairs per pass (None = no bound): the images
            per pass are cut to ``max_rows // min(class_batch, K)`` (at least 1). A flow's
            activations grow with the pairs, so 256 images x 50 classes at 64 px would not fit
            a GPU, while 256 images (one sampling batch) do.

    Returns float64 on the device of ``x``. Raises WorldError on a non-finite value, naming
    the sample and class.
    """
    K = world.num_classes
    class_batch = _positive_int_or_none(class_batch, "class_batch") or K
    if not isinstance(x, Tensor):
        x = torch.as_tensor(np.asarray(x))
    n = x.shape[0]
    image_batch = _positive_int_or_none(image_batch, "image_batch") or max(n, 1)
    max_rows = _positive_int_or_none(max_rows, "max_rows")
    if max_rows is not None:
        image_batch = min(image_batch, max(1, max_rows // min(class_batch, K)))
    out = torch.empty(n, K, dtype=torch.float64, device=x.device)
    passes = [(i, j) for i in range(0, n, image_batch) for j in range(0, K, class_batch)]
    for i, j in track(passes, "log p(x|k)", unit="pass", enabled=progress):
        rows = slice(i, min(i + image_batch, n))
        classes = torch.arange(j, min(j + class_batch, K))
        ll = world.log_likelihood_classes(x[rows], classes)
        out[rows, j:j + classes.numel()] = ll.to(out.device)
    finite = torch.isfinite(out)
    if not bool(finite.all()):  # a world that forgot its own check
        i, k = torch.nonzero(~finite)[0].tolist()
        raise WorldError(f"non-finite log p(x|y) = {out[i, k].item()!r} for sample {i}, class {k}")
    return out


def pass_rows(batch_size: int, class_batch: int | None) -> int | None:
    """The ``max_rows`` of `log_likelihoods` for a config's ``samples.batch_size`` and
    ``samples.class_batch``: a config that batches classes (a GPU preset) also bounds a pass
    to one sampling batch of (image, class) pairs; ``class_batch: null`` (all K classes of a
    whole batch in one pass, small worlds) sets no bound."""
    return None if class_batch is None else int(batch_size)


def log_posterior(loglik, prior=None, temperature: float = 1.0) -> Tensor:
    """Log posterior ``log p(y|x)`` with ``p(y|x) ∝ pi_y * p(x|y)^(1/T)``: Tensor[n, K] float64.

    Args:
        loglik: [n, K] log-likelihoods in nats (torch or numpy), finite.
        prior: [K] class prior (None = uniform); validated like a world's prior. Zero entries
            give posterior 0 (log -inf) for that class.
        temperature: label temperature T > 0 (T = 1 is Bayes' rule).

    Normalized with log-sum-exp in float64, on the device of ``loglik``.
    """
    ll = loglik if isinstance(loglik, Tensor) else torch.as_tensor(np.asarray(loglik))
    if ll.ndim != 2:
        raise WorldError(f"loglik has shape {tuple(ll.shape)}; expected [n, K]")
    ll = ll.to(torch.float64)
    finite = torch.isfinite(ll)
    if not bool(finite.all()):
        i, k = torch.nonzero(~finite)[0].tolist()
        raise WorldError(f"loglik[{i}, {k}] = {ll[i, k].item()!r} is not finite")
    T = float(temperature)
    if not math.isfinite(T) or T <= 0:
        raise WorldError(f"temperature={temperature!r}: expected a positive finite number")
    pi = validate_prior(prior, ll.shape[1]).to(ll.device)
    logits = ll / T + torch.log(pi)
    return logits - torch.logsumexp(logits, dim=1, keepdim=True)


def posterior_rows(loglik: np.ndarray, attrs: Mapping) -> np.ndarray:
    """``log p(y|x)`` [n, K] float64 from stored ``log p(x|k)`` and the file's prior and label
    temperature (DESIGN rule 1: the world the samples were drawn from)."""
    prior = np.asarray(attrs["prior"], dtype=np.float64)
    return log_posterior(loglik, prior=prior, temperature=float(attrs["label_temperature"])).numpy()
