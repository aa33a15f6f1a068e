"""Acquisition scores of pool-based active learning, and the top-b selection.

Every score is a function of arrays of natural-log probabilities and returns float64 ``[n]``
in nats (larger = acquire first):

``predictive_entropy(log_q)``        H(q(y|x)) = -sum_y q log q: the model's total uncertainty,
                                     aleatoric and epistemic confounded (what a practitioner has)
``exact_epistemic(log_p, log_q)``    KL(p(y|x) || q(y|x)): the exact epistemic part, needs the
                                     oracle posterior p (the upper bound of the paper, section 4.4)
``exact_aleatoric(log_p)``           H(p(y|x)): the exact aleatoric part (not a strategy: what
                                     predictive entropy should not chase)
``bald(log_q_passes)``               H(mean_t q_t) - mean_t H(q_t) over T stochastic passes
                                     (MC dropout) or T ensemble members: the mutual information
                                     between y and the model parameters (Houlsby et al. 2011,
                                     Gal et al. 2017), a realistic epistemic proxy

Conventions as in `oracle.decomposition`: 0 log 0 = 0, rows of ``log_*`` must be normalized.
`select_top` turns scores into a batch: the b largest, ties broken by index (lowest first) or,
with a generator, by a seeded random order (the ``random`` strategy is `select_top` of equal
scores with a generator).
"""

from __future__ import annotations

import numpy as np
import torch

from oracle.decomposition import entropy, per_sample_terms
from oracle.errors import OracleError


def predictive_entropy(log_q) -> np.ndarray:
    """H(q(y|x)) per row, float64 [n], nats. ``log_q``: [n, K] model log-probabilities."""
    return entropy(log_q).numpy()


def exact_aleatoric(log_p) -> np.ndarray:
    """H(p(y|x)) per row, float64 [n], nats. ``log_p``: [n, K] oracle log-posteriors."""
    return entropy(log_p).numpy()


def exact_epistemic(log_p, log_q) -> np.ndarray:
    """KL(p(y|x) || q(y|x)) per row, float64 [n], nats. ``log_p``, ``log_q``: [n, K]."""
    return per_sample_terms(log_p, log_q)["epistemic"].numpy()


def bald(log_q_passes) -> np.ndarray:
    """BALD score per row, float64 [n], nats: H(mean_t q_t) - mean_t H(q_t).

    ``log_q_passes``: [T, n, K] log-probabilities of T stochastic forward passes (MC dropout)
    or T ensemble members, T >= 1. The mean predictive distribution is taken in probability
    space (log-mean-exp over T). The score is 0 when every pass agrees and, by concavity of
    the entropy, >= 0 otherwise (up to rounding, which is left as is: clipping would create
    ties that the ranking does not have).
    """
    t = torch.as_tensor(np.asarray(log_q_passes)) if not isinstance(log_q_passes, torch.Tensor) else log_q_passes
    t = t.detach().to("cpu", torch.float64)
    if t.ndim != 3 or min(t.shape) < 1:
        raise OracleError(f"log_q_passes has shape {tuple(t.shape)}; expected [T, n, K] log-probabilities")
    passes, n, k = t.shape
    # entropy() checks that every pass's rows are normalized log-probabilities
    expected_entropy = entropy(t.reshape(passes * n, k)).reshape(passes, n).mean(0)
    log_mean = torch.logsumexp(t, dim=0) - np.log(passes)
    return (entropy(log_mean) - expected_entropy).numpy()


def select_top(scores, b: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Positions of the `b` largest `scores` (int64 [b], best first).

    Ties are broken by position, lowest first, when `rng` is None; with a generator they are
    broken by a random permutation drawn from it (so equal scores give a seeded uniform draw).
    NaN scores raise OracleError (a NaN has no rank). ``b`` must lie in [0, len(scores)].
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1:
        raise OracleError(f"scores has shape {s.shape}; expected [n]")
    if np.isnan(s).any():
        raise OracleError(f"scores[{int(np.flatnonzero(np.isnan(s))[0])}] is NaN; expected a number for every row")
    if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or not 0 <= b <= len(s):
        raise OracleError(f"b={b!r}: expected an integer in [0, {len(s)}]")
    tiebreak = np.arange(len(s)) if rng is None else rng.permutation(len(s))
    # lexsort sorts by the last key first: by -score, then by the tie-break key
    order = np.lexsort((tiebreak, -s))
    return order[: int(b)].astype(np.int64)
