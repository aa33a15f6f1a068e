"""Sample shards: HDF5 files of samples with their exact log-likelihoods, and their merge.

The format (DESIGN.md, "The sample shard format"), one file per shard:

==============  ====================  =====================================================
dataset         dtype, shape          meaning
==============  ====================  =====================================================
``x``           float32 [n, *event]   the sample, in model input space
``source_class`` int64 [n]            the class the sample was drawn from
``label``       int64 [n]             the world's label y ~ p_T(y|x) (DESIGN rule 8); equals
                                      ``source_class`` when T = 1
``loglik``      float64 [n, K]        ``log p(x | y=k)`` for every class k, at the stored x
``index``       int64 [n]             global sample index, deterministic from (seed, shard)
==============  ====================  =====================================================

``event`` is ``(C, H, W)`` for image worlds and ``(D,)`` for Gaussian worlds. All datasets are
chunked and resizable; :class:`ShardWriter` appends rows as they come, so memory does not grow
with n. File attributes: ``format_version``, ``oracle_sha256``, ``prior``,
``label_temperature``, ``base_temperature``, ``seed``, ``shard``, ``n_shards``,
``code_version``, ``num_classes``, ``event_shape`` (plus any extra attributes of the caller)
and ``complete``, written last.

Crash safety: a writer writes to ``.<name>.partial`` in the same folder and renames it to
``<name>`` only after ``complete`` is set; readers (:func:`open_samples`, :func:`read_shard`)
refuse any file without ``complete``. A writer opened with ``resume=True`` continues a
partial file left by a killed process (same attributes required), from its last committed
row (attribute ``rows_committed``, updated after every flushed write).

The merged ``all.h5`` (`oracle.io.merge.merge_shards`) holds HDF5 *virtual* datasets over the shards
(no copy), with source paths relative to the merged file, so the folder can be moved as a
whole. :func:`open_samples` checks that every source shard exists and is complete, because
HDF5 silently returns fill values for a missing source (the fill values are NaN / -1 so such
rows are recognizable anyway).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import h5py
import numpy as np

from oracle.errors import ShardError
from oracle.io.atomic import to_jsonable
from oracle.io.h5_attrs import file_attrs, from_attr, to_attr
from oracle.io.h5_files import open_complete

__all__ = [
    "FORMAT_VERSION",
    "REQUIRED_ATTRS",
    "ShardWriter",
    "open_samples",
    "read_shard",
    "verify_shard",
    "partial_path",
]

#: 2: the ``label`` dataset (format 1 files lack it and are refused: rerun the samples stage).
FORMAT_VERSION = 2
REQUIRED_ATTRS = (
    "oracle_sha256", "prior", "label_temperature", "base_temperature",
    "seed", "shard", "n_shards", "code_version",
)
DATASETS = ("x", "source_class", "label", "loglik", "index")
DTYPES = {"x": np.float32, "source_class": np.int64, "label": np.int64, "loglik": np.float64, "index": np.int64}
# attributes that define the sample set: shards that disagree on any of these cannot be merged
MERGE_KEYS = (
    "format_version", "oracle_sha256", "prior", "label_temperature", "base_temperature",
    "num_classes", "event_shape", "seed", "n_shards",
)
# attributes that describe one shard or one write, never copied into a merged file
PER_SHARD_ATTRS = ("complete", "rows_committed", "attrs_sha256", "shard", "index_offset",
              "code_version", "merged", "shards", "shard_ids", "code_versions",
              "precision", "precision_max_abs_dlogp", "precision_max_abs_dp", "precision_max_kl")
#: A shard's measured precision bound (oracle.sample_shards.precision_attrs); a merged file keeps
#: the largest over its shards, and the mode if all agree ("mixed" otherwise).
PRECISION_BOUNDS = ("precision_max_abs_dlogp", "precision_max_abs_dp", "precision_max_kl")
FILL = {"x": np.nan, "source_class": -1, "label": -1, "loglik": np.nan, "index": -1}
_CHUNK_BYTES = 1 << 20  # ~1 MiB chunks: cheap random row access by classifier data loaders
_VERIFY_ROWS = 4096


def partial_path(path: str | os.PathLike) -> Path:
    """Where a writer of ``path`` keeps its unfinished file: ``.<name>.partial``, same folder."""
    p = Path(path)
    return p.with_name(f".{p.name}.partial")


# --------------------------------------------------------------------------------------------
# writing


def _as_numpy(a, name: str) -> np.ndarray:
    try:
        import torch

        if isinstance(a, torch.Tensor):
            return a.detach().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    return np.asarray(a)


class ShardWriter:
    """Stream rows into a new shard; the file appears at ``path`` only when complete.

    Args:
        path: the final shard path (``.../shard-0000.h5``).
        num_classes: K, the width of ``loglik``.
        event_shape: shape of one sample, ``(C, H, W)`` or ``(D,)``.
        attrs: file attributes; must contain every key of ``REQUIRED_ATTRS``; extra keys are
            stored too (dicts as JSON). ``format_version``, ``num_classes``, ``event_shape``
            and ``complete`` are set by the writer.
        chunk_rows: the most rows per HDF5 chunk (fewer for large samples: chunks of ``x``
            are kept near 1 MiB).
        resume: continue ``.<name>.partial`` if it exists with identical attributes;
            :attr:`rows` then tells how many rows are already there.

    Use as a context manager. On a clean exit the file is completed and renamed into place;
    on an exception the partial file is removed and the exception propagates::

        with ShardWriter(path, K, (1, 8, 8), attrs) as w:
            w.write(x, source_class, label, loglik, index)
    """

    def __init__(self, path: str | os.PathLike, num_classes: int, event_shape: Iterable[int],
                 attrs: Mapping, chunk_rows: int = 256, resume: bool = False):
        self.path = Path(path)
        self.tmp_path = partial_path(self.path)
        self.num_classes = int(num_classes)
        self.event_shape = tuple(int(s) for s in event_shape)
        if self.num_classes < 1:
            raise ShardError(f"{self.path}: num_classes={num_classes}; expected >= 1")
        if not self.event_shape or min(self.event_shape) < 1:
            raise ShardError(f"{self.path}: event_shape={self.event_shape}; expected positive sizes")
        if int(chunk_rows) < 1:
            raise ShardError(f"{self.path}: chunk_rows={chunk_rows}; expected >= 1")
        self.chunk_rows = int(chunk_rows)
        missing = [k for k in REQUIRED_ATTRS if k not in attrs]
        if missing:
            raise ShardError(f"{self.path}: attrs is missing required key(s) {missing}")
        reserved = [k for k in ("complete", "rows_committed", "attrs_sha256") if k in attrs]
        if reserved:
            raise ShardError(f"{self.path}: attrs may not set {reserved}; the writer sets them")
        prior = np.asarray(to_jsonable(attrs["prior"]), dtype=np.float64)
        if prior.shape != (self.num_classes,):
            raise ShardError(
                f"{self.path}: attrs['prior'] has shape {prior.shape}; expected ({self.num_classes},)")
        self.attrs = {k: to_attr(k, v) for k, v in attrs.items()}
        self.attrs["prior"] = prior
        self.attrs.update(format_version=FORMAT_VERSION, num_classes=self.num_classes,
                          event_shape=np.asarray(self.event_shape, dtype=np.int64))
        self.attrs_sha256 = hashlib.sha256(
            json.dumps(to_jsonable(self.attrs), sort_keys=True).encode()).hexdigest()
        self.resume = bool(resume)
        self.resumed_rows = 0
        self._f: h5py.File | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def __enter__(self) -> "ShardWriter":
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def open(self) -> "ShardWriter":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.resume and self.tmp_path.exists():
            if self._try_reopen():
                return self
            # written for other attributes (world, seed, code, ...) or damaged by a kill mid-flush
            print(f"discarding the partial shard {self.tmp_path}: it was written with other attributes or "
                  "cannot be read; starting over", flush=True)
        if self.tmp_path.exists():
            self.tmp_path.unlink()
        f = h5py.File(self.tmp_path, "w", track_order=True)  # attrs listed in creation order
        row_bytes = int(np.prod(self.event_shape)) * 4
        x_rows = max(1, min(self.chunk_rows, _CHUNK_BYTES // row_bytes))
        f.create_dataset("x", shape=(0, *self.event_shape), maxshape=(None, *self.event_shape),
                         dtype=np.float32, chunks=(x_rows, *self.event_shape))
        for name in ("source_class", "label"):
            f.create_dataset(name, shape=(0,), maxshape=(None,), dtype=np.int64, chunks=(self.chunk_rows,))
        f.create_dataset("loglik", shape=(0, self.num_classes), maxshape=(None, self.num_classes),
                         dtype=np.float64, chunks=(self.chunk_rows, self.num_classes))
        f.create_dataset("index", shape=(0,), maxshape=(None,), dtype=np.int64,
                         chunks=(self.chunk_rows,))
        for k, v in self.attrs.items():
            f.attrs[k] = v
        f.attrs["attrs_sha256"] = self.attrs_sha256
        f.attrs["rows_committed"] = 0
        f.flush()
        self._f = f
        return self

    def _try_reopen(self) -> bool:
        try:
            f = h5py.File(self.tmp_path, "r+")
        except OSError:  # killed mid-flush: the partial file is not readable, start over
            return False
        try:
            ok = (from_attr(f.attrs.get("attrs_sha256")) == self.attrs_sha256
                  and all(name in f for name in DATASETS))
            rows = int(f.attrs.get("rows_committed", 0)) if ok else 0
            ok = ok and all(f[name].shape[0] >= rows for name in DATASETS)
        except Exception:
            ok = False
        if not ok:
            f.close()
            return False
        self._f = f
        self._truncate(rows)
        self.resumed_rows = rows
        return True

    @property
    def rows(self) -> int:
        """Rows written (and committed) so far."""
        if self._f is None:
            return 0
        return int(self._f.attrs["rows_committed"])

    def _last_index(self) -> int:
        return int(self._f["index"][self.rows - 1])

    def written(self, name: str) -> np.ndarray:
        """The committed rows of dataset ``name`` (e.g. ``source_class`` after a resume)."""
        self._require_open()
        if name not in DATASETS:
            raise ShardError(f"{self.path}: no dataset {name!r}; expected one of {DATASETS}")
        return self._f[name][: self.rows]

    def truncate(self, rows: int) -> None:
        """Drop rows beyond ``rows`` (to restart a resumed shard at a batch boundary)."""
        self._require_open()
        if not 0 <= rows <= self.rows:
            raise ShardError(f"{self.path}: cannot truncate to {rows} rows; {self.rows} are written")
        self._truncate(rows)

    def _truncate(self, rows: int) -> None:
        for name in DATASETS:
            self._f[name].resize(rows, axis=0)
        self._f.attrs["rows_committed"] = rows
        self._f.flush()

    def _require_open(self) -> None:
        if self._f is None:
            raise ShardError(f"{self.path}: writer is not open (use it as a context manager)")

    def write(self, x, source_class, label, loglik, index) -> None:
        """Append m rows: x [m, *event_shape] float32, source_class [m], label [m], loglik [m, K],
        index [m].

        ``index`` must increase strictly through the shard (so uniqueness is checked in O(1)
        memory; :func:`merge_shards` checks uniqueness across shards).

        ``x`` must already be float32: the log-likelihoods must have been computed at exactly
        the stored values (DESIGN rule 2), so the writer refuses to round them itself.
        """
        self._require_open()
        x = _as_numpy(x, "x")
        sc = _as_numpy(source_class, "source_class")
        lab = _as_numpy(label, "label")
        ll = _as_numpy(loglik, "loglik")
        idx = _as_numpy(index, "index")
        m = x.shape[0] if x.ndim else -1
        if x.dtype != np.float32:
            raise ShardError(
                f"{self.path}: x has dtype {x.dtype}; expected float32 (round first, then compute loglik on the rounded x)")
        if x.shape[1:] != self.event_shape:
            raise ShardError(f"{self.path}: x has shape {x.shape}; expected [m, {', '.join(map(str, self.event_shape))}]")
        for name, a, shape in (("source_class", sc, (m,)), ("label", lab, (m,)),
                               ("loglik", ll, (m, self.num_classes)), ("index", idx, (m,))):
            if a.shape != shape:
                raise ShardError(f"{self.path}: {name} has shape {a.shape}; expected {shape}")
        if sc.dtype.kind not in "iu" or lab.dtype.kind not in "iu" or idx.dtype.kind not in "iu":
            raise ShardError(f"{self.path}: source_class, label and index must be integer arrays "
                             f"(got {sc.dtype}, {lab.dtype}, {idx.dtype})")
        if ll.dtype != np.float64:
            raise ShardError(f"{self.path}: loglik has dtype {ll.dtype}; expected float64")
        if not np.isfinite(ll).all():
            i, k = np.argwhere(~np.isfinite(ll))[0]
            raise ShardError(f"{self.path}: loglik[{i}, {k}] = {float(ll[i, k])!r} is not finite")
        if not np.isfinite(x).all():
            i = int(np.argwhere(~np.isfinite(x.reshape(m, -1)))[0][0])
            raise ShardError(f"{self.path}: x[{i}] contains a non-finite value")
        for name, a in (("source_class", sc), ("label", lab)):
            if m and (a.min() < 0 or a.max() >= self.num_classes):
                raise ShardError(f"{self.path}: {name} outside [0, {self.num_classes})")
        if m and (np.any(np.diff(idx) <= 0) or (self.rows and idx[0] <= self._last_index())):
            raise ShardError(
                f"{self.path}: index must be strictly increasing within a shard "
                f"(got {idx[:5].tolist()}... after {self._last_index() if self.rows else None})")
        if m == 0:
            return
        start = self.rows
        stop = start + m
        for name in DATASETS:
            self._f[name].resize(stop, axis=0)
        self._f["x"][start:stop] = x
        self._f["source_class"][start:stop] = sc.astype(np.int64, copy=False)
        self._f["label"][start:stop] = lab.astype(np.int64, copy=False)
        self._f["loglik"][start:stop] = ll
        self._f["index"][start:stop] = idx.astype(np.int64, copy=False)
        self._f.flush()
        # committed only after the data is flushed: a resumed writer never trusts half a write
        self._f.attrs["rows_committed"] = stop
        self._f.flush()

    def close(self) -> Path:
        """Set ``complete`` (last), close, fsync and rename into place. Returns the final path."""
        self._require_open()
        f = self._f
        try:
            f.attrs["complete"] = True
            f.flush()
        except BaseException:
            self.abort()
            raise
        f.close()
        self._f = None
        with open(self.tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self.tmp_path, self.path)
        return self.path

    def abort(self) -> None:
        """Close and delete the partial file (nothing is left that a reader could accept)."""
        if self._f is not None:
            try:
                self._f.close()
            except Exception:  # pragma: no cover - closing a broken file
                pass
            self._f = None
        try:
            self.tmp_path.unlink()
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------------------------
# reading


def _open_checked(path: Path) -> h5py.File:
    f = open_complete(path, "sample", "delete it and rerun its job", error=ShardError)
    missing = [name for name in DATASETS if name not in f]
    if missing:
        version = f.attrs.get("format_version")
        f.close()
        if version is not None and int(version) < FORMAT_VERSION:
            raise ShardError(f"{path}: written in sample format {int(version)}, which lacks {missing} (format "
                             f"{FORMAT_VERSION} stores the world's label); delete it and rerun the samples stage")
        raise ShardError(f"{path}: missing dataset(s) {missing}")
    return f


def open_samples(path: str | os.PathLike) -> h5py.File:
    """Open a complete shard or merged file read-only (use as a context manager).

    For a merged file, every source shard must exist and be complete. Raises ShardError.
    """
    path = Path(path)
    f = _open_checked(path)
    try:
        for name in DATASETS:
            ds = f[name]
            if not ds.is_virtual:
                continue
            for src in {m.file_name for m in ds.virtual_sources()}:
                if src == ".":
                    continue
                src_path = Path(src) if os.path.isabs(src) else path.parent / src
                try:
                    _open_checked(src_path).close()
                except ShardError as exc:
                    raise ShardError(f"{path}: source shard of '{name}' is unusable: {exc}") from exc
    except BaseException:
        f.close()
        raise
    return f


def read_shard(path: str | os.PathLike) -> dict:
    """Load a complete shard (or merged file) into memory.

    Returns ``{"x", "source_class", "label", "loglik", "index"}`` as numpy arrays plus ``"attrs"``
    (a dict of the file attributes). Raises ShardError if the file is not complete.
    """
    with open_samples(path) as f:
        out = {name: f[name][()] for name in DATASETS}
        out["attrs"] = file_attrs(f)
    return out


def verify_shard(path: str | os.PathLike) -> None:
    """Check a shard or merged file thoroughly; raise ShardError naming the first problem.

    Checks: complete; required attributes present; dataset dtypes and shapes consistent with
    ``num_classes``, ``event_shape`` and ``prior``; ``loglik`` and ``x`` finite;
    ``source_class`` and ``label`` in [0, K); ``index`` unique. Reads in row blocks (flat memory).
    """
    path = Path(path)
    with open_samples(path) as f:
        K, n = _check_header(f, path)
        event = tuple(f["x"].shape[1:])
        row_bytes = max(1, int(np.prod(event)) * 4)
        step = max(1, min(_VERIFY_ROWS, (64 << 20) // row_bytes))
        for i in range(0, n, step):
            ll = f["loglik"][i:i + step]
            if not np.isfinite(ll).all():
                r, k = np.argwhere(~np.isfinite(ll))[0]
                raise ShardError(f"{path}: loglik[{i + r}, {k}] = {float(ll[r, k])!r} is not finite")
            x = f["x"][i:i + step]
            if not np.isfinite(x).all():
                r = int(np.argwhere(~np.isfinite(x.reshape(x.shape[0], -1)))[0][0])
                raise ShardError(f"{path}: x[{i + r}] contains a non-finite value")
            for name in ("source_class", "label"):
                c = f[name][i:i + step]
                if c.size and (c.min() < 0 or c.max() >= K):
                    raise ShardError(f"{path}: {name} outside [0, {K}) near row {i}")
        index = f["index"][()]
        uniq, counts = np.unique(index, return_counts=True)
        if (counts > 1).any():
            raise ShardError(f"{path}: index value {int(uniq[counts > 1][0])} appears more than once")


def check_samples_header(path: str | os.PathLike) -> None:
    """The cheap part of `verify_shard`: complete, the required attributes, and every dataset's
    shape and dtype consistent with ``num_classes`` and ``event_shape`` (no row is read).
    Raises ShardError naming the file and the first difference."""
    path = Path(path)
    with open_samples(path) as f:
        _check_header(f, path)


def _check_header(f, path: Path) -> tuple[int, int]:
    """(K, n) of an open samples file whose attributes and dataset layout check out."""
    attrs = file_attrs(f)
    missing = [k for k in (*REQUIRED_ATTRS, "format_version", "num_classes", "event_shape")
               if k not in attrs]
    if missing:
        raise ShardError(f"{path}: missing attribute(s) {missing}")
    K = int(attrs["num_classes"])
    event = tuple(int(s) for s in np.asarray(attrs["event_shape"]))
    prior = np.asarray(attrs["prior"], dtype=np.float64)
    if prior.shape != (K,) or abs(prior.sum() - 1.0) > 1e-6 or (prior < 0).any():
        raise ShardError(f"{path}: attribute prior={prior.tolist()} is not a distribution over K={K} classes")
    n = f["index"].shape[0]
    expect = {"x": (n, *event), "source_class": (n,), "label": (n,), "loglik": (n, K), "index": (n,)}
    for name in DATASETS:
        ds = f[name]
        if ds.shape != expect[name]:
            raise ShardError(f"{path}: dataset {name} has shape {ds.shape}; expected {expect[name]}")
        if ds.dtype != DTYPES[name]:
            raise ShardError(f"{path}: dataset {name} has dtype {ds.dtype}; expected {np.dtype(DTYPES[name])}")
    return K, n
