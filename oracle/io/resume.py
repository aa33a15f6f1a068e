"""Resumable state (training checkpoints, partial outputs) that is used only for the run it
was written for.

A job that checkpoints (flow training's ``ckpt/last.pt``, a classifier's ``train_state.pt``)
stores a *resume key* with its state: everything that determines the result (architecture,
training config, a hash of the training data, seed, and the source of the code that defines
the model). A rerun resumes only when its own key is identical; otherwise, or when the state
cannot be read (a file truncated by a kill), the state is discarded with one line in the job's
log saying why, and training starts over. Resuming someone else's state would otherwise pass
off an old model as the new one (a changed ``head_dim`` keeps every weight shape).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oracle.io.atomic import to_jsonable


def array_sha256(*arrays: Any) -> str:
    """sha256 over the bytes (and shapes and dtypes) of numpy arrays or torch tensors."""
    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none")
            continue
        if hasattr(a, "detach"):
            a = a.detach().cpu().contiguous().numpy()
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def source_sha256(*objects: Any) -> str:
    """sha256 of the source files of the modules that define `objects` (classes, functions or
    modules), so state written by other code is not resumed."""
    files = set()
    for obj in objects:
        module = obj if inspect.ismodule(obj) else sys.modules[getattr(obj, "__module__", type(obj).__module__)]
        files.add(Path(inspect.getsourcefile(module)).resolve())
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def canonical_key(key: Mapping[str, Any]) -> dict:
    """The key as plain, sorted JSON data (what is stored and compared)."""
    return json.loads(json.dumps(to_jsonable(key), sort_keys=True))


def _differing(old: Any, new: Mapping) -> list[str]:
    if not isinstance(old, Mapping):
        return ["(no key)"]
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def load_resume_state(path: str | os.PathLike, key: Mapping[str, Any], what: str,
                      discard: str | os.PathLike | None = None) -> dict | None:
    """The state saved at `path` (a ``torch.save`` dict with the key under ``"resume_key"``)
    when it was written for `key`, else None.

    A missing file gives None silently. An unreadable file, or one written for another key,
    is deleted (with `discard`, a folder of resume state, the whole folder) and one line is
    printed naming the file and what differed; the caller then starts over.
    """
    import torch

    p = Path(path)
    if not p.exists():
        return None
    want = canonical_key(key)
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a damaged file
        reason = f"it is unreadable ({type(exc).__name__}), e.g. truncated by a kill"
        state = None
    else:
        differs = _differing(state.get("resume_key") if isinstance(state, dict) else None, want)
        reason = f"it was written for another run (differs in: {', '.join(differs)})" if differs else None
    if reason is None:
        return state
    print(f"discarding the {what} resume state {p}: {reason}; starting over", flush=True)
    target = Path(discard) if discard is not None else p
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    return None
