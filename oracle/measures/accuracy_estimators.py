"""Label-free accuracy estimators (the MaNo seed and its baselines) and how they are scored.

Each estimator maps one model's outputs on one unlabelled test set to a number. Inputs are
float64 arrays [N, K]: ``logits`` (MaNo's Taylor normalization is not invariant to a per-row
shift, so it needs the raw logits) or ``log_q`` = log_softmax(logits) (natural log).

==============  ================================================================  ==========
method          value                                                             predicts
==============  ================================================================  ==========
``mano``        MaNo (Xie et al. 2024, Eqs. 2, 5, 6): S = (1/(NK) sum_ik          score
                sigma(q_i)_k^p)^(1/p), p = 4; sigma = phi(v(q)), phi(u) = u/sum u,
                v = 1 + q + q^2/2 when Phi <= eta (eta = 5) else exp(q), with
                Phi = -(1/(NK)) sum_ik log softmax(q_i)_k, once per test set
``mano_``       MaNo as its public code computes it (``variant="official"``,      score
``official``    below)
``confscore``   mean max softmax probability (Hendrycks & Gimpel)                 accuracy
``entropy``     1 - mean H(q_i) / log K, the normalized negative entropy          score
                (Guillory et al.; R^2 and |rho| are invariant to this affine map)
``nuclear``     ||Q||_* / sqrt(N min(N, K)), Q the softmax matrix (Deng et al.    score
                2023); in [0, 1]
``atc_mc``      ATC (Garg et al. 2022) with s = max softmax probability: the      accuracy
                fraction of test rows with s > t, t fitted on labelled
                in-distribution rows so that the fraction above t equals their
                accuracy (`atc_threshold`)
``atc_ne``      ATC with s = negative entropy sum_k q_k log q_k                   accuracy
==============  ================================================================  ==========

``mano_official`` is MaNo as the public code (``algs/mano.py``, ``main.py``) computes it from
stored logits (``variant="official"``); the paper's equations (``variant="paper"``, the
default) and the code differ in three ways that stored logits reproduce:

1. the code subtracts each row's minimum after the Taylor step, before normalizing. This is not
   a no-op: (v - min v) / sum(v - min v) is a different row from v / sum v (one entry becomes 0,
   the others grow), and MaNo's appendix E.2 describes it for every Taylor order, not only the
   orders where v can be negative. With K = 2 classes it makes every row one-hot, so on the
   Taylor branch the official score is the constant 2^(-1/p) whatever the logits;
2. the code takes the normalized norm per batch of 128 rows and averages the batch scores (the
   last, shorter batch weighs as much as a full one); Eq. 2 takes one norm over the N x K matrix;
3. the code's criterion Phi is the uniform cross-entropy of the *fifth* batch alone (of the
   last batch when there are fewer): ``uniform_cross_entropy`` collects the first five batches'
   losses but returns ``torch.mean(torch.Tensor(loss))``, the last loss, not the list; and
   ``main.py`` computes it once, on the first test set of the family, and reuses it for every
   other set (``args["delta"]``). Eq. 6 defines Phi over each test set. Here
   `mano_official_criterion` is that fifth batch's Phi, and the estimators kind computes it on
   the clean test set (its family's first) and passes it to every shifted set of that model.

Two things the official code does cannot be reproduced from stored logits and are left out: it
scores with the model in train mode (``base_model.train()``: BatchNorm normalizes with each
batch's own statistics, so its logits are not the evaluation-mode logits stored here) and over
a shuffled loader (which rows form each batch, and so the fifth batch, is random).

Scoring over a family of shifted test sets (the seed's Table 1): ``r2`` is the coefficient of
determination of the least-squares line predicting the true accuracy from the estimate (equal
to Pearson's r^2), ``spearman`` the rank correlation (signed; the seed reports |rho|), and
``mae`` the mean absolute error |estimate - accuracy| for methods that predict an accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from oracle.errors import OracleError

#: MaNo's norm order p and criterion threshold eta (the seed's defaults, Section 3.2 and D.3).
MANO_P = 4.0
MANO_ETA = 5.0
#: The public code's batch size (rows per norm) and the batches its criterion Phi is taken over.
MANO_OFFICIAL_BATCH = 128
MANO_OFFICIAL_CRITERION_BATCHES = 5
#: MaNo's variants: the paper's equations, or the public code's behaviour (module docstring).
MANO_VARIANTS = ("paper", "official")

#: Every method, in display order, with its label and whether it predicts an accuracy.
METHODS: dict[str, tuple[str, bool]] = {
    "mano": ("MaNo", False),
    "mano_official": ("MaNo (official)", False),
    "atc_mc": ("ATC-MC", True),
    "atc_ne": ("ATC-NE", True),
    "confscore": ("ConfScore", True),
    "entropy": ("Entropy", False),
    "nuclear": ("Nuclear", False),
}


def _matrix(a, name: str) -> np.ndarray:
    m = np.asarray(a, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 2 or not np.isfinite(m).all():
        raise OracleError(f"{name}: expected a finite [N, K] array with K >= 2, got shape {m.shape}")
    return m


def log_softmax(logits) -> np.ndarray:
    """Row-wise log-softmax in float64."""
    z = _matrix(logits, "logits")
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _probs(log_q) -> np.ndarray:
    lq = np.asarray(log_q, dtype=np.float64)
    if lq.ndim != 2 or lq.shape[1] < 2 or np.isnan(lq).any():
        raise OracleError(f"log_q: expected [N, K] log-probabilities with K >= 2, got shape {lq.shape}")
    p = np.exp(lq)
    if np.abs(p.sum(axis=1) - 1.0).max() > 1e-4:
        raise OracleError("log_q: rows must be normalized log-probabilities (apply log_softmax first)")
    return p


def mano_criterion(logits) -> float:
    """MaNo's Phi(D) = -(1/(NK)) sum_ik log softmax(q_i)_k (Eq. 6)."""
    return float(-log_softmax(logits).mean())


def _variant(variant: str) -> str:
    if variant not in MANO_VARIANTS:
        raise OracleError(f"mano: variant={variant!r}; expected one of {', '.join(MANO_VARIANTS)}")
    return variant


def mano_official_criterion(logits) -> float:
    """Phi as the public code computes it (module docstring, item 3): Eq. 6 on the
    `MANO_OFFICIAL_CRITERION_BATCHES`-th batch of `MANO_OFFICIAL_BATCH` rows, or on the last
    batch when there are fewer (nats)."""
    q = _matrix(logits, "logits")
    b = MANO_OFFICIAL_BATCH
    n_batches = -(-q.shape[0] // b)
    last = min(n_batches, MANO_OFFICIAL_CRITERION_BATCHES) - 1
    return mano_criterion(q[last * b:(last + 1) * b])


def mano_normalize(logits, eta: float = MANO_ETA, variant: str = "paper", criterion: float | None = None) -> np.ndarray:
    """SoftTrun (Eqs. 5, 6): each row v(q_i) / sum_k v(q_i)_k, v = 1 + q + q^2/2 when
    Phi <= eta, exp(q) (the softmax) otherwise. [N, K] rows on the simplex.

    ``variant="official"`` subtracts each Taylor row's minimum before normalizing (a row whose
    entries are all equal becomes 0, as the code's L1 normalization with its 1e-12 floor does).
    ``criterion``: Phi to switch on (default: `mano_criterion` of these logits for the paper,
    `mano_official_criterion` for the official variant)."""
    q = _matrix(logits, "logits")
    if criterion is None:
        criterion = mano_criterion(q) if _variant(variant) == "paper" else mano_official_criterion(q)
    if criterion > eta:
        return np.exp(log_softmax(q))
    v = 1.0 + q + 0.5 * q * q
    if _variant(variant) == "official":
        v = v - v.min(axis=1, keepdims=True)
        return v / np.maximum(v.sum(axis=1, keepdims=True), 1e-12)
    return v / v.sum(axis=1, keepdims=True)


def mano(logits, p: float = MANO_P, eta: float = MANO_ETA, variant: str = "paper",
         criterion: float | None = None) -> float:
    """MaNo's score, in [0, 1]. ``variant="paper"`` (Eq. 2): ``(1/(NK) sum_ik |sigma(q_i)_k|^p)^(1/p)``
    over the whole [N, K] matrix; ``"official"``: the public code's behaviour (module docstring),
    the same score per batch of `MANO_OFFICIAL_BATCH` rows, averaged over batches, with the
    criterion `criterion` (the code's: Phi of the family's first test set) or, without it,
    `mano_official_criterion` of these logits."""
    if not p > 1:
        raise OracleError(f"mano: p={p!r}; expected p > 1")
    if _variant(variant) == "paper":
        s = mano_normalize(logits, eta, criterion=criterion)
        return float(np.mean(np.abs(s) ** p) ** (1.0 / p))
    q = _matrix(logits, "logits")
    phi = mano_official_criterion(q) if criterion is None else float(criterion)
    b = MANO_OFFICIAL_BATCH
    scores = [np.mean(np.abs(mano_normalize(q[i:i + b], eta, "official", phi)) ** p) ** (1.0 / p)
              for i in range(0, q.shape[0], b)]
    return float(np.mean(scores))


def confscore(log_q) -> float:
    """Mean of max_k q_k (an accuracy estimate)."""
    return float(_probs(log_q).max(axis=1).mean())


def negative_entropy(log_q) -> np.ndarray:
    """``sum_k q_k log q_k`` per row [N] (nats, <= 0; 0 log 0 = 0)."""
    p = _probs(log_q)
    lq = np.asarray(log_q, dtype=np.float64)
    return np.where(p > 0, p * lq, 0.0).sum(axis=1)


def entropy_score(log_q) -> float:
    """``1 - mean_i H(q_i) / log K`` in [0, 1]: the entropy baseline as a score that grows with
    confidence."""
    k = np.asarray(log_q).shape[1]
    return float(1.0 + negative_entropy(log_q).mean() / math.log(k))


def nuclear(log_q) -> float:
    """``||Q||_* / sqrt(N min(N, K))`` of the softmax matrix Q [N, K] (its upper bound: every
    row has Euclidean norm <= 1)."""
    q = _probs(log_q)
    n, k = q.shape
    return float(np.linalg.svd(q, compute_uv=False).sum() / math.sqrt(n * min(n, k)))


def atc_threshold(scores, correct) -> float:
    """ATC's threshold on labelled in-distribution rows: the t that makes the fraction of rows
    with score > t closest to their accuracy (ties: the lowest such t).

    scores: [n] confidence scores; correct: [n] bool, prediction == label. Candidates are -inf
    and every score, so with distinct scores and c correct rows the answer is the (n - c)-th
    smallest score (-inf when every row is correct).
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    c = np.asarray(correct, dtype=bool).ravel()
    if s.shape != c.shape or s.size < 1 or not np.isfinite(s).all():
        raise OracleError(f"atc_threshold: expected finite scores and correctness flags of equal length, "
                          f"got {s.shape} and {c.shape}")
    candidates = np.concatenate([[-np.inf], np.unique(s)])
    above = s.size - np.searchsorted(np.sort(s), candidates, side="right")
    return float(candidates[int(np.argmin(np.abs(above - int(c.sum()))))])


def atc_estimate(scores, threshold: float) -> float:
    """ATC's accuracy estimate: the fraction of rows with score > threshold."""
    return float(np.mean(np.asarray(scores, dtype=np.float64) > threshold))


def atc_scores(log_q, score: str) -> np.ndarray:
    """The per-row confidence of ATC: ``"mc"`` max probability, ``"ne"`` negative entropy."""
    if score == "mc":
        return _probs(log_q).max(axis=1)
    if score == "ne":
        return negative_entropy(log_q)
    raise OracleError(f"ATC score {score!r}: expected mc or ne")


def fit_atc(log_q_val, labels_val) -> dict[str, float]:
    """ATC thresholds {"mc", "ne"} on labelled in-distribution predictions."""
    lq = np.asarray(log_q_val, dtype=np.float64)
    correct = lq.argmax(axis=1) == np.asarray(labels_val)
    return {s: atc_threshold(atc_scores(lq, s), correct) for s in ("mc", "ne")}


def estimate_all(logits, log_q, thresholds: Mapping[str, float], p: float = MANO_P,
                 eta: float = MANO_ETA, official_criterion: float | None = None) -> dict[str, float]:
    """Every method of `METHODS` on one test set (thresholds from `fit_atc`;
    ``official_criterion``: the official MaNo's Phi, taken from the family's first set)."""
    return {
        "mano": mano(logits, p, eta),
        "mano_official": mano(logits, p, eta, variant="official", criterion=official_criterion),
        "atc_mc": atc_estimate(atc_scores(log_q, "mc"), thresholds["mc"]),
        "atc_ne": atc_estimate(atc_scores(log_q, "ne"), thresholds["ne"]),
        "confscore": confscore(log_q),
        "entropy": entropy_score(log_q),
        "nuclear": nuclear(log_q),
    }


# --------------------------------------------------------------------------- scoring
def _pair(estimate: Sequence[float], target: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    e = np.asarray(estimate, dtype=np.float64).ravel()
    t = np.asarray(target, dtype=np.float64).ravel()
    if e.shape != t.shape:
        raise OracleError(f"scoring: {e.size} estimates but {t.size} targets")
    return e, t


def r2(estimate: Sequence[float], target: Sequence[float]) -> float:
    """R^2 of the least-squares line target ~ a + b * estimate (NaN for fewer than 3 points or
    a constant input)."""
    e, t = _pair(estimate, target)
    if e.size < 3 or np.ptp(e) == 0 or np.ptp(t) == 0:
        return math.nan
    b, a = np.polyfit(e, t, 1)
    resid = t - (a + b * e)
    return float(1.0 - resid @ resid / ((t - t.mean()) @ (t - t.mean())))


def _ranks(a: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    order = np.argsort(a, kind="stable")
    ranks = np.empty(a.size)
    ranks[order] = np.arange(1, a.size + 1)
    for v in np.unique(a):
        tie = a == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(estimate: Sequence[float], target: Sequence[float]) -> float:
    """Spearman's rho: Pearson correlation of the (tie-averaged) ranks (NaN below 3 points or
    for a constant input)."""
    e, t = _pair(estimate, target)
    if e.size < 3 or np.ptp(e) == 0 or np.ptp(t) == 0:
        return math.nan
    return float(np.corrcoef(_ranks(e), _ranks(t))[0, 1])


def mae(estimate: Sequence[float], target: Sequence[float]) -> float:
    """Mean absolute error |estimate - target|."""
    e, t = _pair(estimate, target)
    return float(np.mean(np.abs(e - t))) if e.size else math.nan


def score(method: str, estimate: Sequence[float], target: Sequence[float]) -> dict[str, float]:
    """{"r2", "spearman", "mae", "n"} of one method over a family of test sets; mae is NaN for
    a method that gives a score rather than an accuracy."""
    if method not in METHODS:
        raise OracleError(f"estimator {method!r}: expected one of {', '.join(METHODS)}")
    e, t = _pair(estimate, target)
    return {"r2": r2(e, t), "spearman": spearman(e, t), "mae": mae(e, t) if METHODS[method][1] else math.nan,
            "n": int(e.size)}
