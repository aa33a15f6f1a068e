"""The in-text numbers: one entry per number, parts per experiment merged into numbers.json,
and numbers.tex (one LaTeX macro per number) so a manuscript cites them without copying.

An entry is ``{"value", "unit", "artifact", "description"}`` plus its spread (``se`` with
``se_over``, ``std``, ``n_seeds``, ``ci95``; ``std_over`` for a std that is not over seeds; ``of``,
the total of a count such as `converged_entry`'s);
``artifact`` is the path of the file the value was read from, so ``oracle.tools.audit``
can follow it back to the raw data. A mean over seeds (or models) carries std, se, se_over
and n_seeds alike (`mean_spread`, `spread_problems`).

Where the seeds were all scored on the same test rows, the seeds' spread leaves out the error
of the test set itself (it does not average out over seeds): such a mean carries ``se_over``
`SEEDS_AND_ROWS` and the two-way (seed x test row) decomposition of its variance
(`oracle.measures.two_way`), each source counted once: ``se`` = the root of the sum of squares of
``se_seeds_part``, ``se_rows_part`` and ``se_interaction_part``, the variance components
``var_seeds``, ``var_rows``, ``var_interaction`` with ``n_seeds`` and ``n_rows`` (what a power
analysis reads, `oracle.report.power`), Satterthwaite's ``df`` and ``rows_bound`` (True where
the seeds' rows were never combined, so the rows' part is its upper bound;
`oracle.experiments._pairs.over_seeds_and_rows`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from oracle.errors import DataError


def _finite(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):  # before int: a flag such as ``posed`` stays a bool, not 0/1
        return bool(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v


def entry(value: Any, unit: str, artifact: str, description: str, **spread: Any) -> dict:
    """One number: value, unit, the artifact it was read from, what it is, and its spread
    (``se``: standard error of the value, ``se_over``: what it is over; ``std`` over seeds, or
    over ``std_over``; ``n_seeds``; ``ci95``: [lo, hi]). Non-finite values and spreads become None."""
    out = {"value": _finite(value), "unit": unit, "artifact": str(artifact), "description": description}
    for k, v in spread.items():
        out[k] = [_finite(x) for x in v] if isinstance(v, (list, tuple)) else _finite(v)
    return out


def mean_spread(std: float | None, n: int, over: str = "seeds") -> dict[str, Any]:
    """The spread of a mean over `n` runs whose sample std (ddof=1) is `std`, as `entry`
    keywords: std, se = std / sqrt(n), ``se_over`` `over` and ``n_seeds`` n (std and se None
    below 2 runs), so every seed-averaged number carries both."""
    ok = std is not None and n >= 2 and math.isfinite(float(std))
    return {"std": float(std) if ok else None, "se": float(std) / math.sqrt(n) if ok else None,
            "se_over": over if ok else None, "n_seeds": int(n)}


def converged_entry(runs, who: tuple[str, ...], label: str, artifact: str) -> dict | None:
    """How many of the classifiers behind `runs` converged by the stopping rule
    (`oracle.classifiers.stopping`), as an `entry`: the count, with ``of`` the number of
    classifiers (`runs`: a DataFrame with a bool ``converged`` column, one classifier per
    distinct `who`, e.g. arch, N, seed, repeated per evaluation set). The claims show it beside
    each verdict read from those classifiers. None without the column (a run made before
    the rule was recorded)."""
    if "converged" not in runs or not len(runs) or runs["converged"].isna().any():
        return None
    one = runs.drop_duplicates(subset=[c for c in who if c in runs])
    k = int(one["converged"].astype(bool).sum())
    return entry(k, "classifiers", artifact, f"{label}: classifiers converged by the stopping rule, of {len(one)}",
                 of=len(one))


def converged_entries(runs, who: tuple[str, ...], labels: Mapping[str, str], artifact: str) -> dict[str, dict]:
    """``{"converged.<arch>": converged_entry}`` for each architecture of `runs` (an ``arch``
    column; `labels`: arch -> how the description names it, the arch itself where absent); an
    architecture whose runs predate the count has none."""
    out: dict[str, dict] = {}
    for arch, sub in runs.groupby("arch", sort=True):
        e = converged_entry(sub, who, labels.get(arch, str(arch)), artifact)
        if e is not None:
            out[f"converged.{arch}"] = e
    return out


def correlation_ci95(per_seed: list[float] | np.ndarray) -> list[float] | None:
    """The 95% interval of a correlation measured once per seed, through Fisher's z: the
    per-seed ``z = atanh(rho)``, their mean and SE over seeds, the Student-t interval on n - 1
    degrees of freedom, mapped back by ``tanh`` -> ``[lo, hi]`` inside (-1, 1). A t interval on
    rho itself runs past 1 for a bounded quantity (two seeds of 0.20 and 0.91: [-4.3, 5.4]).
    None below 2 finite seeds or when every seed has the same rho; a rho of exactly +-1 is
    held at +-(1 - 1e-12) (its z is infinite)."""
    from scipy import stats

    r = np.asarray([v for v in per_seed if v is not None and math.isfinite(v)], np.float64)
    if r.size < 2:
        return None
    z = np.arctanh(np.clip(r, -1 + 1e-12, 1 - 1e-12))
    sd = float(z.std(ddof=1))
    if sd == 0.0:
        return None
    half = float(stats.t.ppf(0.975, r.size - 1)) * sd / math.sqrt(r.size)
    return [float(np.tanh(z.mean() - half)), float(np.tanh(z.mean() + half))]


def ratio_spread(per_seed: list[float] | np.ndarray) -> dict[str, Any]:
    """A ratio measured once per seed, as `entry` keywords on its own scale: where every seed's
    ratio is > 0 (and there are >= 2), ``value`` is their geometric mean and ``ci95`` the
    Student-t interval of the mean of ``ln r`` on n - 1 degrees of freedom mapped back by exp,
    so the interval stays positive and is as wide either way in factors (a t interval on r
    itself over two seeds of 0.6 and 2.6 runs from -11 to 14); ``std`` and ``se`` are the
    per-seed ratios' own (`mean_spread`). Otherwise the arithmetic mean with `mean_spread`
    alone (a ratio <= 0 has no log). Non-finite seeds are left out."""
    from scipy import stats

    r = np.asarray([v for v in per_seed if v is not None and math.isfinite(v)], np.float64)
    if not r.size:
        return {"value": None, **mean_spread(None, 0)}
    spread = mean_spread(float(r.std(ddof=1)) if r.size > 1 else None, int(r.size))
    if r.size < 2 or (r <= 0).any():
        return {"value": float(r.mean()), **spread}
    z = np.log(r)
    half = float(stats.t.ppf(0.975, r.size - 1)) * float(z.std(ddof=1)) / math.sqrt(r.size)
    return {"value": float(np.exp(z.mean())), **spread,
            "ci95": [float(np.exp(z.mean() - half)), float(np.exp(z.mean() + half))]}


#: ``se_over`` of a mean over seeds that were scored on one shared test set (module docstring).
SEEDS_AND_ROWS = "seeds and test rows"


#: The fields of a `SEEDS_AND_ROWS` spread besides ``se``, ``df`` and ``std``
#: (`oracle.experiments._pairs.over_seeds_and_rows`).
TWO_WAY_FIELDS = ("n_seeds", "n_rows", "se_seeds_part", "se_rows_part", "se_interaction_part", "var_seeds",
                  "var_rows", "var_interaction", "rows_bound")


def _two_way_problem(key: str, e: Mapping) -> str | None:
    """What is wrong with entry `e`'s spread over seeds and test rows, None when nothing."""
    missing = [f for f in ("se", *TWO_WAY_FIELDS) if e.get(f) is None]
    if missing or int(e["n_seeds"]) < 2 or int(e["n_rows"]) < 2:
        return (f"{key}: a spread over seeds and test rows needs se, {', '.join(TWO_WAY_FIELDS)} with n_seeds and "
                f"n_rows >= 2; lacks {', '.join(missing) or 'n >= 2'}")
    s, r = int(e["n_seeds"]), int(e["n_rows"])
    parts = {"se_seeds_part": e["var_seeds"] / s, "se_rows_part": e["var_rows"] / r,
             "se_interaction_part": e["var_interaction"] / (s * r)}
    for name, var in parts.items():
        if var < 0 or not math.isclose(e[name], math.sqrt(var), rel_tol=1e-9, abs_tol=1e-300):
            return f"{key}: {name} {e[name]} is not the root of its variance component over its count ({var})"
    if not math.isclose(e["se"], math.sqrt(sum(parts.values())), rel_tol=1e-9, abs_tol=1e-300):
        return f"{key}: se {e['se']} is not the root of the sum of its parts' squares"
    return None


def spread_problems(numbers: Mapping[str, Mapping]) -> list[str]:
    """One line per entry whose spread breaks the rule every seed-averaged number follows: a
    ``std`` (unless its ``std_over`` says it is over something else, e.g. IS splits) comes with
    its ``se`` (``std / sqrt(n_seeds)``), ``se_over`` "seeds" or "models" and ``n_seeds`` >= 2;
    an ``se`` over seeds and test rows carries its two-way parts (`TWO_WAY_FIELDS`) and is the
    root of their sum of squares; and an ``se`` says what it is over. [] when all do."""
    out = []
    for key, e in numbers.items():
        std, se, over, n = e.get("std"), e.get("se"), e.get("se_over"), e.get("n_seeds")
        if se is not None and not over:
            out.append(f"{key}: se {se} says not what it is over (se_over)")
        if over == SEEDS_AND_ROWS:
            problem = _two_way_problem(key, e)
            if problem:
                out.append(problem)
            continue
        if (std is not None and not e.get("std_over")) or over in ("seeds", "models"):
            if std is None or se is None or over not in ("seeds", "models") or not n or n < 2:
                out.append(f"{key}: a mean over seeds needs std, se, se_over seeds/models and n_seeds >= 2; "
                           f"has std={std}, se={se}, se_over={over!r}, n_seeds={n}")
            elif not math.isclose(se, std / math.sqrt(n), rel_tol=1e-9, abs_tol=1e-300):
                out.append(f"{key}: se {se} is not std / sqrt(n_seeds) = {std / math.sqrt(n)}")
    return out


def over_seeds(rows: "pd.DataFrame", col: str) -> dict[str, Any]:  # noqa: F821
    """Mean of `col` over the rows (one per seed) with its spread, as `entry` keywords: std
    and se over seeds (>= 2 seeds), else the one run's Monte Carlo se over its evaluation set
    (column ``<col>_se``)."""
    vals = rows[col].to_numpy(float)
    n = len(vals)
    if n >= 2:
        return {"value": float(vals.mean()), **mean_spread(float(np.std(vals, ddof=1)), n)}
    se = float(rows[f"{col}_se"].iloc[0]) if f"{col}_se" in rows else None
    return {"value": float(vals[0]), "std": None, "se": se, "se_over": "test set" if se is not None else None,
            "n_seeds": n}


def scale_spread(spread: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """`oracle.experiments._pairs.over_seeds_and_rows` (or `over_seeds`) keywords in another unit (e.g. fraction -> pp:
    100): value, std, se and the se parts times `factor`, the variance components times its
    square, counts and df unchanged."""
    lin = {"value", "std", "se", "se_seeds_part", "se_rows_part", "se_interaction_part"}
    sq = {"var_seeds", "var_rows", "var_interaction"}
    return {k: (v * factor if k in lin else v * factor * factor if k in sq else v) if v is not None and
            not isinstance(v, (bool, str)) else v for k, v in spread.items()}


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


def _spread_decimals(spread: float) -> int:
    """Decimal places that keep 2 significant digits of `spread` when its leading digit is 1
    or 2, else 1 (0.0014 -> 4, 0.004 -> 3, 37 -> -1)."""
    e = math.floor(math.log10(spread))
    return (2 if spread / 10.0 ** e < 3 else 1) - 1 - e


def _fixed(v: float, decimals: int) -> str:
    r = round(v, decimals)
    return f"{(r if r != 0 else 0.0):.{max(decimals, 0)}f}"  # no "-0.00"


def round_to_spread(value: float, spread: float | None) -> tuple[str, str | None]:
    """(value, spread) as text, the spread to 2 significant digits when it starts with 1 or 2
    and to 1 otherwise, the value to the spread's last decimal place: (0.26341, 0.0123) ->
    ("0.263", "0.012"); (0.0121, 0.0004) -> ("0.0121", "0.0004"). Without a positive finite
    spread the value keeps 4 significant digits (and a zero spread reads "0")."""
    if spread is None or not math.isfinite(spread) or spread <= 0 or not math.isfinite(value):
        text = f"{value:.4g}" if math.isfinite(value) else "--"
        return text, (None if spread is None or not math.isfinite(spread) else f"{spread:g}")
    d = _spread_decimals(spread)
    return _fixed(value, d), _fixed(spread, d)


#: numbers.tex: suffix of the macro of each spread field, and of the value rounded to it.
SPREAD_MACROS = {"se": ("SE", "ToSE"), "std": ("Std", "ToStd")}


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


#: numbers.tex's first macro: the folder numbers.tex was \\input from (LaTeX's \\CurrentFilePath,
#: 2021-06 and later; empty where LaTeX lacks it or the file is in the working folder), which
#: every \\paper<Id> path starts with, so \\includegraphics{\\paperFigTwo} finds the file from a
#: manuscript in any folder.
RUN_DIR_MACRO = r"""\makeatletter
\ifdefined\CurrentFilePath\edef\paperRunDir{\CurrentFilePath}\else\def\paperRunDir{}\fi
\ifx\paperRunDir\@empty\else\edef\paperRunDir{\paperRunDir/}\fi
\makeatother"""


def numbers_tex(numbers: Mapping[str, Mapping], paper: Mapping[str, str] | None = None,
                run_dir: str | None = None) -> str:
    r"""LaTeX macros ``\newcommand{\numWorldBaseAleatoricFloor}{0.0123}`` (4 significant
    digits), one per number, sorted by key; a number with a spread also gets, per spread field
    (`SPREAD_MACROS`), the spread and the value rounded to it (`round_to_spread`):
    ``\numScalingAlphaResnetSE`` and ``\numScalingAlphaResnetToSE`` from ``se``,
    ``...Std`` and ``...ToStd`` from ``std``, so ``$\numXToSE \pm \numXSE$`` reads "0.26 ±
    0.01". With `paper` ({paper id: artifact path without suffix}) also one macro per paper
    artifact, ``\paperFigTwo`` -> its path, for ``\includegraphics``/``\input``: relative to
    `run_dir` (the folder numbers.tex is written to) after ``\paperRunDir`` (`RUN_DIR_MACRO`),
    so it resolves wherever the run folder lies (without `run_dir`: the path as given). Each line ends
    with a comment naming what the macro is (``% numbers.json: scaling.alpha.resnet (se)``, ``%
    paper artifact: fig2``): a macro name alone does not say which key it was made from. Raises
    DataError when two keys map to the same macro."""
    lines = ["% generated from numbers.json by the workflow; do not edit"]
    seen: dict[str, str] = {}

    def add(name: str, key: str, text: str, source: str = "numbers.json") -> None:
        if name in seen:
            raise DataError(f"numbers.json keys {seen[name]!r} and {key!r} both map to the LaTeX macro "
                            f"\\{name}: rename one (e.g. the architecture in classifiers.archs)")
        seen[name] = key
        lines.append(f"\\newcommand{{\\{name}}}{{{text}}} % {source}: {' '.join(key.split())}")

    for key in sorted(numbers):
        name, value = tex_macro_name(key), numbers[key]["value"]
        add(name, key, _tex_value(value))
        for field, (spread_suffix, value_suffix) in SPREAD_MACROS.items():
            spread = numbers[key].get(field)
            if spread is None or isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
                continue
            v, s = round_to_spread(float(value), float(spread))
            add(name + spread_suffix, f"{key} ({field})", s or "--")
            add(name + value_suffix, f"{key} (rounded to its {field})", v)
    if paper and run_dir is not None:
        lines.append(RUN_DIR_MACRO + " % the folder of this file: every \\paper<Id> path starts there")
    for pid, path in sorted((paper or {}).items()):
        if run_dir is not None:
            path = "\\paperRunDir " + Path(os.path.relpath(path, run_dir)).as_posix()
        add(tex_macro_name(pid, prefix="paper"), pid, str(path), "paper artifact")
    return "\n".join(lines) + "\n"
