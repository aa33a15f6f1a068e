"""The rows a classifier trains and is scored on, read from a world's samples and splits.

A training set is the seed's first N rows of the world's training pool
(`oracle.io.splits.training_indices`) with targets from `oracle.classifiers.targets`; an
evaluation set is the world's fixed test set with the world's labels and exact posteriors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from oracle.classifiers.targets import training_targets
from oracle.io.samples import posterior_rows, read_rows
from oracle.io.splits import read_splits_h5, training_indices


@dataclass(frozen=True)
class TrainingSet:
    """x float32 [n, C, H, W]; targets int64 [n] (hard) or float32 [n, K] (soft); rows: indices
    into the sample file; num_classes K; attrs: the sample file's attributes."""

    x: np.ndarray
    targets: np.ndarray
    soft: bool
    rows: np.ndarray
    num_classes: int
    attrs: dict


@dataclass(frozen=True)
class EvaluationSet:
    """The test rows of a world: x float32 [n, ...], labels int64 [n] (y ~ p_T(y|x)),
    log_p float64 [n, K] (log p_T(y|x)), rows: indices into the sample file."""

    x: np.ndarray
    labels: np.ndarray
    log_p: np.ndarray
    rows: np.ndarray


def training_set(samples: str | os.PathLike, splits: str | os.PathLike, spec: Mapping, seed: int) -> TrainingSet:
    """The training set of a training spec (`oracle.experiments._training.training_spec`) and seed."""
    rows = training_indices(read_splits_h5(splits), seed, spec["n"])
    data = read_rows(samples, rows)
    attrs = data["attrs"]
    log_p = posterior_rows(data["loglik"], attrs)
    targets = training_targets(spec["labels"], spec["hard_label"], data["label"], log_p,
                               source_class=data["source_class"], label_temperature=float(attrs["label_temperature"]))
    return TrainingSet(data["x"], targets, spec["labels"] == "soft", rows, int(attrs["num_classes"]), attrs)


def evaluation_set(samples: str | os.PathLike, splits: str | os.PathLike, limit: int | None = None) -> EvaluationSet:
    """The world's test set (its first `limit` rows when given)."""
    rows = read_splits_h5(splits)["test"]
    if limit is not None:
        rows = rows[: int(limit)]
    data = read_rows(samples, rows, fields=("x", "label", "loglik"))
    return EvaluationSet(data["x"], data["label"], posterior_rows(data["loglik"], data["attrs"]), rows)


def curve_monitor(ev: EvaluationSet, device: torch.device, batch_size: int = 256) -> Callable[[torch.nn.Module], dict]:
    """A `train_classifier` monitor: accuracy against the labels and the exact epistemic KL
    E[KL(p || q)] (nats) of the model on `ev`, as ``curve_acc`` and ``curve_epistemic``."""
    from oracle.classifiers.predict import predict_log_probs
    from oracle.decomposition import decompose

    x = torch.from_numpy(ev.x)
    labels = torch.from_numpy(ev.labels)
    log_p = torch.from_numpy(ev.log_p)

    def measure(model: torch.nn.Module) -> dict:
        log_q = predict_log_probs(model, x, batch_size=batch_size, device=device)
        acc = float((log_q.argmax(dim=1) == labels).double().mean())
        return {"curve_acc": acc, "curve_epistemic": float(decompose(log_p, log_q)["epistemic"]["mean"])}

    return measure
