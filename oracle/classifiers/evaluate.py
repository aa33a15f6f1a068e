"""Every per-classifier number of the paper, from model and oracle log-probabilities."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from oracle.decomposition import accuracy, bayes_accuracy, decompose, mean_se
from oracle.classifiers.identity import RUN_KEYS, run_identities
from oracle.errors import DataError
from oracle.measures import calibration as cal


def evaluate_predictions(log_q, log_p, labels, n_bins: int = 10) -> dict[str, Any]:
    """Every per-classifier number of the paper, from model and oracle log-probabilities.

    Args:
        log_q: model log-probabilities [n, K] (``predict_log_probs``).
        log_p: the world's log-posteriors log p_T(y|x) [n, K] at the same x
            (``oracle.posterior.log_posterior`` with the world's prior and T).
        labels: int [n], the world's labels y ~ p_T(y|x) (DESIGN rule 8; the source class
            when T = 1).
        n_bins: equal-width confidence bins of the ECEs.
    Returns:
        A JSON-serializable dict; ``{"mean", "se"}`` entries are Monte Carlo means over the n
        samples with their standard errors:

        * ``acc``: top-1 accuracy against the labels; ``acc_posterior``: against
          ``argmax p(y|x)``; ``bayes_accuracy``: ``E[max_y p(y|x)]``, which bounds ``acc`` in
          expectation because the labels are drawn from p.
        * ``total``, ``aleatoric``, ``epistemic``: ``E[-sum p log q]``, ``E[H(p)]``,
          ``E[KL(p||q)]`` in nats (``oracle.decomposition.decompose``).
        * ``nll``: ``E[-log q(y|x)]`` at the labels, in nats (an unbiased estimate of ``total``).
        * ``oracle_nll``: ``E[-log p(y|x)]`` at the labels (the Bayes classifier's test
          cross-entropy); ``oracle_nll_minus_floor``: per row ``-log p(y|x) - H(p(.|x))``, mean 0
          when the labels are drawn from p (a check of the world's labels, nats);
          ``nll_regret``: per row ``log p(y|x) - log q(y|x)``, an unbiased estimate of
          ``epistemic`` >= 0 when the labels are drawn from p (no classifier beats the floor).
          The SE of these two is the labels' own, given the test inputs and y ~ p(y|x):
          ``sqrt(sum_i Var_{y~p(.|x_i)}[f_i(y)]) / n``, computed exactly from p. A sample SE would
          not do: at a Bayes error of 0.1% the few rows whose label is not the likely class
          carry the mean, and 1,000 rows hold about one of them, so the sample spread of the rows
          is mostly the spread of the rows without one.
        * ``bayes_gap``: per row ``max_y p(y|x) - [argmax q = y]``, the Bayes accuracy minus the
          accuracy with the SE of their paired difference over the rows (fraction).
        * ``brier``: multi-class Brier against the labels; ``brier_expected``: its expectation
          over ``y ~ p(y|x)``.
        * ``ece`` (float): top-label ECE against the labels; ``ece_posterior`` (float): the same
          bins with correctness replaced by ``p(argmax q|x)``, an oracle-only exact
          calibration error; ``calibration_pointwise``: ``E|max q - p(argmax q|x)|`` (the true
          calibration error without bins).
        * ``overconfidence``: mean confidence minus accuracy on the labels;
          ``overconfidence_truth``: mean confidence minus mean ``p(argmax q|x)``.
        * ``reliability``: per-bin count, mean confidence, accuracy and mean true probability
          (`oracle.measures.calibration.reliability_bins`), for reliability diagrams.
        * ``n``, ``num_classes``, ``n_bins``.
    """
    lq = torch.as_tensor(np.asarray(log_q)) if not isinstance(log_q, Tensor) else log_q.detach()
    lp = torch.as_tensor(np.asarray(log_p)) if not isinstance(log_p, Tensor) else log_p.detach()
    lq, lp = lq.to("cpu", torch.float64), lp.to("cpu", torch.float64)
    parts = decompose(lp, lq)  # validates shapes and normalization of both
    n, k = lq.shape
    y = labels.detach().cpu() if isinstance(labels, Tensor) else torch.as_tensor(np.asarray(labels))
    if y.shape != (n,) or y.is_floating_point() or (n and (int(y.min()) < 0 or int(y.max()) >= k)):
        raise DataError(f"labels: expected integer classes in [0, {k}) of shape ({n},), got {y.dtype} {tuple(y.shape)}")
    y = y.to(torch.int64)
    q, p = lq.exp().numpy(), lp.exp().numpy()
    yn = y.numpy()
    rows = torch.arange(n)
    finite_lp = torch.where(lp > -math.inf, lp, torch.zeros_like(lp))  # p log p -> 0 where p = 0
    entropy = -(lp.exp() * finite_lp).sum(dim=1)
    correct = (lq.argmax(dim=1) == y).to(torch.float64)
    return {
        "n": int(n),
        "num_classes": int(k),
        "n_bins": int(n_bins),
        "acc": accuracy(lq, y),
        "acc_posterior": accuracy(lq, lp.argmax(dim=1)),
        "bayes_accuracy": bayes_accuracy(lp),
        "total": parts["total"],
        "aleatoric": parts["aleatoric"],
        "epistemic": parts["epistemic"],
        "nll": mean_se(-lq[rows, y]),
        "oracle_nll": mean_se(-lp[rows, y]),
        "oracle_nll_minus_floor": _mean_given_x(-lp[rows, y] - entropy, lp, -finite_lp),
        "nll_regret": _mean_given_x(lp[rows, y] - lq[rows, y], lp, finite_lp - lq),
        "bayes_gap": mean_se(lp.max(dim=1).values.exp() - correct),
        "brier": mean_se(cal.brier_per_sample(q, yn)),
        "brier_expected": mean_se(cal.expected_brier_score(q, p)),
        "ece": cal.expected_calibration_error(q, yn, n_bins),
        "ece_posterior": cal.true_calibration_error(q, p, n_bins),
        "calibration_pointwise": mean_se(cal.pointwise_calibration_errors(q, p)),
        "overconfidence": cal.overconfidence(q, labels=yn),
        "overconfidence_truth": cal.overconfidence(q, probs_p=p),
        "reliability": _json_bins(cal.reliability_bins(q, yn, n_bins, probs_p=p)),
    }


def _mean_given_x(values: Tensor, log_p: Tensor, f: Tensor) -> dict[str, float]:
    """``{"mean", "se"}`` of per-row ``values`` = f_i(y_i), the SE over the labels alone: y_i ~
    p(.|x_i) given the rows, ``sqrt(sum_i Var_i) / n`` with ``Var_i = sum_k p_ik f_ik^2 - (sum_k
    p_ik f_ik)^2`` (f: [n, K], f_i(k) for every class; see `evaluate_predictions`)."""
    p = log_p.exp()
    first = (p * f).sum(dim=1)
    var = ((p * f * f).sum(dim=1) - first * first).clamp_min(0.0)
    n = values.numel()
    return {"mean": float(values.mean()), "se": float(var.sum().sqrt()) / n}


def _json_bins(bins: Mapping[str, np.ndarray]) -> dict[str, list]:
    """Reliability bins as JSON lists (None for the means of empty bins; edges left out)."""
    return {k: [None if isinstance(v, float) and np.isnan(v) else v for v in np.asarray(a).tolist()]
            for k, a in bins.items() if k not in ("lower", "upper")}


def metrics_row(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Flatten ``evaluate_predictions`` output to data-frame columns: ``{"mean", "se"}`` entries
    become ``name`` and ``name_se``, numbers stay; per-bin data (``reliability``) is left out
    (`read_reliability_frame` reads it)."""
    row: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping) and "mean" in value:
            row[key] = float(value["mean"])
            row[f"{key}_se"] = float(value["se"])
        elif not isinstance(value, (Mapping, list)):
            row[key] = value
    return row


#: The identity of one evaluation of one classifier (a row of `read_metrics_frame`).
ID_COLUMNS = (*RUN_KEYS, "evalset", "N", "labels", "hard_label")


def _read_classifier_json(path: str | os.PathLike, keys: Iterable[str], what: str, job: str) -> dict:
    """A classifier's JSON output (metrics or history) with `keys` present; DataError naming
    the file and the job to rerun otherwise."""
    try:
        blob = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read classifier {what} {path}: {exc}") from None
    missing = [k for k in keys if k not in blob]
    if missing:
        raise DataError(f"{path}: lacks key(s) {missing}; rerun its {job} job")
    return blob


#: What a classifier's training says of its convergence (`oracle.classifiers.stopping.convergence`),
#: as columns of every runs table: converged (bool: stopped by the rule and annealed), stopped_by
#: ("patience" or "budget"), annealed and kept_lr (the learning rate at the kept weights as a
#: fraction of the peak), the optimizer steps run and those of the weights kept, the epoch kept,
#: and the monitored loss's relative change over the rule's last evaluations.
CONVERGENCE_COLUMNS = ("converged", "stopped_by", "annealed", "kept_lr", "steps", "kept_steps", "kept_epoch",
                       "loss_change")


_FILE_KEYS = ("evalset", "N", "labels", "hard_label")


def read_metrics_frame(paths: Iterable[str | os.PathLike],
                       views: Mapping[str, Sequence[Mapping]] | None = None) -> "pd.DataFrame":  # noqa: F821
    """One row per evaluation file (``classifiers/.../metrics/<evalset>.json``) and run it stands
    for (`run_identities` with `views`): its identity (``ID_COLUMNS``), ``metrics_row`` of its
    metrics, ``epochs`` (the budget), ``train_seconds``, the training's `CONVERGENCE_COLUMNS` and
    its path (``source``), sorted by experiment, arch, N, seed, evalset."""
    import pandas as pd

    rows = []
    for p in paths:
        blob = _read_classifier_json(p, (*_FILE_KEYS, "metrics"), "metrics", "prediction")
        row = {k: blob[k] for k in _FILE_KEYS}
        row.update(metrics_row(blob["metrics"]))
        row["epochs"] = blob.get("epochs")
        row["train_seconds"] = blob.get("train_seconds")
        c = blob.get("convergence") or {}
        row.update({k: c.get(k) for k in CONVERGENCE_COLUMNS})
        row["source"] = Path(p).as_posix()
        rows += [{**run, **row} for run in run_identities(blob, views, p)]
    if not rows:
        raise DataError("read_metrics_frame: no metrics files")
    df = pd.DataFrame(rows)
    return df.sort_values(["experiment", "arch", "N", "seed", "evalset"], kind="stable").reset_index(drop=True)


def read_reliability_frame(paths: Iterable[str | os.PathLike],
                           views: Mapping[str, Sequence[Mapping]] | None = None) -> "pd.DataFrame":  # noqa: F821
    """One row per (evaluation file, run it stands for, confidence bin): the identity
    (``ID_COLUMNS``; `run_identities` with `views`), ``bin`` and the bin's ``count``,
    ``confidence``, ``accuracy`` and ``true_probability`` (NaN when empty), from
    ``metrics.reliability``."""
    import pandas as pd

    rows = []
    for p in paths:
        blob = _read_classifier_json(p, (*_FILE_KEYS, "metrics"), "metrics", "prediction")
        rel = blob["metrics"].get("reliability")
        if rel is None:
            raise DataError(f"{p}: no reliability data; rerun its prediction job")
        for run in run_identities(blob, views, p):
            for b, count in enumerate(rel["count"]):
                rows.append({**run, **{k: blob[k] for k in _FILE_KEYS}, "bin": b, "count": count,
                             **{k: rel[k][b] for k in ("confidence", "accuracy", "true_probability")}})
    return pd.DataFrame(rows)


def read_history_frame(paths: Iterable[str | os.PathLike],
                       views: Mapping[str, Sequence[Mapping]] | None = None) -> "pd.DataFrame":  # noqa: F821
    """One row per (classifier, run it stands for, epoch) from ``history.json`` files: the
    identity (``experiment``, ``arch``, ``cell``, ``seed``: `run_identities` with `views`; ``N``,
    ``labels``, ``hard_label``) and the epoch's record (``epoch``, ``train_loss``, ``lr``,
    ``seconds`` and, with curve_size > 0, ``curve_acc`` and ``curve_epistemic`` in nats)."""
    import pandas as pd

    keys = [k for k in _FILE_KEYS if k != "evalset"]
    rows = []
    for p in paths:
        blob = _read_classifier_json(p, (*keys, "history"), "history", "training")
        rows += [{**run, **{k: blob[k] for k in keys}, **record} for run in run_identities(blob, views, p)
                 for record in blob["history"]]
    if not rows:
        raise DataError("read_history_frame: no history records")
    return pd.DataFrame(rows)
