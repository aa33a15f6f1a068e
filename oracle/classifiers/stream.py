"""Classifier inputs streamed from a sample file, so a training job's memory does not grow with N.

:class:`SampleRows` is a map-style torch Dataset over chosen rows of a sample file (a shard or
the merged all.h5). It is indexed by a whole batch of positions at once (one HDF5 read per
batch, rows read in file order and put back in batch order), so `train_classifier` gets
exactly the float32 values the in-memory path would take from ``x[batch]``: same batches,
same order, same bytes, hence bit-identical training for the same seed.

The HDF5 file is opened lazily by the process that first reads from it and reopened by any
other process (a forked DataLoader worker checks the pid), because an h5py handle must not be
used across a fork; the handle is also dropped when the dataset is pickled (spawned workers).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

import numpy as np
import torch
from torch import Tensor

from oracle.errors import DataError

# HDF5's chunk cache would read each ~1 MiB chunk in full to return one row of a random batch;
# without it, HDF5 reads just the selected rows of an uncompressed chunk.
_CHUNK_CACHE_BYTES = 0


class SampleRows(torch.utils.data.Dataset):
    """Images ``x`` of the rows ``rows`` of a sample file, read on demand.

    Args:
        path: the sample file (`oracle.io.shards` format).
        rows: int64 [n], file rows in training-set order (repeats allowed: a with-replacement
            draw of `oracle.classifiers.shifted`).
    Attributes:
        shape: ``(n, *event_shape)``, like the in-memory array it stands for; dtype float32.
    Indexing with an int returns one image float32 [*event]; with an int64 tensor or array of
    positions [b] (positions into `rows`, not file rows) a batch float32 [b, *event].
    """

    dtype = torch.float32

    def __init__(self, path: str | os.PathLike, rows: np.ndarray):
        from oracle.io.atomic import to_jsonable
        from oracle.io.h5_attrs import file_attrs
        from oracle.io.shards import open_samples

        self.path = str(path)
        self.rows = np.ascontiguousarray(rows, dtype=np.int64)
        with open_samples(self.path) as f:
            n_file, event = f["x"].shape[0], tuple(int(s) for s in f["x"].shape[1:])
            attrs = file_attrs(f)
        if self.rows.ndim != 1 or (self.rows.size and (self.rows.min() < 0 or self.rows.max() >= n_file)):
            raise DataError(f"{self.path}: row indices outside [0, {n_file})")
        self.shape = (int(self.rows.size), *event)
        self._attrs_sha256 = hashlib.sha256(json.dumps(to_jsonable(attrs), sort_keys=True).encode()).hexdigest()
        self._file: Any = None
        self._pid: int | None = None

    def __len__(self) -> int:
        return self.shape[0]

    def _x(self):
        if self._file is None or self._pid != os.getpid():
            import h5py

            from oracle.io.shards import open_samples

            # open_samples checks the file (complete, every virtual source present) once; the
            # handle kept for reading has the chunk cache off (see _CHUNK_CACHE_BYTES)
            open_samples(self.path).close()
            self._file = h5py.File(self.path, "r", rdcc_nbytes=_CHUNK_CACHE_BYTES)
            self._pid = os.getpid()
        return self._file["x"]

    def __getitem__(self, positions) -> Tensor:
        if isinstance(positions, (int, np.integer)):
            return self[np.array([positions])][0]
        pos = positions.numpy() if isinstance(positions, Tensor) else np.asarray(positions)
        return torch.from_numpy(read_runs(self._x(), self.rows[pos.astype(np.int64)]))

    def fingerprint(self) -> str:
        """sha256 of what the rows hold: the file's attributes (world, seed, shards) and the
        row indices; a training checkpoint resumes only on the same fingerprint."""
        h = hashlib.sha256(self._attrs_sha256.encode())
        h.update(self.rows.tobytes())
        return h.hexdigest()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_file": None, "_pid": None}

    def close(self) -> None:
        """Close this process's handle (reads reopen it)."""
        if self._file is not None and self._pid == os.getpid():
            self._file.close()
        self._file, self._pid = None, None


def read_runs(dataset, idx: np.ndarray) -> np.ndarray:
    """Rows `idx` (int64 [b], in range, any order, repeats allowed) of an h5py dataset, in the
    order given, read as one slice per run of consecutive rows: h5py's fancy indexing costs
    ~1 ms per row of a sparse selection, a plain slice ~50 us (3x64x64 rows, file in the page
    cache), and a random batch is mostly runs of one."""
    uniq, inverse = np.unique(idx, return_inverse=True)
    out = np.empty((uniq.size, *dataset.shape[1:]), dtype=dataset.dtype)
    starts = np.flatnonzero(np.diff(uniq, prepend=-2) != 1)
    for a, b in zip(starts, [*starts[1:], uniq.size]):
        out[a:b] = dataset[uniq[a]:uniq[a] + (b - a)]
    return out[inverse.reshape(-1)]


class EpochBatches(torch.utils.data.Sampler):
    """The batches of the current epoch (a list of int64 position tensors), set before each
    pass over a DataLoader so that one loader, and its workers, serve every epoch."""

    def __init__(self) -> None:
        self.batches: list[Tensor] = []

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def batch_loader(rows: SampleRows, workers: int = 0) -> tuple[torch.utils.data.DataLoader, EpochBatches]:
    """A DataLoader yielding ``rows[batch]`` for each batch of an :class:`EpochBatches`, with
    `workers` reader processes (0: read in this process). It draws nothing from torch's global
    random state (its own generator seeds the workers), so the training's random draws are the
    same with or without it."""
    sampler = EpochBatches()
    loader = torch.utils.data.DataLoader(
        rows, sampler=sampler, batch_size=None, num_workers=int(workers),
        persistent_workers=workers > 0, generator=torch.Generator().manual_seed(0))
    return loader, sampler
