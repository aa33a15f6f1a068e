"""How many seeds or test rows would decide a check: the study sized by its own power analysis.

A check (`oracle.report.intervals.Check`) is decided when its 95% interval excludes its
reference. With the variance components of its estimate (`oracle.report.intervals.Design`:
sigma_S^2 per seed, sigma_R^2 per test row, sigma_SR^2 their interaction, measured at S seeds
and R rows) the SE at another design (S', R') is

    SE(S', R') = sqrt(sigma_S^2 / S' + sigma_R^2 / R' + sigma_SR^2 / (S' R')),

with Satterthwaite's degrees of freedom from the mean squares' expectations at that design.
Planning keeps the estimate where it is (the usual assumption of a power analysis: a true
effect of the size measured), so the check is decided once ``t(df') SE(S', R') < |value -
reference|``. `needed` returns the fewest seeds at the current rows and the fewest rows at the
current seeds that reach it (None where no number does: more rows cannot remove the seeds' part,
nor more seeds the rows'); `to_decide` says it as text for a claims row, priced in job-seconds
when the cost of one more seed is given.

It sits in `oracle.report` beside the intervals it sizes (the claims may not import
`oracle.measures`); `oracle.measures.two_way` estimates the components it reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from oracle.report.intervals import Check, Design, quantile

__all__ = ["MAX_SEEDS", "MAX_ROWS", "ROW_MULTIPLES", "Needed", "design_se", "needed", "row_to_decide", "satterthwaite_df",
           "to_decide", "together"]

#: Past these a design is not a practical study: `needed` says None.
MAX_SEEDS, MAX_ROWS = 1_000, 10_000_000


def satterthwaite_df(terms: list[tuple[float, float]]) -> float | None:
    """Satterthwaite's degrees of freedom of ``V = sum c_i MS_i``: ``terms`` = [(c_i MS_i, df_i),
    ...] -> ``V^2 / sum((c_i MS_i)^2 / df_i)``; None when V <= 0 or no term has weight."""
    v = sum(t for t, _ in terms)
    den = sum(t * t / d for t, d in terms if d > 0 and t != 0)
    return v * v / den if v > 0 and den > 0 else None


def design_se(var_seeds: float, var_rows: float, var_interaction: float, n_seeds: int, n_rows: int | None
              ) -> tuple[float, float | None]:
    """(SE, df) of a mean over `n_seeds` seeds and `n_rows` shared test rows with these variance
    components: Var = var_seeds / S + var_rows / R + var_interaction / (S R), df from the mean
    squares' expectations at that design (R var_seeds + var_interaction over S - 1 df, S var_rows +
    var_interaction over R - 1, var_interaction over (S - 1)(R - 1)). `n_rows` None: a mean over
    seeds alone, Var = var_seeds / S on S - 1 df."""
    s = int(n_seeds)
    if n_rows is None:
        return math.sqrt(max(var_seeds, 0.0) / s), (s - 1.0 if s > 1 else None)
    r = int(n_rows)
    var = var_seeds / s + var_rows / r + var_interaction / (s * r)
    e_s, e_r, e_e = r * var_seeds + var_interaction, s * var_rows + var_interaction, var_interaction
    terms = [(e_s / (s * r), s - 1.0), (e_r / (s * r), r - 1.0), (-e_e / (s * r), (s - 1.0) * (r - 1.0))]
    return math.sqrt(max(var, 0.0)), satterthwaite_df(terms)


@dataclass(frozen=True)
class Needed:
    """What would decide a check: ``seeds`` (at the current rows) and ``rows`` (at the current
    seeds), each None where no practical number does; ``now`` the (seeds, rows) it has."""

    seeds: int | None
    rows: int | None
    now: tuple[int, int | None]


def _half(d: Design, s: int, r: int | None) -> float:
    se, df = design_se(d.var_seeds, d.var_rows, d.var_interaction, s, r)
    return quantile(df, d.m) * se if se > 0 else 0.0


def _fewest(ok, lo: int, hi: int) -> int | None:
    """The smallest n in [lo, hi] with ok(n), ok monotone (False then True); None if ok(hi) fails."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def needed(design: Design, value: float, reference: float, band: tuple[float, float] | None = None) -> Needed:
    """The fewest seeds (rows fixed) and the fewest test rows (seeds fixed) at which the 95%
    interval of an estimate `value` with variance `design` would exclude `reference` (module
    docstring), or, given an equivalence `band` (lo, hi) that holds `value`, lie inside it,
    whichever comes first. Seeds start from 2 (a t interval over seeds needs two), rows from the
    design's own; a design already deciding the check returns its own counts."""
    gap = abs(value - reference)
    if band is not None and band[0] < value < band[1]:
        gap = max(gap, min(value - band[0], band[1] - value))
    s, r = design.n_seeds, design.n_rows
    if gap == 0 or not math.isfinite(gap):
        return Needed(None, None, (s, r))
    seeds = _fewest(lambda k: _half(design, k, r) < gap, 2, MAX_SEEDS)
    rows = None if r is None else _fewest(lambda k: _half(design, s, k) < gap, 2, MAX_ROWS)
    return Needed(seeds, rows, (s, r))


def _about(n: int) -> str:
    """n to two significant figures with thousands separators (1,463 -> "1,500"; 7 -> "7")."""
    if n < 100:
        return str(n)
    digits = 10 ** (len(str(n)) - 2)
    return f"{math.ceil(n / digits) * digits:,}"


def to_decide(check: Check, seed_cost_s: float | None = None) -> str:
    """What would decide `check`, as text for its claims row: "about 5 seeds (now 2; about 540
    job-s more)", "about 1,500 test rows (now 400)", both joined by "or", or why no number does;
    "" when the check is decided already or its estimate carries no variance components
    (`oracle.report.intervals.Design`). `seed_cost_s`: the job-seconds one more seed costs (its
    classifiers' training and prediction jobs), which prices the seeds."""
    e = check.estimate
    if e.design is None or e.half is None or e.side(check.reference) != 0:
        return ""
    if check.band is not None and e.within(*check.band):
        return ""
    n = needed(e.design, e.value, check.reference, check.band)
    s, r = n.now
    parts = []
    # the interval at hand used its data's df, the plan the expected one: an undecided check
    # needs at least one more of either
    if n.seeds is not None:
        seeds = max(n.seeds, s + 1)
        price = f"; about {_about(round((seeds - s) * seed_cost_s))} job-s more" if seed_cost_s is not None else ""
        parts.append(f"about {seeds} seeds (now {s}{price})")
    if n.rows is not None and r is not None:
        parts.append(f"about {_about(max(n.rows, r + 1))} test rows (now {r:,})")
    if parts:
        return " or ".join(parts)
    if e.value == check.reference:
        return f"no number of seeds or test rows: the estimate lies on its threshold {check.reference:.4g}"
    both = together(e.design, e.value, check.reference, check.band)
    if both is not None:
        seeds, rows = both
        return f"about {max(seeds, s + 1)} seeds with about {_about(rows)} test rows (now {s} and {r:,}): neither alone"
    return (f"more seeds and more test rows together: neither alone brings the interval within "
            f"{abs(e.value - check.reference):.3g} of the estimate")


#: The multiples of a design's test rows `together` tries, fewest first.
ROW_MULTIPLES = (2, 4, 10, 100)


def together(design: Design, value: float, reference: float, band: tuple[float, float] | None = None
             ) -> tuple[int, int] | None:
    """Where neither more seeds nor more rows alone decide a check (`needed`): the fewest seeds at
    the first of `ROW_MULTIPLES` times the design's test rows at which some practical number of
    seeds does, as (seeds, rows); None without test rows or where none does."""
    if design.n_rows is None:
        return None
    for k in ROW_MULTIPLES:
        rows = design.n_rows * k
        n = needed(replace(design, n_rows=rows), value, reference, band)
        if n.seeds is not None:
            return n.seeds, rows
    return None


def row_to_decide(checks: Sequence[Check], verdict: str, seed_cost_s: float | None = None) -> str:
    """A claims row's ``to decide``: for an ``unresolved`` verdict, "<label>: `to_decide`" of each
    check whose interval still contains its reference, joined by "; "; "" for any other verdict
    or where no check carries variance components."""
    if verdict != "unresolved":
        return ""
    return "; ".join(f"{c.label}: {t}" for c in checks if (t := to_decide(c, seed_cost_s)))
