"""How a rebuilt artifact compares with the original: the verdicts of ``audit --rebuild``.

On one machine the workflow is deterministic, so a rebuilt artifact has the original's bytes,
except for what measures the run rather than the result: wall-clock times (`WALL_CLOCK`, in
histories, metrics, training logs, the collected tables) and the modification times HDF5
keeps in a virtual dataset (``all.h5``). Float32 kernels may differ across CPU models and
batch sizes, so a rebuild on another machine can differ in the last bits; such a difference is
named as what it is (within the shard's recorded precision bound, or within float32 rounding),
not as a mismatch.

Verdicts, best first (`VERDICTS`): ``identical`` (same bytes), ``same content`` (equal apart
from wall-clock fields or HDF5 metadata), ``within precision`` (numbers differ by no more than
the recorded bound or float32 rounding), ``mismatch``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from oracle.io.hashing import file_sha256

__all__ = ["FLOAT32_RTOL", "VERDICTS", "WALL_CLOCK", "compare_artifacts"]

VERDICTS = ("identical", "same content", "within precision", "mismatch")
#: Fields that time the run, not its result (JSON keys, CSV columns), at any depth.
WALL_CLOCK = frozenset({"seconds", "train_seconds", "wall_s", "timings_s", "samples_per_s"})
#: HDF5 attributes that record which code wrote the file (compared by the audit's code check).
CODE_ATTRS = frozenset({"code_version", "code_versions", "attrs_sha256"})
#: Relative difference a float32 computation may show on another CPU model or batch size.
FLOAT32_RTOL = 1e-5
_ATOL = 1e-9
#: A shard's log p(x|k) rebuilt elsewhere differs from the stored values by at most this many
#: times the precision bound measured when it was written (two float32 runs, each within it).
BOUND_FACTOR = 4.0


class _Worst:
    def __init__(self) -> None:
        self.verdict, self.detail = "identical", ""
        self.wall: set[str] = set()

    def note(self, verdict: str, detail: str) -> None:
        if VERDICTS.index(verdict) > VERDICTS.index(self.verdict):
            self.verdict, self.detail = verdict, detail


def _close(a: float, b: float, rtol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=_ATOL) or (math.isnan(a) and math.isnan(b))


def _walk(a: Any, b: Any, where: str, worst: _Worst) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{where}.{k}" if where else str(k)
            if k in WALL_CLOCK:
                if a.get(k) != b.get(k):
                    worst.wall.add(f"wall-clock field {k}")
                continue
            if k not in a or k not in b:
                worst.note("mismatch", f"{sub} is only in the {'rebuilt' if k in b else 'original'} file")
                continue
            _walk(a[k], b[k], sub, worst)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            worst.note("mismatch", f"{where}: {len(a)} entries, rebuilt {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _walk(x, y, f"{where}[{i}]", worst)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if a != b and not (math.isnan(float(a)) and math.isnan(float(b))):
            if _close(float(a), float(b), FLOAT32_RTOL):
                worst.note("within precision", f"{where}: {a!r} vs rebuilt {b!r} (within float32 rounding)")
            else:
                worst.note("mismatch", f"{where}: {a!r}, rebuilt {b!r}")
    elif a != b:
        worst.note("mismatch", f"{where}: {_short(a)}, rebuilt {_short(b)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_lines(path: Path) -> Iterator[Any]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def _csv(a: Path, b: Path, worst: _Worst) -> None:
    import pandas as pd

    x, y = pd.read_csv(a), pd.read_csv(b)
    if list(x.columns) != list(y.columns) or len(x) != len(y):
        worst.note("mismatch", f"columns or rows differ ({x.shape} vs rebuilt {y.shape})")
        return
    rows = [{c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in r.items()}
            for r in x.to_dict("records")]
    rebuilt = [{c: (None if isinstance(v, float) and math.isnan(v) else v) for c, v in r.items()}
               for r in y.to_dict("records")]
    _walk(rows, rebuilt, "", worst)


def _h5(a: Path, b: Path, worst: _Worst) -> None:
    import h5py
    import numpy as np

    from oracle.io.h5_attrs import file_attrs

    with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
        attrs_a, attrs_b = ({k: v for k, v in file_attrs(h).items() if k != "provenance"} for h in (f, g))
        for k in CODE_ATTRS:  # which code wrote it: the audit's code check speaks for that
            if attrs_a.pop(k, None) != attrs_b.pop(k, None):
                worst.wall.add(f"attribute {k}")
        _walk(json.loads(json.dumps(attrs_a, default=_plain)), json.loads(json.dumps(attrs_b, default=_plain)),
              "attrs", worst)
        bound = float(attrs_a.get("precision_max_abs_dlogp") or 0.0)
        names: list[str] = []
        f.visit(lambda n: names.append(n) if isinstance(f[n], h5py.Dataset) else None)
        other: list[str] = []
        g.visit(lambda n: other.append(n) if isinstance(g[n], h5py.Dataset) else None)
        if sorted(names) != sorted(other):
            worst.note("mismatch", f"datasets {sorted(names)} vs rebuilt {sorted(other)}")
            return
        for n in names:
            x, y = f[n][()], g[n][()]
            if x.shape != y.shape or x.dtype != y.dtype:
                worst.note("mismatch", f"{n}: {x.dtype}{x.shape} vs rebuilt {y.dtype}{y.shape}")
            elif not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
                if x.dtype.kind != "f":
                    worst.note("mismatch", f"{n}: {int((x != y).sum())} entries differ")
                    continue
                d = float(np.nanmax(np.abs(x.astype(np.float64) - y.astype(np.float64))))
                if n == "loglik" and bound > 0 and d <= BOUND_FACTOR * bound:
                    worst.note("within precision", f"{n}: max |d| {d:.3g} nats, within the shard's recorded bound "
                                                   f"{bound:.3g} (x{BOUND_FACTOR:g})")
                elif np.allclose(x, y, rtol=FLOAT32_RTOL, atol=_ATOL, equal_nan=True):
                    worst.note("within precision", f"{n}: max |d| {d:.3g} (within float32 rounding)")
                else:
                    worst.note("mismatch", f"{n}: max |d| {d:.3g}" + (f" (recorded bound {bound:.3g})" if n == "loglik" else ""))


def _plain(v: Any) -> Any:
    import numpy as np

    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _torch(a: Path, b: Path, worst: _Worst) -> None:
    import torch

    def plain(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return v.detach().cpu().double().flatten().tolist() if v.is_floating_point() else v.cpu().flatten().tolist()
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    _walk(plain(torch.load(a, map_location="cpu", weights_only=False)),
          plain(torch.load(b, map_location="cpu", weights_only=False)), "", worst)


def _text(a: Path, b: Path, worst: _Worst) -> None:
    x, y = a.read_text(encoding="utf-8").splitlines(), b.read_text(encoding="utf-8").splitlines()
    for i, (u, v) in enumerate(zip(x, y), start=1):
        if u != v:
            worst.note("mismatch", f"line {i}: {_short(u)}, rebuilt {_short(v)}")
            return
    if len(x) != len(y):
        worst.note("mismatch", f"{len(x)} lines, rebuilt {len(y)}")


def compare_artifacts(original: str | Path, rebuilt: str | Path) -> tuple[str, str]:
    """(verdict, what differs) of a rebuilt file against the original (module docstring)."""
    a, b = Path(original), Path(rebuilt)
    if not b.exists():
        return "mismatch", "not rebuilt"
    if not a.exists():
        return "mismatch", "the original is missing"
    if a.is_dir() or b.is_dir():
        from oracle.io.hashing import path_sha256

        same = path_sha256(a) == path_sha256(b)
        return ("identical", "") if same else ("mismatch", "the folders' files differ")
    if file_sha256(a) == file_sha256(b):
        return "identical", ""
    worst = _Worst()
    worst.verdict = "same content"  # the bytes differ; what follows says how much that matters
    suffix = a.suffix.lower()
    try:
        if suffix == ".json":
            _walk(json.loads(a.read_text(encoding="utf-8")), json.loads(b.read_text(encoding="utf-8")), "", worst)
        elif suffix == ".jsonl":
            _walk(list(_json_lines(a)), list(_json_lines(b)), "", worst)
        elif suffix == ".csv":
            _csv(a, b, worst)
        elif suffix in (".h5", ".hdf5"):
            _h5(a, b, worst)
        elif suffix in (".pt", ".pth"):
            _torch(a, b, worst)
        elif suffix in (".md", ".tex", ".rst", ".txt", ".yaml", ".yml"):
            _text(a, b, worst)
        else:
            worst.note("mismatch", "the bytes differ")
    except Exception as exc:  # noqa: BLE001 - an unreadable rebuild is a mismatch, named
        worst.note("mismatch", f"cannot compare the contents ({type(exc).__name__}: {exc})")
    if worst.verdict == "same content":
        what = f"{', '.join(sorted(worst.wall))}" if worst.wall else "file metadata (HDF5 times)"
        return "same content", f"the bytes differ only in {what}"
    if worst.wall and worst.verdict != "mismatch":
        worst.detail += f"; also differ: {', '.join(sorted(worst.wall))}"
    return worst.verdict, worst.detail
