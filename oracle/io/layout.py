"""Is a file in the layout its readers expect? A cheap look (headers, shapes, dtypes; no scan of
the rows) that the start-of-run check and every job apply to their inputs before trusting them.

A file whose bytes agree with its provenance record can still be unreadable: a record re-signed
over a truncated split file or a zero-byte flow file, a shard whose ``loglik`` lost classes. Found
only by the job that reads it, such a file costs the outputs Snakemake removed before starting
that job (the models trained from a split file, the shards drawn from a flow). Looked at here, it
stops the run in one line naming the file and the layout expected.

What is looked at, by file:

- ``*.h5``: opens as HDF5; then by what it holds: oracle samples (``loglik``: shards, the merged
  file, noisy test sets; `oracle.io.shards.check_samples_header`), images (``images``: the data
  stage's train/test files: uint8 [N, C, H, W] and labels [N]), splits (``order``/``test``: read
  whole with `oracle.io.splits.read_splits_h5`, they are small), predictions (``log_q`` [n, K]
  beside ``index`` [n]). A file holding none of these is only opened.
- ``*.pt`` / ``*.pth``: loads as a checkpoint with its tensors memory-mapped
  (`oracle.io.state_dicts.read_checkpoint`); ``*.safetensors``: its header reads.
- ``*.json``: parses as JSON.

Anything else is not looked at.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from oracle.errors import DataError, OracleError
from oracle.io.h5_files import check_complete

__all__ = ["check_layout"]

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".safetensors")


def check_layout(path: str | os.PathLike) -> None:
    """Raise DataError (one line: the file, what is wrong, the layout expected) when `path` is not
    in the layout its readers expect (module docstring); a missing file is not looked at. The
    caller adds how to remake it (it knows the rule)."""
    p = Path(path)
    if not p.is_file():
        return
    try:
        if p.suffix in (".h5", ".hdf5"):
            _check_h5(p)
        elif p.suffix in CHECKPOINT_SUFFIXES:
            _check_checkpoint(p)
        elif p.suffix == ".json":
            _check_json(p)
    except DataError:
        raise
    except OracleError as exc:  # ShardError and the like: the same one line, as a data problem
        raise DataError(str(exc)) from None


def _check_h5(p: Path) -> None:
    import h5py

    try:
        f = h5py.File(p, "r")
    except OSError as exc:
        raise DataError(f"{p} is not a readable HDF5 file ({_first_line(exc)}; {p.stat().st_size} bytes): "
                        "is it truncated?") from None
    with f:
        names = set(f.keys())
        if "loglik" in names:
            kind = "samples"
        elif "images" in names:
            kind = "images"
            _check_images(f, p)
        elif "order" in names or ("test" in names and "n_pool" in f.attrs):
            kind = "splits"
        elif "log_q" in names:
            kind = "predictions"
            _check_predictions(f, p)
        else:
            return
    if kind == "samples":
        from oracle.io.shards import check_samples_header

        check_samples_header(p)
    elif kind == "splits":
        from oracle.io.splits import read_splits_h5

        read_splits_h5(p)


def _check_images(f, p: Path) -> None:
    images, labels = f["images"], f.get("labels")
    if images.dtype != "uint8" or images.ndim != 4 or images.shape[1] not in (1, 3):
        raise DataError(f"{p}: dataset images is {images.dtype} {list(images.shape)}; expected uint8 "
                        "[N, C in (1, 3), H, W] (oracle.io.images.write_images_h5)")
    if labels is None or labels.ndim != 1 or labels.shape[0] != images.shape[0] or labels.dtype.kind not in "iu":
        got = "no dataset labels" if labels is None else f"labels {labels.dtype} {list(labels.shape)}"
        raise DataError(f"{p}: {got} beside {images.shape[0]} images; expected integer labels [{images.shape[0]}]")
    check_complete(f, p, "image", "rerun the data stage")


def _check_predictions(f, p: Path) -> None:
    log_q, index = f["log_q"], f.get("index")
    if log_q.ndim != 2 or index is None or index.shape != (log_q.shape[0],):
        got = "no dataset index" if index is None else f"index {list(index.shape)}"
        raise DataError(f"{p}: log_q {list(log_q.shape)} and {got}; expected log_q [n, K] beside index [n] "
                        "(oracle.io.predictions.write_predictions)")


def _check_checkpoint(p: Path) -> None:
    from oracle.io.state_dicts import read_checkpoint

    if p.stat().st_size == 0:
        raise DataError(f"{p} is empty (0 bytes); expected a torch checkpoint")
    if p.suffix == ".safetensors":  # its header names every tensor: no need to read them
        try:
            from safetensors import safe_open

            with safe_open(str(p), framework="pt") as f:
                list(f.keys())
        except Exception as exc:  # noqa: BLE001 - any reader failure means a damaged or foreign file
            raise DataError(f"{p} is not a readable safetensors file ({_first_line(exc)})") from None
        return
    read_checkpoint(p, "checkpoint", mmap=True)


def _check_json(p: Path) -> None:
    try:
        json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{p} is not valid JSON ({exc})") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__
