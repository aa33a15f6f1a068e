"""The one reader of checkpoint files: every weight file the library loads goes through
`read_checkpoint` (the whole file) or `read_state_dict` (the tensors of a model).

Files are read with ``torch.load(weights_only=True)`` (no arbitrary pickles) or, for
``.safetensors``, with safetensors. A missing, unreadable (e.g. truncated) or malformed file
raises one `DataError` line that names the file, what it was read as, and the config key when
the caller passes one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oracle.errors import DataError

#: Keys under which training frameworks nest a model's state dict, tried in this order.
NESTING_KEYS = ("state_dict_ema", "state_dict", "model", "ema")
#: Name prefixes that wrappers add to every key: DistributedDataParallel, torch.compile.
WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def _where(path: Path, what: str, key: str | None) -> str:
    return f"{what} {str(path)!r}" + (f" (config key {key})" if key else "")


def read_checkpoint(path: str | os.PathLike, what: str, key: str | None = None,
                    map_location: Any = "cpu", mmap: bool = False) -> Any:
    """The object stored in a checkpoint file (a dict of tensors and plain values). With
    `mmap` the tensors are memory-mapped, not read (a cheap look at a large file's format; a
    file in torch's legacy, non-zip format cannot be mapped and is read whole)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{_where(p, what, key)} does not exist; nothing is downloaded: place the file there")
    try:
        if p.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(p), device=str(map_location))
        import torch

        import zipfile

        return torch.load(p, map_location=map_location, weights_only=True, mmap=mmap and zipfile.is_zipfile(p))
    except Exception as exc:  # noqa: BLE001 - any reader failure means a damaged or foreign file
        # an EOFError (a zero-byte or cut file) has no message at all
        first = (str(exc).splitlines() or [""])[0][:200]
        raise DataError(f"{_where(p, what, key)} is unreadable ({type(exc).__name__}{': ' + first if first else ''}, "
                        f"{p.stat().st_size} bytes); is it truncated? copy it again") from None


def read_state_dict(path: str | os.PathLike, what: str, key: str | None = None,
                    nesting: Sequence[str] = NESTING_KEYS, strip: Sequence[str] = WRAPPER_PREFIXES,
                    mmap: bool = False) -> dict:
    """The state dict {name: tensor} in a weights file: unwrapped from the first of `nesting`
    the file nests it under, with a prefix of `strip` removed when every key carries it
    (`mmap`: as for `read_checkpoint`)."""
    import torch

    p = Path(path)
    obj = read_checkpoint(p, what, key, mmap=mmap)
    for name in nesting:
        if isinstance(obj, dict) and isinstance(obj.get(name), dict):
            obj = obj[name]
            break
    if not isinstance(obj, dict) or not obj or not all(isinstance(v, torch.Tensor) for v in obj.values()):
        raise DataError(f"{_where(p, what, key)} does not hold a state dict of tensors")
    for prefix in strip:
        if all(k.startswith(prefix) for k in obj):
            obj = {k[len(prefix):]: v for k, v in obj.items()}
    return obj
