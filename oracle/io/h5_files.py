"""The one check every reader of the library's HDF5 files makes before it reads: the file is
there, opens as HDF5, carries the ``complete`` flag its writer sets last (a writer that died
leaves none), and, where the reader knows one, is of the format version it reads. Each failure
is one line naming the file and what remakes it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from oracle.errors import DataError, OracleError

if TYPE_CHECKING:
    import h5py

__all__ = ["check_complete", "open_complete", "reading"]


def check_complete(f: h5py.File, path: str | os.PathLike, what: str, rerun: str,
                   format_version: int | None = None, error: type[OracleError] = DataError) -> None:
    """`error` (one line) unless the open file `f` at `path` has its ``complete`` flag and, when
    `format_version` is given, that ``format_version`` attribute (1 when absent: the files
    written before the attribute). `what` names the kind of file ("splits"), `rerun` what
    remakes it ("delete it and rerun the splits rule")."""
    if not f.attrs.get("complete", False):
        raise error(f"{path} is incomplete (no 'complete' attribute): the writer did not finish; {rerun}")
    if format_version is not None and (version := int(f.attrs.get("format_version", 1))) != format_version:
        raise error(f"{path} is in {what} format {version}, not {format_version}: {rerun}")


def open_complete(path: str | os.PathLike, what: str, rerun: str, format_version: int | None = None,
                  error: type[OracleError] = DataError) -> h5py.File:
    """`path` opened read-only once it passes the check (module docstring; arguments as in
    `check_complete`); the caller closes it (``with open_complete(...) as f:``)."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: no such {what} file")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise error(f"{path}: not a readable HDF5 {what} file ({exc}); {rerun}") from None
    try:
        check_complete(f, path, what, rerun, format_version, error)
    except OracleError:
        f.close()
        raise
    return f


@contextmanager
def reading(path: str | os.PathLike, what: str, rerun: str, format_version: int | None = None,
            error: type[OracleError] = DataError) -> Iterator[h5py.File]:
    """`open_complete` as a context: the file is closed after the block, and what goes wrong
    while the block reads it (a missing dataset or attribute, a damaged chunk) is re-raised as
    one line naming the file; the block's own OracleErrors pass unchanged."""
    with open_complete(path, what, rerun, format_version, error) as f:
        try:
            yield f
        except OracleError:
            raise
        except Exception as exc:  # noqa: BLE001 - h5py raises OSError, KeyError, ValueError, TypeError, ...
            raise error(f"cannot read {what} file {path}: {type(exc).__name__}: {exc}") from None
