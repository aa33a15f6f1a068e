"""The model names timm registers, read without importing timm where they were read before.

Importing timm costs about 6 s of CPU (it imports torch and torchvision with it), and the
Snakefile checks every configured architecture name on each invocation: a run, a dry run, a
report, every rerun after an edit. The names depend only on the installed timm, so they are
read from timm once per installed version and kept in a cache file
(`$ORACLE_CACHE_DIR`, else `$XDG_CACHE_HOME/oracle`, else `~/.cache/oracle`); later calls read
that file (milliseconds). A cache that cannot be written only costs the import each time.

A name is a model when `timm.is_model` says so: its architecture part (before a pretrained tag
such as ``.a1_in1k``) is registered, deprecated aliases included (timm still builds them).

Light: standard library only until the names have to be read from timm.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
from pathlib import Path

from oracle.io.atomic import atomic_output


def cache_dir() -> Path:
    """Where the names are kept: `$ORACLE_CACHE_DIR`, else `$XDG_CACHE_HOME/oracle`, else
    `~/.cache/oracle`."""
    if own := os.environ.get("ORACLE_CACHE_DIR"):
        return Path(own)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "oracle"


def _installed_timm() -> tuple[str, str]:
    """(version, package folder) of the timm this interpreter imports, without importing it."""
    spec = importlib.util.find_spec("timm")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("timm is not installed (requirements.txt installs it)")
    return importlib.metadata.version("timm"), str(Path(spec.origin).parent)


def cache_file() -> Path:
    """The cache file of the installed timm: its version and folder name it, so another timm
    (an upgrade, another environment) reads its own names."""
    version, folder = _installed_timm()
    return cache_dir() / f"timm-{version}-{hashlib.sha256(folder.encode()).hexdigest()[:12]}.txt"


def names_from_timm() -> frozenset[str]:
    """Every architecture name timm builds: `timm.list_models()` and its deprecated aliases
    (imports timm)."""
    import timm
    from timm.models import get_deprecated_models

    return frozenset(timm.list_models()) | frozenset(get_deprecated_models())


def model_names() -> frozenset[str]:
    """Every architecture name the installed timm builds, from the cache file where it is there,
    else from timm (and then written to the cache file, atomically)."""
    path = cache_file()
    try:
        if cached := frozenset(path.read_text(encoding="utf-8").split()):
            return cached
    except OSError:
        pass
    names = names_from_timm()
    try:
        with atomic_output(path) as tmp:
            tmp.write_text("\n".join(sorted(names)) + "\n", encoding="utf-8")
    except OSError:
        pass  # a read-only home: the names were read, only the next call pays the import again
    return names


def is_model(name: str, names: frozenset[str] | None = None) -> bool:
    """`timm.is_model(name)` without importing timm: its architecture part (before a pretrained
    tag) is one of `names` (default: `model_names()`; pass them when checking several names, so
    the cache file is read once)."""
    return name.split(".", 1)[0] in (model_names() if names is None else names)
