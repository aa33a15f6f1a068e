"""Training targets of a classifier: hard labels or the exact posterior (soft labels)."""

from __future__ import annotations

import numpy as np

from oracle.errors import ConfigError

#: Values of an experiment's ``hard_label``.
HARD_LABELS = ("label", "posterior_argmax", "source")


def training_targets(labels: str, hard_label: str | None, label: np.ndarray, log_p: np.ndarray,
                     source_class: np.ndarray | None = None, label_temperature: float = 1.0) -> np.ndarray:
    """Training targets of a classifier.

    labels="hard": int64 [n]: the world's ``label`` y ~ p_T(y|x) (hard_label="label", DESIGN
    rule 8), ``argmax_k p_T(k|x)`` ("posterior_argmax"), or ``source_class`` ("source"),
    which is refused at label temperature T != 1: the source class is then not a draw from
    the world's posterior, so the Bayes accuracy would not bound the classifier.
    labels="soft": float32 [n, K], the exact posterior exp(log_p) (rows renormalized in
    float64 before rounding).
    """
    if labels == "soft":
        p = np.exp(np.asarray(log_p, dtype=np.float64))
        return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    if labels != "hard":
        raise ConfigError(f"labels={labels!r}; expected hard or soft")
    if hard_label == "label":
        return np.asarray(label, dtype=np.int64)
    if hard_label == "posterior_argmax":
        return np.asarray(log_p, dtype=np.float64).argmax(axis=1).astype(np.int64)
    if hard_label == "source":
        if float(label_temperature) != 1.0:
            raise ConfigError(f"hard_label='source' at label temperature T={label_temperature:g}: the source class "
                              "is not a draw from p_T(y|x); train on the world's label (hard_label: label)")
        if source_class is None:
            raise ConfigError("hard_label='source' needs the samples' source_class")
        return np.asarray(source_class, dtype=np.int64)
    raise ConfigError(f"hard_label={hard_label!r}; expected one of {', '.join(HARD_LABELS)}")
