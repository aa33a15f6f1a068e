"""Predictions of a classifier on an evaluation set: ``log q(y|x)`` per row, as HDF5."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from oracle.errors import DataError


def write_predictions(path: str | os.PathLike, log_q: np.ndarray, index: np.ndarray,
                      label: np.ndarray, attrs: Mapping | None = None, logits: np.ndarray | None = None) -> None:
    """``predictions/<evalset>.h5``: ``log_q`` float64 [n, K] (natural log), ``index`` int64 [n]
    (rows of the evaluation set's samples/<world>/all.h5), ``label`` int64 [n] (the world's
    labels of those rows), optionally ``logits`` float64 [n, K] (the raw model outputs, which
    logit-based accuracy estimators read); attributes as JSON text."""
    import h5py

    from oracle.io.atomic import atomic_output

    log_q = np.asarray(log_q, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64)
    if log_q.ndim != 2 or log_q.shape[0] != index.shape[0]:
        raise DataError(f"{path}: log_q {log_q.shape} and index {index.shape} disagree")
    with atomic_output(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("log_q", data=log_q)
            f.create_dataset("index", data=index)
            f.create_dataset("label", data=np.asarray(label, dtype=np.int64))
            if logits is not None:
                logits = np.asarray(logits, dtype=np.float64)
                if logits.shape != log_q.shape:
                    raise DataError(f"{path}: logits {logits.shape} and log_q {log_q.shape} disagree")
                f.create_dataset("logits", data=logits)
            for key, value in (attrs or {}).items():
                f.attrs[key] = json.dumps(value, sort_keys=True, default=str)
            f.attrs["complete"] = True


def read_predictions(path: str | os.PathLike) -> dict[str, Any]:
    """Inverse of :func:`write_predictions` (``logits`` only when the file has them)."""
    from oracle.io.h5_files import reading

    with reading(path, "predictions", "rerun its predict_classifier job") as f:
        out = {name: f[name][()] for name in ("log_q", "index", "label", "logits") if name in f}
        out["attrs"] = {k: json.loads(v) for k, v in f.attrs.items() if k != "complete"}
    return out
