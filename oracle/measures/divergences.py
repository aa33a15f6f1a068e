"""Exact divergences between oracle worlds, and their Monte Carlo check.

Everything is in nats and float64. Worlds that share the frozen class-conditional densities
differ only in their class prior pi and base temperature tau (DESIGN "World variants"):

* **label marginal** ``KL_y(pi || pi_0) = sum_k pi_k log(pi_k / pi_0k)`` (paper appendix F,
  Eq. 8, with pi_0 uniform); from a target prior, or from realised class counts
  (``pi_hat = counts / N``, the paper's "empirical" KL_y);
* **base temperature** ``KL(p_tau(x|y) || p_tau0(x|y)) = D/2 (r^2 - 1 - ln r^2)``,
  ``r = tau / tau_0``, the same for every class y: a flow is invertible, KL is invariant under
  invertible maps, and its latents are N(0, tau^2 var) against N(0, tau_0^2 var) in D
  dimensions (for a Gaussian world N(mu_y, (std tau)^2 I) against N(mu_y, (std tau_0)^2 I));
* **joint** ``KL(p_a(x, y) || p_b(x, y)) = KL(pi_a || pi_b) + D/2 (r^2 - 1 - ln r^2)``: the
  chain rule with the conditional part equal for every y.

Here y is the class a sample was drawn from: the generative joint pi_y p(x|y). The label
temperature T does not enter; at T != 1 the world's label y ~ p_T(y|x) is a further draw and
the joint of (x, label) is another distribution (this module does not claim its KL).

The Monte Carlo check draws (x, y) from world a and averages ``log p_a(x, y) - log p_b(x, y)``
computed by the frozen model itself (`monte_carlo_kl`, with its standard error), so the closed
form is tested against the flow's own log densities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oracle.errors import OracleError

#: |closed form - Monte Carlo| <= AGREE_SE * SE counts as agreement (as for the Bayes error).
AGREE_SE = 3.0
#: Samples of a world the workflow's Monte Carlo check uses (its first rows). The SE of a tau
#: variant is sqrt(D/2) |1 - r^2| / sqrt(n): ~3% of the KL for D = 64, tau = 0.9 and n = 4096,
#: ~0.05% for AFHQ's D = 196,608.
MONTE_CARLO_ROWS = 4096


def _distribution(p: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(p, dtype=np.float64)
    if a.ndim != 1 or a.size < 1 or not np.isfinite(a).all() or (a < 0).any():
        raise OracleError(f"{name}: expected a 1-D array of finite non-negative probabilities, got {a.tolist()}")
    if abs(a.sum() - 1.0) > 1e-6:
        raise OracleError(f"{name}={a.tolist()} sums to {a.sum():.10g}; expected 1")
    return a / a.sum()


def categorical_kl(p: Sequence[float] | np.ndarray, q: Sequence[float] | np.ndarray) -> float:
    """``KL(p || q) = sum_k p_k log(p_k / q_k)`` in nats (0 log 0 = 0; +inf where q_k = 0 < p_k)."""
    p, q = _distribution(p, "p"), _distribution(q, "q")
    if p.shape != q.shape:
        raise OracleError(f"p has {p.size} classes but q has {q.size}")
    support = p > 0
    if (q[support] == 0).any():
        return math.inf
    return float(np.sum(p[support] * (np.log(p[support]) - np.log(q[support]))))


def label_kl(prior: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray | None = None) -> float:
    """``KL_y(pi || pi_0)`` (nats) of a class prior against `reference` (None: uniform, the
    paper's P_0(y) = 1/K)."""
    pi = _distribution(prior, "prior")
    ref = np.full(pi.size, 1.0 / pi.size) if reference is None else reference
    return categorical_kl(pi, ref)


def counts_kl(counts: Sequence[int] | np.ndarray, reference: Sequence[float] | np.ndarray | None = None) -> float:
    """The paper's empirical ``KL_y``: `label_kl` of the realised frequencies counts / sum(counts)."""
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or (c < 0).any() or c.sum() <= 0:
        raise OracleError(f"counts: expected non-negative class counts with a positive sum, got {c.tolist()}")
    return label_kl(c / c.sum(), reference)


def tau_kl(dim: int, tau: float, tau_ref: float = 1.0) -> float:
    """``KL(p_tau(x|y) || p_tau_ref(x|y)) = D/2 (r^2 - 1 - ln r^2)``, ``r = tau / tau_ref``, in
    nats per sample, for a flow or Gaussian world of `dim` = D dimensions (module docstring)."""
    if int(dim) < 1 or not (tau > 0 and tau_ref > 0 and math.isfinite(tau) and math.isfinite(tau_ref)):
        raise OracleError(f"tau_kl: expected dim >= 1 and positive temperatures, got dim={dim}, tau={tau}, "
                          f"tau_ref={tau_ref}")
    r2 = (float(tau) / float(tau_ref)) ** 2
    return 0.5 * int(dim) * (r2 - 1.0 - math.log(r2))


def variant_kl(dim: int, prior: Sequence[float] | np.ndarray, tau: float,
               ref_prior: Sequence[float] | np.ndarray, ref_tau: float) -> dict[str, float]:
    """The exact ``KL(p_a(x, y) || p_b(x, y))`` of two worlds that share their densities:
    {"prior": KL(pi_a || pi_b), "tau": D/2 (r^2 - 1 - ln r^2), "total": their sum} (nats)."""
    prior_part = categorical_kl(prior, ref_prior)
    tau_part = tau_kl(dim, tau, ref_tau)
    return {"prior": prior_part, "tau": tau_part, "total": prior_part + tau_part}


def monte_carlo_kl(log_p_a: np.ndarray, log_p_b: np.ndarray) -> dict[str, float]:
    """``KL(p_a || p_b)`` as the mean of ``log p_a(s) - log p_b(s)`` over samples s ~ p_a:
    {"mean", "se", "n"} (nats; se = std(ddof=1)/sqrt(n))."""
    a = np.asarray(log_p_a, dtype=np.float64).ravel()
    b = np.asarray(log_p_b, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise OracleError(f"monte_carlo_kl: expected two finite arrays of equal length >= 2, got {a.shape}, {b.shape}")
    d = a - b
    return {"mean": float(d.mean()), "se": float(d.std(ddof=1) / math.sqrt(d.size)), "n": int(d.size)}


def joint_log_density(loglik_y: np.ndarray, y: np.ndarray, prior: Sequence[float] | np.ndarray) -> np.ndarray:
    """``log pi_y + log p(x|y)`` [n] from ``log p(x|y)`` at each row's class `y` (float64)."""
    pi = _distribution(prior, "prior")
    with np.errstate(divide="ignore"):
        return np.log(pi)[np.asarray(y, dtype=np.int64)] + np.asarray(loglik_y, dtype=np.float64)


def world_kl_check(x: Any, y: np.ndarray, loglik: np.ndarray, prior: Sequence[float], tau: float,
                   reference: Any, dim: int) -> dict[str, Any]:
    """Closed form against Monte Carlo for samples (x, y) of world a and a reference world b.

    x: [n, *event] the samples of world a (exactly as stored); y: int [n], the class each was
    drawn from; loglik: [n, K] float64, ``log p_a(x|k)`` as stored with them; prior, tau: world
    a's; reference: world b (an `oracle.worlds` world with the same densities: its prior and
    base temperature are used, and ``log p_b(x|y)`` is computed by it unless its temperature
    is tau, when the stored values are those). Returns {"closed_form": `variant_kl`,
    "monte_carlo": `monte_carlo_kl`, "z", "agrees_within_3se", "dim", "reference":
    {"prior", "base_temperature"}}.
    """
    y = np.asarray(y, dtype=np.int64)
    loglik = np.asarray(loglik, dtype=np.float64)
    rows = np.arange(y.size)
    ref_prior = reference.prior.numpy()
    ref_tau = float(reference.base_temperature)
    ll_a = loglik[rows, y]
    if ref_tau == float(tau):
        ll_b = ll_a
    else:
        ll_b = reference.log_likelihood(x, y).cpu().numpy()
    mc = monte_carlo_kl(joint_log_density(ll_a, y, prior), joint_log_density(ll_b, y, ref_prior))
    closed = variant_kl(dim, prior, tau, ref_prior, ref_tau)
    diff = mc["mean"] - closed["total"]
    z = diff / mc["se"] if mc["se"] > 0 else (0.0 if diff == 0 else math.inf)
    return {"closed_form": closed, "monte_carlo": mc, "z": z, "agrees_within_3se": bool(abs(diff) <= AGREE_SE * mc["se"]),
            "dim": int(dim), "reference": {"prior": ref_prior.tolist(), "base_temperature": ref_tau}}


def summary_line(result: Mapping[str, Any]) -> str:
    """One line for a job log: closed form, Monte Carlo ± SE, z."""
    c, m = result["closed_form"], result["monte_carlo"]
    return (f"KL closed form {c['total']:.6g} nats (prior {c['prior']:.4g}, tau {c['tau']:.4g}); Monte Carlo "
            f"{m['mean']:.6g} ± {m['se']:.3g} over {m['n']} samples (z = {result['z']:.2f})")
