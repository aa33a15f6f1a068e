"""What a training prior alone costs, and a learner's prediction with the prior taken back out.

A training set drawn with class prior ``pi_train`` from a world whose prior is ``pi_world``
keeps the world's p(x|y) (and label temperature): its posterior is the world's reweighted,
``p_train(y|x) ∝ p(y|x) pi_train(y) / pi_world(y)``. Two consequences on the world's test rows:

* the Bayes rule of the training distribution, ``argmax_y p_train(y|x)``, is the best any
  learner of that training set can do on average; scored on the world's rows, it loses
  ``E_x[max_y p(y|x) - p(yhat_train(x)|x)]`` against the world's own Bayes rule: the
  *Bayes cost* of the prior (`bayes_prior_cost`), exact for the rows, in expectation over their
  labels (no label noise);
* a learner whose log-probabilities approximate ``log p_train(y|x)`` predicts the world's Bayes
  rule again after ``log q(y|x) - log pi_train(y) + log pi_world(y)`` (logit adjustment,
  `prior_adjusted_classes`).

Argmax ties go to the lowest class, as `oracle.decomposition.accuracy`.
"""

from __future__ import annotations

import numpy as np

from oracle.errors import DataError


def _log_prior(prior, k: int, name: str) -> np.ndarray:
    """log of a prior [K] (float64; log 0 = -inf); DataError naming `name` when it is not K
    non-negative numbers summing to 1 (1e-6)."""
    p = np.asarray(prior, dtype=np.float64)
    if p.shape != (k,) or not np.isfinite(p).all() or (p < 0).any() or abs(p.sum() - 1.0) > 1e-6:
        raise DataError(f"{name}={np.asarray(prior).tolist()}: expected {k} non-negative numbers summing to 1")
    with np.errstate(divide="ignore"):
        return np.log(p / p.sum())


def _log_probs(log_p, name: str) -> np.ndarray:
    lp = np.asarray(log_p, dtype=np.float64)
    if lp.ndim != 2 or lp.shape[1] < 1:
        raise DataError(f"{name}: expected log-probabilities of shape [n, K], got {lp.shape}")
    return lp


def prior_adjusted_classes(log_q, prior_from, prior_to) -> np.ndarray:
    """``argmax_y [log q(y|x) - log prior_from(y) + log prior_to(y)]`` per row: int64 [n].

    Args:
        log_q: log-probabilities (or logits: the argmax is the same) float [n, K], nats.
        prior_from: the prior the probabilities carry [K] (a learner's training prior); > 0
            wherever `prior_to` is (a class never seen cannot be adjusted back).
        prior_to: the prior to predict under [K] (the test world's); a class it gives 0 is
            never predicted (a world of fewer classes than the learner's outputs).
    """
    lq = _log_probs(log_q, "log_q")
    k = lq.shape[1]
    lf, lt = _log_prior(prior_from, k, "prior_from"), _log_prior(prior_to, k, "prior_to")
    present = np.isfinite(lt)
    if not np.isfinite(lf[present]).all():
        raise DataError(f"prior_from={np.asarray(prior_from).tolist()}: a zero entry where prior_to="
                        f"{np.asarray(prior_to).tolist()} is positive cannot be adjusted out")
    shift = np.where(present, lt - np.where(present, lf, 0.0), -np.inf)
    return (lq + shift[None, :]).argmax(axis=1)


def bayes_prior_cost(log_p, prior_world, prior_train) -> dict[str, np.ndarray]:
    """Per-row expected accuracies of the world's Bayes rule and of the Bayes rule under the
    training prior, on the world's rows.

    Args:
        log_p: the world's log-posteriors log p(y|x) float [n, K] (its own prior and label
            temperature), nats.
        prior_world: the world's class prior [K] (the one `log_p` carries).
        prior_train: the training prior [K].
    Returns:
        float64 [n] arrays, each a probability of a correct prediction on the row (fractions):
        ``"bayes"`` max_y p(y|x); ``"train_rule"`` p(yhat|x) with yhat = argmax_y
        [log p(y|x) + log pi_train(y) - log pi_world(y)]; ``"cost"`` their difference (>= 0).
        Their means are the Bayes accuracy, the training rule's accuracy and the Bayes cost in
        expectation over the rows' labels.
    """
    lp = _log_probs(log_p, "log_p")
    k = lp.shape[1]
    lw, lt = _log_prior(prior_world, k, "prior_world"), _log_prior(prior_train, k, "prior_train")
    # a class the world never draws has p(y|x) = 0 whatever the training prior: never predicted
    score = np.where(np.isfinite(lw)[None, :], lp - np.where(np.isfinite(lw), lw, 0.0)[None, :], -np.inf)
    yhat = (score + lt[None, :]).argmax(axis=1)
    p = np.exp(lp)
    bayes = p.max(axis=1)
    train_rule = p[np.arange(lp.shape[0]), yhat]
    return {"bayes": bayes, "train_rule": train_rule, "cost": bayes - train_rule}
