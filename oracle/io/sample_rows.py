"""Reading oracle samples: rows of a sample file (a shard or the merged all.h5), in the order
asked for. Their exact posteriors are `oracle.posterior.posterior_rows`; the world the file was
drawn from is `oracle.worlds.sample_world`."""

from __future__ import annotations

import os
from collections.abc import Sequence
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
