"""The version of the code that makes an artifact: git commit and dirty flag of the repository
(read-only git calls), for the provenance records (`oracle.workflow.provenance`) and the
``code_version`` attribute of every sample shard (`oracle.sample_shards`)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

_CODE_CACHE: dict[str, dict] = {}


def code_version(path: str | os.PathLike | None = None) -> dict:
    """Git commit and dirty flag of the repository holding `path` (default: the oracle package).

    Returns {"commit": sha or "unknown", "dirty": bool or None, "diff_sha256": sha256 of
    ``git diff HEAD`` when dirty (tells two dirty states apart; untracked files count as dirty
    but are not in the diff), "oracle_version"}. Read-only git calls; cached per process.
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    key = str(where.resolve())
    if key in _CODE_CACHE:
        return dict(_CODE_CACHE[key])
    from oracle import __version__

    info: dict[str, Any] = {"commit": "unknown", "dirty": None, "diff_sha256": None,
                            "oracle_version": __version__}
    # GIT_OPTIONAL_LOCKS=0: `git status` must not take index.lock in a tree others commit in.
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    cwd = where if where.is_dir() else where.parent

    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return res.stdout.decode("utf-8", "replace") if res.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit:
        info["commit"] = commit.strip()
        status = git("status", "--porcelain", "--untracked-files=normal")
        if status is not None:
            info["dirty"] = bool(status.strip())
            if info["dirty"]:
                diff = git("diff", "HEAD", "--no-color", "--no-ext-diff")
                if diff is not None:
                    info["diff_sha256"] = hashlib.sha256(diff.encode("utf-8")).hexdigest()
    _CODE_CACHE[key] = info
    return dict(info)
