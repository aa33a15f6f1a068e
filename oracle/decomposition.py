"""Cross-entropy = aleatoric + epistemic, and other expectations over the oracle's posteriors.

With the true posterior ``p = p(y|x)`` and a model's ``q = q(y|x)``, per example (nats)::

    total      CE(p, q) = -sum_y p log q
    aleatoric  H(p)     = -sum_y p log p
    epistemic  KL(p||q) =  sum_y p (log p - log q)

so ``total = aleatoric + epistemic`` (paper, Eq. 4). Each term is computed from its own
definition (not as a difference of the other two), so the identity is a check, not an
assignment. Conventions: ``0 log 0 = 0`` and ``0 * log q = 0`` even where ``q = 0``
(``log q = -inf``): a class the truth rules out costs nothing. Where ``p > 0`` and
``log q = -inf`` the cross-entropy and KL are ``+inf``, as they should be.

Expectations over x are Monte Carlo means over samples; each comes with its standard error
``std(ddof=1) / sqrt(n)`` (DESIGN.md, rule 6). Inputs may be torch tensors or numpy arrays
of natural-log probabilities ``[n, K]``; everything is computed in float64 on the CPU.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from oracle.errors import OracleError
from oracle.worlds import validate_prior

__all__ = [
    "per_sample_terms",
    "decompose",
    "bayes_accuracy",
    "bayes_error",
    "mutual_information_bits",
    "accuracy",
    "mean_se",
    "entropy",
]

NORMALIZATION_ATOL = 1e-4
"""How far ``logsumexp`` of a row may be from 0 (float32 log-softmax outputs pass; logits don't)."""


def _as_2d(a, name: str) -> Tensor:
    t = a.detach() if isinstance(a, Tensor) else torch.as_tensor(np.asarray(a))
    t = t.to("cpu", torch.float64)
    if t.ndim != 2 or t.shape[0] < 1 or t.shape[1] < 1:
        raise OracleError(f"{name} has shape {tuple(t.shape)}; expected [n, K] log-probabilities")
    return t


def _as_log_probs(a, name: str) -> Tensor:
    return _check_log_probs(_as_2d(a, name), name)


def _check_log_probs(t: Tensor, name: str) -> Tensor:
    bad = torch.isnan(t) | (t == math.inf)
    if bool(bad.any()):
        i, k = torch.nonzero(bad)[0].tolist()
        raise OracleError(f"{name}[{i}, {k}] = {t[i, k].item()!r}; expected a log-probability (<= 0, not NaN)")
    lse = torch.logsumexp(t, dim=1)
    off = (lse.abs() > NORMALIZATION_ATOL) | ~torch.isfinite(lse)
    if bool(off.any()):
        i = int(torch.nonzero(off)[0, 0])
        raise OracleError(
            f"{name} row {i} has logsumexp {lse[i].item():.6g}; expected normalized log-probabilities "
            "(apply log_softmax / log_posterior first)"
        )
    return t


def _pair(log_p, log_q) -> tuple[Tensor, Tensor]:
    lp = _as_2d(log_p, "log_p")
    lq = _as_2d(log_q, "log_q")
    if lp.shape != lq.shape:
        raise OracleError(f"log_p has shape {tuple(lp.shape)} but log_q has {tuple(lq.shape)}; expected equal [n, K]")
    return _check_log_probs(lp, "log_p"), _check_log_probs(lq, "log_q")


def mean_se(values) -> dict[str, float]:
    """``{"mean", "se"}`` of a 1-D sample; se = std(ddof=1)/sqrt(n) (NaN when n = 1)."""
    v = values.detach() if isinstance(values, Tensor) else torch.as_tensor(np.asarray(values))
    v = v.to("cpu", torch.float64).flatten()
    n = v.numel()
    if n == 0:
        raise OracleError("mean_se: empty sample; expected at least one value")
    mean = float(v.mean())
    if n == 1 or not math.isfinite(mean):
        return {"mean": mean, "se": math.nan if n == 1 else math.inf}
    return {"mean": mean, "se": float(v.std(correction=1)) / math.sqrt(n)}


def entropy(log_p) -> Tensor:
    """Shannon entropy ``H(p) = -sum_y p log p`` per row: Tensor[n] float64, nats (0 log 0 = 0)."""
    lp = _as_log_probs(log_p, "log_p")
    p = lp.exp()
    return -torch.where(p > 0, p * lp, torch.zeros_like(lp)).sum(1)


def per_sample_terms(log_p, log_q) -> dict[str, Tensor]:
    """Per-example ``{"total", "aleatoric", "epistemic"}``: each Tensor[n] float64 in nats.

    ``total = -sum p log q``, ``aleatoric = H(p)``, ``epistemic = KL(p || q)``, with entries
    where ``p = 0`` contributing exactly 0 (whatever ``log q`` is).
    """
    lp, lq = _pair(log_p, log_q)
    p = lp.exp()
    support = p > 0
    zero = torch.zeros_like(lp)
    total = -torch.where(support, p * lq, zero).sum(1)
    aleatoric = -torch.where(support, p * lp, zero).sum(1)
    epistemic = torch.where(support, p * (lp - lq), zero).sum(1)
    return {"total": total, "aleatoric": aleatoric, "epistemic": epistemic}


def decompose(log_p, log_q) -> dict[str, dict[str, float]]:
    """Expected cross-entropy and its two parts: ``{"total"|"aleatoric"|"epistemic": {"mean", "se"}}``.

    Means over the n examples, in nats; se = std(ddof=1)/sqrt(n).
    """
    terms = per_sample_terms(log_p, log_q)
    return {name: mean_se(v) for name, v in terms.items()}


def bayes_accuracy(log_p) -> dict[str, float]:
    """Bayes-optimal accuracy ``E_x[max_y p(y|x)]`` with its standard error."""
    lp = _as_log_probs(log_p, "log_p")
    return mean_se(lp.max(dim=1).values.exp())


def bayes_error(log_p) -> dict[str, float]:
    """Bayes error ``E_x[1 - max_y p(y|x)]`` with its standard error.

    With x drawn from the world and label temperature 1 this is an unbiased estimate of the
    misclassification rate of the Bayes classifier (lower variance than counting errors).
    """
    lp = _as_log_probs(log_p, "log_p")
    return mean_se(-torch.expm1(lp.max(dim=1).values))


def mutual_information_bits(log_p, prior) -> dict[str, float]:
    """``I(X;Y) = H(Y) - E_x[H(Y|X=x)]`` in bits, its se, and ``I / H(Y)`` ("normalized").

    ``H(Y)`` is the entropy of ``prior`` (exact); the expectation is the Monte Carlo mean of
    the posterior entropies, so ``se`` is that mean's standard error (in bits). With a label
    temperature != 1 the posteriors are not the world's conditional label law and this is
    the paper's "information" figure rather than a true mutual information.
    """
    lp = _as_log_probs(log_p, "log_p")
    pi = validate_prior(prior, lp.shape[1])
    h_y = float(-torch.where(pi > 0, pi * torch.log(pi), torch.zeros_like(pi)).sum()) / math.log(2)
    cond = mean_se(entropy(lp) / math.log(2))
    bits = h_y - cond["mean"]
    return {"bits": bits, "se": cond["se"], "normalized": bits / h_y if h_y > 0 else math.nan,
            "h_y_bits": h_y}


def accuracy(log_q, labels) -> dict[str, float]:
    """Top-1 accuracy of ``argmax_y log_q`` against ``labels`` [n], with its standard error.

    ``log_q`` may be any scores ([n, K]); ties go to the lowest class index.
    """
    s = log_q.detach() if isinstance(log_q, Tensor) else torch.as_tensor(np.asarray(log_q))
    s = s.to("cpu", torch.float64)
    if s.ndim != 2:
        raise OracleError(f"log_q has shape {tuple(s.shape)}; expected [n, K]")
    y = labels.detach() if isinstance(labels, Tensor) else torch.as_tensor(np.asarray(labels))
    y = y.to("cpu").flatten()
    if y.numel() != s.shape[0]:
        raise OracleError(f"labels has {y.numel()} entries but log_q has {s.shape[0]} rows")
    if y.is_floating_point():
        raise OracleError(f"labels has dtype {y.dtype}; expected integer class indices")
    if bool(torch.isnan(s).any()):
        raise OracleError("log_q contains NaN")
    return mean_se((s.argmax(dim=1) == y.long()).to(torch.float64))
