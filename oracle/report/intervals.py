"""Numbers with their 95% intervals, as the claims' rules read them from numbers.json.

An entry with ``se`` gets ``value ± q * se``, q the Student-t quantile at the entry's degrees
of freedom (``df`` where it states one, e.g. a mean over seeds that shared one test set, whose
SE holds both parts; ``n_seeds - 1`` for an SE over seeds) or the normal quantile (an SE over a
test set or samples). A difference of two entries takes ``se = sqrt(se1^2 + se2^2)``
(numbers.json has no covariances: conservative when the two are positively correlated) and the
smaller of the two degrees of freedom; a ratio of two positive entries is judged as the
difference of their logarithms, ``se = sqrt((se1/v1)^2 + (se2/v2)^2)`` (delta method). ``m``
comparisons at once widen each interval to the
1 - 0.05/m level (Bonferroni). An entry with its own ``ci95`` [lo, hi] (an interval that is not
value ± q * se, e.g. a correlation's through Fisher's z) keeps it: `estimate` reads it as it is,
and refuses to widen it for m > 1, which it cannot do without the entry's own method. An entry
with ``posed`` False stands for a question the run does not pose (`NotPosed`); a missing one
raises `Missing`.

An estimate read from entries with a spread also carries its `Design`: the variance components
per seed and per test row and the counts they were measured at (an entry over seeds and test
rows: its two-way components; an SE over seeds alone: ``se^2 n_seeds`` per seed), so
`oracle.report.power` can say how many seeds or test rows would decide a check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scipy import stats

__all__ = ["Check", "Design", "Estimate", "Missing", "NotPosed", "difference", "estimate", "keys_of", "learners_text",
           "log_ratio", "quantile", "r2_text", "scaled", "straightness", "suffixes", "value"]


class Missing(Exception):
    """A number a rule needs is not in numbers.json (the row becomes unresolved)."""


class NotPosed(Exception):
    """The run does not reach the regime the finding needs (the row says why)."""


@dataclass(frozen=True)
class Design:
    """Where an estimate's variance comes from: the components sigma_S^2 (``var_seeds``, per
    seed), sigma_R^2 (``var_rows``, per test row) and sigma_SR^2 (``var_interaction``) in the
    estimate's unit squared, the seeds and test rows they were measured at (``n_rows`` None: the
    SE is over seeds alone) and ``m``, the comparisons its interval is widened for
    (Var = var_seeds / S + var_rows / R + var_interaction / (S R))."""

    var_seeds: float
    var_rows: float
    var_interaction: float
    n_seeds: int
    n_rows: int | None
    m: int = 1

    def plus(self, other: Design, scale_self: float = 1.0, scale_other: float = 1.0) -> Design:
        """The design of ``scale_self * this + scale_other * other`` for two independent
        estimates: components added (each times its scale squared), at the smaller counts (rows:
        of those that have them; a design over seeds alone has no rows' components)."""
        known = [r for r in (self.n_rows, other.n_rows) if r is not None]
        rows = min(known) if known else None
        a, b = scale_self**2, scale_other**2
        return Design(a * self.var_seeds + b * other.var_seeds, a * self.var_rows + b * other.var_rows,
                      a * self.var_interaction + b * other.var_interaction, min(self.n_seeds, other.n_seeds), rows,
                      max(self.m, other.m))


def _design(e: Mapping, m: int) -> Design | None:
    """The `Design` of numbers.json entry `e` (None without one: no SE, or an SE over a test set)."""
    if e.get("var_seeds") is not None and e.get("n_rows"):
        return Design(float(e["var_seeds"]), float(e["var_rows"]), float(e["var_interaction"]), int(e["n_seeds"]),
                      int(e["n_rows"]), m)
    n = e.get("n_seeds")
    if e.get("se") is not None and e.get("se_over") in ("seeds", "models") and n and int(n) >= 2:
        return Design(float(e["se"]) ** 2 * int(n), 0.0, 0.0, int(n), None, m)
    return None


@dataclass(frozen=True)
class Estimate:
    """A value with its interval half-width (None: no uncertainty known) and the numbers it
    came from; `bounds`, where the interval is not symmetric about the value (an entry's own
    ``ci95``), are its ends, and `half` then the larger distance from the value to one. `se`:
    the standard error the interval was made from, in the value's units (None: not known), the
    unit of a verdict's margin (`oracle.report.verdicts.check_margin`)."""

    value: float
    half: float | None
    keys: tuple[str, ...]
    bounds: tuple[float, float] | None = None
    design: Design | None = None
    se: float | None = None

    @property
    def lo(self) -> float:
        if self.bounds is not None:
            return self.bounds[0]
        return self.value - (self.half if self.half is not None else math.inf)

    @property
    def hi(self) -> float:
        if self.bounds is not None:
            return self.bounds[1]
        return self.value + (self.half if self.half is not None else math.inf)

    def side(self, ref: float) -> int:
        """+1 when the interval lies above `ref`, -1 below, 0 when it contains it (or has none)."""
        return 1 if self.lo > ref else -1 if self.hi < ref else 0

    def within(self, lo: float, hi: float) -> bool:
        """The interval lies inside (lo, hi)."""
        return self.half is not None and lo < self.lo and self.hi < hi

    def text(self) -> str:
        return f"{self.value:.4g}"

    def ci_text(self, level: str = "95%") -> str:
        return "no interval (no SE)" if self.half is None else f"{level} CI [{self.lo:.4g}, {self.hi:.4g}]"


def quantile(df: float | None, m: int = 1) -> float:
    """The two-sided 95% quantile for `m` comparisons at once (Bonferroni)."""
    p = 1.0 - 0.025 / max(m, 1)
    return float(stats.t.ppf(p, df)) if df else float(stats.norm.ppf(p))


def _df(e: Mapping) -> float | None:
    if e.get("df") is not None:
        return float(e["df"])
    n = e.get("n_seeds")
    return int(n) - 1 if e.get("se_over") == "seeds" and n and int(n) >= 2 else None


def _entry(numbers: Mapping[str, Mapping], key: str) -> Mapping:
    e = numbers.get(key)
    # `posed` False; numbers files written before numbers.entry kept bools hold it as 0
    if e is not None and e.get("posed") is not None and not e["posed"]:
        raise NotPosed(e.get("description", key))
    if e is None or e.get("value") is None:
        raise Missing(key)
    return e


def value(numbers: Mapping[str, Mapping], key: str) -> float:
    """numbers[key]'s value (Missing / NotPosed as `estimate`)."""
    return float(_entry(numbers, key)["value"])


def estimate(numbers: Mapping[str, Mapping], key: str, m: int = 1) -> Estimate:
    """One number with its 95% interval (module docstring; `m` comparisons: Bonferroni; an
    entry's own ``ci95`` as it is, ValueError for m > 1)."""
    e = _entry(numbers, key)
    if e.get("ci95") is not None:
        if m > 1:
            raise ValueError(f"{key}: its ci95 is the entry's own interval; it cannot be widened for {m} comparisons")
        lo, hi = (float(b) for b in e["ci95"])
        v = float(e["value"])
        return Estimate(v, max(v - lo, hi - v), (key,), (lo, hi), se=None if e.get("se") is None else float(e["se"]))
    se = e.get("se")
    return Estimate(float(e["value"]), None if se is None else quantile(_df(e), m) * float(se), (key,),
                    design=_design(e, m), se=None if se is None else float(se))


def difference(numbers: Mapping[str, Mapping], a: str, b: str, m: int = 1, paired: str | None = None) -> Estimate:
    """numbers[a] - numbers[b] with the interval of the module docstring (None without both se).
    `paired`: the key of the same difference taken paired per seed (and test row), e.g.
    scaling's ``alpha_diff.<a>.<b>``; where the run has it, that entry is the estimate instead."""
    if paired is not None and numbers.get(paired, {}).get("value") is not None:
        _entry(numbers, a), _entry(numbers, b)  # both ends must still exist (Missing / NotPosed as unpaired)
        return estimate(numbers, paired, m)
    ea, eb = _entry(numbers, a), _entry(numbers, b)
    diff = float(ea["value"]) - float(eb["value"])
    if ea.get("se") is None or eb.get("se") is None:
        return Estimate(diff, None, (a, b))
    dfs = [d for d in (_df(ea), _df(eb)) if d is not None]
    se = math.hypot(float(ea["se"]), float(eb["se"]))
    da, db = _design(ea, m), _design(eb, m)
    design = da.plus(db) if da is not None and db is not None else None
    return Estimate(diff, quantile(min(dfs) if dfs else None, m) * se, (a, b), design=design, se=se)


def log_ratio(numbers: Mapping[str, Mapping], a: str, b: str, m: int = 1, paired: str | None = None) -> Estimate:
    """ln(numbers[a] / numbers[b]) with the interval of the module docstring (None without both
    se); NotPosed unless both values are > 0. `paired`: the key of the same log ratio taken
    paired per seed and test row (e.g. scaling's ``log_kl_ratio_max_n.<a>.<b>``); where the run
    has it, that entry (its value, two-way SE and df) is the estimate instead."""
    ea, eb = _entry(numbers, a), _entry(numbers, b)
    va, vb = float(ea["value"]), float(eb["value"])
    if va <= 0 or vb <= 0:
        raise NotPosed(f"{a} = {va:.4g} and {b} = {vb:.4g}: a ratio needs both > 0")
    if paired is not None and numbers.get(paired, {}).get("value") is not None:
        return estimate(numbers, paired, m)
    if ea.get("se") is None or eb.get("se") is None:
        return Estimate(math.log(va / vb), None, (a, b))
    dfs = [d for d in (_df(ea), _df(eb)) if d is not None]
    se = math.hypot(float(ea["se"]) / va, float(eb["se"]) / vb)
    da, db = _design(ea, m), _design(eb, m)
    design = da.plus(db, 1.0 / va, 1.0 / vb) if da is not None and db is not None else None
    return Estimate(math.log(va / vb), quantile(min(dfs) if dfs else None, m) * se, (a, b), design=design, se=se)


def scaled(e: Estimate, offset: float, factor: float) -> Estimate:
    """``offset + factor * e`` with its interval scaled alike (`factor` a known constant)."""
    bounds = None if e.bounds is None else tuple(sorted(offset + factor * b for b in e.bounds))
    d = e.design
    design = None if d is None else Design(factor**2 * d.var_seeds, factor**2 * d.var_rows,
                                           factor**2 * d.var_interaction, d.n_seeds, d.n_rows, d.m)
    return Estimate(offset + factor * e.value, None if e.half is None else abs(factor) * e.half, e.keys, bounds,
                    design, None if e.se is None else abs(factor) * e.se)


@dataclass(frozen=True)
class Check:
    """One interval a rule compared with a reference: what it is (``label``), the estimate, the
    value the rule compares it with (``reference``) and the paper's value where it has one. A
    row's checks are what a forest plot of the claims draws (claims.csv's ``checks``). ``band``
    (lo, hi): an equivalence margin about the reference; an interval inside it also decides the
    check (exponents_differ's same rate), which the power analysis sizes too."""

    label: str
    estimate: Estimate
    reference: float
    paper: float | None = None
    band: tuple[float, float] | None = None

    def record(self) -> dict:
        e = self.estimate
        finite = lambda v: v if math.isfinite(v) else None  # noqa: E731
        return {"label": self.label, "value": e.value, "lo": finite(e.lo), "hi": finite(e.hi), "se": e.se,
                "reference": self.reference, "paper": self.paper}


def suffixes(numbers: Mapping, prefix: str) -> list[str]:
    """The key endings of every number whose key starts with `prefix` (an experiment's archs, sizes, worlds)."""
    return sorted(k[len(prefix):] for k in numbers if k.startswith(prefix))


def keys_of(*estimates: Estimate) -> list[str]:
    """The numbers.json keys the estimates were read from, each once, in order."""
    return list(dict.fromkeys(k for e in estimates for k in e.keys))


#: Below this a log-log curvature is float64 round-off (coefficients of ln-space data of order 1).
_ROUNDOFF = 1e-10


def straightness(curvature: Estimate, bend: float | None = None) -> int:
    """A lack-of-fit test of a power law: -1 (bent) when the 95% interval of the (ln N)^2
    coefficient of a quadratic fit of ln y on ln N excludes 0; +1 (straight) when it contains 0
    and, given `bend`, lies within ± `bend` (the interval rules that bend out); 0 when it has no
    interval, or is too wide to rule out `bend`. Unlike R^2, it does not reward a steep slope: a
    shallow straight line (the paper's ViT, alpha 0.032, R^2 0.29 on Table 2) passes, a bent steep
    one fails."""
    if curvature.half is None:
        return 0
    # float64 round-off of an exactly straight curve (mean and std ~1e-17) must not read as a bend
    if curvature.lo > _ROUNDOFF or curvature.hi < -_ROUNDOFF:
        return -1
    return 1 if bend is None or curvature.within(-bend - _ROUNDOFF, bend + _ROUNDOFF) else 0


def r2_text(numbers: Mapping, key: str) -> str:
    """", log-log R^2 0.987" of the numbers.json entry `key` (shown beside a verdict, never
    deciding it), or "" when the run has none."""
    r2 = numbers.get(key, {}).get("value")
    return f", log-log R^2 {r2:.3g}" if r2 is not None else ""


def learners_text(numbers: Mapping[str, Mapping], name: str) -> tuple[str, list[str]]:
    """How many of experiment `name`'s classifiers converged by the stopping rule, per
    architecture (its ``converged.<arch>`` numbers, `oracle.report.numbers.converged_entry`):
    "learners converged by the stopping rule: test_resnet 10 of 10, test_vit 9 of 10" and the
    keys read; ("", []) where the experiment trains none or its numbers predate the count."""
    prefix = f"{name}.converged."
    keys = sorted(k for k, e in numbers.items()
                  if k.startswith(prefix) and e.get("value") is not None and e.get("of") is not None)
    if not keys:
        return "", []
    parts = [f"{k[len(prefix):]} {int(numbers[k]['value'])} of {int(numbers[k]['of'])}" for k in keys]
    return f"learners converged by the stopping rule: {', '.join(parts)}", keys
