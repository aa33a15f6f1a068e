"""The in-text numbers: one entry per number, parts per experiment merged into numbers.json,
and numbers.tex (one LaTeX macro per number) so a manuscript cites them without copying.

An entry is ``{"value", "unit", "artifact", "description"}`` plus its spread (``se`` with
``se_over``, ``std``, ``n_seeds``, ``ci95``); ``artifact`` is the path of the file the value
was read from, so ``oracle.workflow.audit`` can follow it back to the raw data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from oracle.errors import DataError


def _finite(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v


def entry(value: Any, unit: str, artifact: str, description: str, **spread: Any) -> dict:
    """One number: value, unit, the artifact it was read from, what it is, and its spread
    (``se``: standard error of the value, ``se_over``: what it is over; ``std``; ``n_seeds``;
    ``ci95``: [lo, hi]). Non-finite values and spreads become None."""
    out = {"value": _finite(value), "unit": unit, "artifact": str(artifact), "description": description}
    for k, v in spread.items():
        out[k] = [_finite(x) for x in v] if isinstance(v, (list, tuple)) else _finite(v)
    return out


def over_seeds(rows: "pd.DataFrame", col: str) -> dict[str, Any]:  # noqa: F821
    """Mean of `col` over the rows (one per seed) with its spread, as `entry` keywords: std
    and se over seeds (>= 2 seeds), else the one run's Monte Carlo se over its evaluation set
    (column ``<col>_se``)."""
    vals = rows[col].to_numpy(float)
    n = len(vals)
    if n >= 2:
        std = float(np.std(vals, ddof=1))
        return {"value": float(vals.mean()), "std": std, "se": std / math.sqrt(n), "se_over": "seeds", "n_seeds": n}
    se = float(rows[f"{col}_se"].iloc[0]) if f"{col}_se" in rows else None
    return {"value": float(vals[0]), "std": None, "se": se, "se_over": "test set" if se is not None else None,
            "n_seeds": n}


def merge_numbers(parts: Mapping[str, Mapping[str, Mapping]]) -> dict[str, dict]:
    """numbers.json from its parts: {prefix: {key: entry}} -> {"<prefix>.<key>": entry}.

    Prefixes are an experiment's name, ``world.<world>`` or ``validation``; a key that two
    parts would both produce raises DataError.
    """
    out: dict[str, dict] = {}
    for prefix, numbers in parts.items():
        for key, value in numbers.items():
            full = f"{prefix}.{key}"
            if full in out:
                raise DataError(f"numbers: key {full!r} is produced twice")
            out[full] = dict(value)
    return dict(sorted(out.items()))


_DIGIT_WORDS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five",
                "6": "Six", "7": "Seven", "8": "Eight", "9": "Nine"}


def tex_macro_name(key: str, prefix: str = "num") -> str:
    """The LaTeX macro name of numbers.json key `key`: letters only (digits spelled out, other
    characters dropped as word breaks), CamelCase, with `prefix`: "scaling.alpha.resnet_18" ->
    ``numScalingAlphaResnetOneEight``."""
    out = prefix
    for word in re.split(r"[^A-Za-z0-9]+", key):
        word = "".join(_DIGIT_WORDS.get(ch, ch) for ch in word)
        out += word[:1].upper() + word[1:]
    return out


def _tex_value(v: Any) -> str:
    if v is None:
        return "--"
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)).lower()
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}" if math.isfinite(float(v)) else "--"
    raise DataError(f"numbers.tex: value {v!r} is not a number")


def numbers_tex(numbers: Mapping[str, Mapping], paper: Mapping[str, str] | None = None) -> str:
    r"""LaTeX macros ``\newcommand{\numWorldBaseAleatoricFloor}{0.0123}`` (4 significant
    digits), one per number, sorted by key; with `paper` ({paper id: artifact path without
    suffix}) also one macro per paper artifact, ``\paperFigTwo`` -> its path, for
    ``\includegraphics``/``\input``. Raises DataError when two keys map to the same macro."""
    lines = ["% generated from numbers.json by the workflow; do not edit"]
    seen: dict[str, str] = {}

    def add(name: str, key: str, text: str) -> None:
        if name in seen:
            raise DataError(f"numbers.json keys {seen[name]!r} and {key!r} both map to the LaTeX macro "
                            f"\\{name}: rename one (e.g. the architecture in classifiers.archs)")
        seen[name] = key
        lines.append(f"\\newcommand{{\\{name}}}{{{text}}}")

    for key in sorted(numbers):
        add(tex_macro_name(key), key, _tex_value(numbers[key]["value"]))
    for pid, path in sorted((paper or {}).items()):
        add(tex_macro_name(pid, prefix="paper"), pid, str(path))
    return "\n".join(lines) + "\n"
