"""sha256 of artifacts: files (streamed, cached by path, size and mtime) and directory trees
(``*.prov.json`` sidecars excluded, so records written later do not change a tree's hash)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from oracle.errors import DataError

RECORD_SUFFIX = ".prov.json"

_HASH_CACHE: dict[tuple, str] = {}


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file's bytes, streamed; cached by (path, size, mtime_ns)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise DataError(f"cannot hash {p}: no such file") from None
    if not p.is_file():
        raise DataError(f"cannot hash {p}: not a regular file")
    key = ("f", str(p.resolve()), st.st_size, st.st_mtime_ns)
    hit = _HASH_CACHE.get(key)
    if hit is not None:
        return hit
    with open(p, "rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    _HASH_CACHE[key] = digest
    return digest


def dir_files(root: Path) -> list[Path]:
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            if name.endswith(RECORD_SUFFIX):
                continue
            p = Path(dirpath) / name
            if p.is_file():
                files.append(p)
    return sorted(files, key=lambda q: q.relative_to(root).as_posix())


def dir_sha256(path: str | os.PathLike) -> str:
    """Hash of a directory tree: sha256 over sorted ``relpath\\0sha256\\n`` lines of its files.

    ``*.prov.json`` sidecars inside the tree are skipped so records written later do not change it.
    """
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"cannot hash {root}: not a directory")
    h = hashlib.sha256()
    for p in dir_files(root):
        h.update(f"{p.relative_to(root).as_posix()}\0{file_sha256(p)}\n".encode())
    return h.hexdigest()


def path_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, or the tree hash of a directory (see `dir_sha256`)."""
    p = Path(path)
    if p.is_dir():
        return dir_sha256(p)
    return file_sha256(p)


def clear_hash_cache() -> None:
    """Forget cached hashes (tests; a process that rewrites files within one mtime tick)."""
    _HASH_CACHE.clear()
