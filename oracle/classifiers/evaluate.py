"""Every per-classifier number of the paper, from model and oracle log-probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from oracle.decomposition import accuracy, bayes_accuracy, decompose, mean_se
from oracle.errors import DataError
from oracle.measures import calibration as cal


def evaluate_predictions(log_q, log_p, source_class, n_bins: int = 10) -> dict[str, Any]:
    """Every per-classifier number of the paper, from model and oracle log-probabilities.

    Args:
        log_q: model log-probabilities [n, K] (``predict_log_probs``).
        log_p: oracle log-posteriors [n, K] at the same x (``oracle.posterior.log_posterior``).
        source_class: int [n], the class each x was drawn from.
        n_bins: equal-width confidence bins of the ECEs.
    Returns:
        A JSON-serializable dict; ``{"mean", "se"}`` entries are Monte Carlo means over the n
        test samples with their standard errors:

        * ``acc_source``, ``acc_posterior``: top-1 accuracy against the source class and
          against ``argmax p(y|x)``; ``bayes_accuracy``: ``E[max_y p(y|x)]``.
        * ``total``, ``aleatoric``, ``epistemic``: ``E[-sum p log q]``, ``E[H(p)]``,
          ``E[KL(p||q)]`` in nats (``oracle.decomposition.decompose``).
        * ``nll_source``: ``E[-log q(source|x)]`` in nats.
        * ``brier_source``: multi-class Brier against the source class; ``brier_expected``: its
          expectation over ``y ~ p(y|x)``.
        * ``ece_source`` (float): top-label ECE against the source class;
          ``ece_posterior`` (float): the same bins with correctness replaced by
          ``p(argmax q|x)``, an oracle-only exact calibration error;
          ``calibration_pointwise``: ``E|max q - p(argmax q|x)|``.
        * ``n``, ``num_classes``, ``n_bins``.
    """
    lq = torch.as_tensor(np.asarray(log_q)) if not isinstance(log_q, Tensor) else log_q.detach()
    lp = torch.as_tensor(np.asarray(log_p)) if not isinstance(log_p, Tensor) else log_p.detach()
    lq, lp = lq.to("cpu", torch.float64), lp.to("cpu", torch.float64)
    parts = decompose(lp, lq)  # validates shapes and normalization of both
    n, k = lq.shape
    y = source_class.detach().cpu() if isinstance(source_class, Tensor) else torch.as_tensor(np.asarray(source_class))
    if y.shape != (n,) or y.is_floating_point() or (n and (int(y.min()) < 0 or int(y.max()) >= k)):
        raise DataError(f"source_class: expected integer classes in [0, {k}) of shape ({n},), got {y.dtype} {tuple(y.shape)}")
    y = y.to(torch.int64)
    q, p = lq.exp().numpy(), lp.exp().numpy()
    yn = y.numpy()
    return {
        "n": int(n),
        "num_classes": int(k),
        "n_bins": int(n_bins),
        "acc_source": accuracy(lq, y),
        "acc_posterior": accuracy(lq, lp.argmax(dim=1)),
        "bayes_accuracy": bayes_accuracy(lp),
        "total": parts["total"],
        "aleatoric": parts["aleatoric"],
        "epistemic": parts["epistemic"],
        "nll_source": mean_se(-lq[torch.arange(n), y]),
        "brier_source": mean_se(cal.brier_per_sample(q, yn)),
        "brier_expected": mean_se(cal.expected_brier_score(q, p)),
        "ece_source": cal.expected_calibration_error(q, yn, n_bins),
        "ece_posterior": cal.true_calibration_error(q, p, n_bins),
        "calibration_pointwise": mean_se(cal.pointwise_calibration_errors(q, p)),
    }


def metrics_row(metrics: dict[str, Any]) -> dict[str, float]:
    """Flatten ``evaluate_predictions`` output to the columns of the analysis data frame.

    ``{"mean", "se"}`` entries become ``name`` and ``name_se``; the short names the report
    uses are added: ``nll`` (= nll_source), ``ece`` (= ece_source), ``brier`` (= brier_source).
    The caller adds ``arch``, ``N``, ``seed``, ``label_mode``.
    """
    row: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            row[key] = float(value["mean"])
            row[f"{key}_se"] = float(value["se"])
        else:
            row[key] = value
    row["nll"], row["nll_se"] = row["nll_source"], row["nll_source_se"]
    row["ece"] = row["ece_source"]
    row["brier"], row["brier_se"] = row["brier_source"], row["brier_source_se"]
    return row
