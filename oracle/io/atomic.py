"""Atomic writes: an artifact appears under its final name complete, or not at all.

Every writer of the library goes through `atomic_output` (a temporary file in the same
folder, renamed onto the target on success, removed on failure), so a killed job never leaves
a partial file that a rerun or a downstream job would mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from oracle.errors import ConfigError, DataError


def current_umask() -> int:
    """The process umask now (it can change after import), without changing it where possible.

    Reads ``Umask:`` of /proc/self/status (Linux >= 4.7); elsewhere sets and restores it, which
    is not thread-safe but is the only portable way to read it.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the same folder as `path`; rename it onto `path` on success.

    On an exception the temporary file is removed and `path` is left untouched, so a crash
    never leaves a partial artifact under the final name. Parent folders are created.
    The artifact gets the permissions a plain ``open(path, "w")`` would give it
    (0666 minus the process umask at rename time), not mkstemp's private 0600.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # after the caller wrote (a writer may have replaced the file) and just before the
        # rename, so the umask in force when the artifact appears is the one applied
        if tmp_path.is_file() and not tmp_path.is_symlink():
            os.chmod(tmp_path, 0o666 & ~current_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Write `obj` as indented, key-sorted JSON to `path` atomically. Returns the path."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=True, allow_nan=True) + "\n"
    with atomic_output(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def read_json(path: str | os.PathLike) -> Any:
    """The JSON value in file `path` (what `write_json_atomic` wrote); DataError, one line naming
    the file, when it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def torch_save_atomic(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save(obj, path)`` atomically (see `atomic_output`). Returns the path.

    The archive is serialized in memory first: ``torch.save`` to a file names the zip
    archive's root folder after the file, and the temporary name is random, so identical
    objects would give different bytes (and different sha256 in every provenance record
    downstream). From a buffer the folder is always ``archive``. torch is imported on call:
    writing records and JSON must not cost a torch import.
    """
    import io

    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    with atomic_output(path) as tmp:
        tmp.write_bytes(buf.getbuffer())
    return Path(path)


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples, sets, Paths and Mappings to plain JSON types."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, bytes):
        return obj.decode()
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(to_jsonable(v) for v in obj)
    # numpy / torch scalars and arrays without importing either
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return to_jsonable(obj.tolist())
    if hasattr(obj, "item") and callable(obj.item):
        return to_jsonable(obj.item())
    if hasattr(obj, "items") and callable(obj.items):  # Snakemake Namedlist-like
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    raise ConfigError(f"cannot record value {obj!r} of type {type(obj).__name__}: expected JSON-like data")
