"""Reading oracle samples: rows of a sample file (a shard or the merged all.h5) and the exact
posteriors of those rows under the world the file was drawn from."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oracle.errors import DataError


def read_rows(samples_path: str | os.PathLike, indices: np.ndarray | None,
              fields: Sequence[str] = ("x", "source_class", "label", "loglik")) -> dict[str, Any]:
    """Rows ``indices`` (in the given order) of a sample file (a shard or the merged all.h5).

    Returns ``{field: array}`` for each of ``fields`` plus ``"attrs"`` (prior, label_temperature,
    base_temperature, num_classes, event_shape, ...). ``indices=None`` reads every row.
    Reads in sorted order (HDF5 fancy indexing needs it) and restores the requested order.
    """
    from oracle.io.h5_attrs import file_attrs
    from oracle.io.shards import open_samples

    with open_samples(samples_path) as f:
        attrs = file_attrs(f)
        n = f["index"].shape[0]
        out: dict[str, Any] = {"attrs": attrs}
        if indices is None:
            for name in fields:
                out[name] = f[name][()]
            return out
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= n)):
            raise DataError(f"{samples_path}: row indices outside [0, {n})")
        for name in fields:
            out[name] = take_rows(f[name], idx)
    return out


def take_rows(dataset, idx: np.ndarray) -> np.ndarray:
    """Rows `idx` (int64 [m], in range, any order, repeats allowed) of an h5py dataset, in the
    order given: HDF5 fancy indexing needs increasing unique indices, so the rows are read
    sorted and once each, then put back in the requested order."""
    uniq, inverse = np.unique(idx, return_inverse=True)
    block = dataset[uniq] if uniq.size else dataset[:0]
    return block[inverse.reshape(-1)]


def posterior_rows(loglik: np.ndarray, attrs: Mapping) -> np.ndarray:
    """``log p(y|x)`` [n, K] float64 from stored ``log p(x|k)`` and the file's prior and label
    temperature (DESIGN rule 1: the world the samples were drawn from)."""
    from oracle.posterior import log_posterior

    prior = np.asarray(attrs["prior"], dtype=np.float64)
    return log_posterior(loglik, prior=prior, temperature=float(attrs["label_temperature"])).numpy()


def sample_world(world_path: str | os.PathLike, samples_path: str | os.PathLike, map_location: str = "cpu"):
    """The world a sample file was drawn from: the model file `world_path` (refused unless its
    sha256 is the file's ``oracle_sha256``) with the file's prior and temperatures."""
    from oracle.io.hashing import file_sha256
    from oracle.worlds import world_from_checkpoint

    attrs = read_rows(samples_path, np.arange(0), fields=())["attrs"]
    if file_sha256(world_path) != attrs.get("oracle_sha256"):
        raise DataError(f"{world_path} is not the model {samples_path} was drawn from (its sha256 differs from "
                        "the samples' oracle_sha256); rerun the samples stage")
    return world_from_checkpoint(world_path, prior=attrs["prior"], label_temperature=float(attrs["label_temperature"]),
                                 base_temperature=float(attrs["base_temperature"]), map_location=map_location)
