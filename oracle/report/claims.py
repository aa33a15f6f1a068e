"""The paper's findings, one row each, judged from a run's numbers.json under one stated rule.

A row is ``{"id", "finding", "paper", "this run", "uncertainty", "rule", "verdict",
"numbers"}``: the paper's value (text), this run's value and its uncertainty (both text,
generated from the numbers), the rule that decides the verdict, the verdict (`VERDICTS`) and
the numbers.json keys it read. Nothing here is hand-written per run: a finding whose experiment
kind the config does not run is ``not run``; one whose kind runs but whose numbers are missing
(e.g. a single architecture) is ``unresolved`` and says which number is missing.

Intervals: a number with ``se`` over ``n_seeds`` >= 2 seeds gets the 95% Student-t interval
``value ± t(0.975, n_seeds - 1) * se``; a number whose se is over a test set or samples (a Monte
Carlo se) gets ``value ± 1.96 se``. A difference of two numbers takes se = sqrt(se1^2 + se2^2)
(the numbers.json entries carry no covariance, so paired runs are treated as independent: the
interval is conservative when the seeds' results are positively correlated) and the smaller of
the two degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from scipy import stats

VERDICTS = ("supported", "contradicted", "unresolved", "not run")

#: "Near-perfect" calibration: an ECE below this (the paper reports 0.018 for soft labels).
NEAR_PERFECT_ECE = 0.03
#: Two exponents count as "the same rate" when their difference lies within ± this.
SAME_RATE_MARGIN = 0.05
#: R^2 of the accuracy drop on the exact KL across shift types: below LOW, magnitude does not
#: explain the drop (the paper: 0.042); above HIGH, it does.
R2_LOW, R2_HIGH = 0.25, 0.75


@dataclass(frozen=True)
class Estimate:
    """A value with its 95% interval half-width (None: no uncertainty known) and the numbers
    it came from."""

    value: float
    half: float | None
    keys: tuple[str, ...]

    @property
    def lo(self) -> float:
        return self.value - (self.half if self.half is not None else math.inf)

    @property
    def hi(self) -> float:
        return self.value + (self.half if self.half is not None else math.inf)

    def side(self, ref: float) -> int:
        """+1 when the interval lies above `ref`, -1 below, 0 when it contains it (or has none)."""
        return 1 if self.lo > ref else -1 if self.hi < ref else 0

    def text(self) -> str:
        return f"{self.value:.4g}"

    def ci_text(self) -> str:
        return "no interval (no SE)" if self.half is None else f"95% CI [{self.lo:.4g}, {self.hi:.4g}]"


class Missing(Exception):
    """A number a rule needs is not in numbers.json (the row becomes unresolved)."""


def _quantile(df: int | None) -> float:
    return float(stats.t.ppf(0.975, df)) if df else 1.959963984540054


def _df(e: Mapping) -> int | None:
    n = e.get("n_seeds")
    return int(n) - 1 if e.get("se_over") == "seeds" and n and int(n) >= 2 else None


def estimate(numbers: Mapping[str, Mapping], key: str) -> Estimate:
    """One number with its 95% interval (module docstring)."""
    e = numbers.get(key)
    if e is None or e.get("value") is None:
        raise Missing(key)
    se = e.get("se")
    return Estimate(float(e["value"]), None if se is None else _quantile(_df(e)) * float(se), (key,))


def difference(numbers: Mapping[str, Mapping], a: str, b: str) -> Estimate:
    """numbers[a] - numbers[b] with the interval of the module docstring (None without both se)."""
    ea, eb = numbers.get(a), numbers.get(b)
    for key, e in ((a, ea), (b, eb)):
        if e is None or e.get("value") is None:
            raise Missing(key)
    value = float(ea["value"]) - float(eb["value"])
    if ea.get("se") is None or eb.get("se") is None:
        return Estimate(value, None, (a, b))
    dfs = [d for d in (_df(ea), _df(eb)) if d is not None]
    se = math.hypot(float(ea["se"]), float(eb["se"]))
    return Estimate(value, _quantile(min(dfs) if dfs else None) * se, (a, b))


def _sided(side: int, paper_side: int) -> str:
    return "unresolved" if side == 0 else "supported" if side == paper_side else "contradicted"


def _archs(numbers: Mapping, prefix: str) -> list[str]:
    return sorted(k[len(prefix):] for k in numbers if k.startswith(prefix))


def _arch_named(archs: list[str], name: str) -> str | None:
    hits = [a for a in archs if name in a.lower()]
    return hits[0] if hits else None


# --------------------------------------------------------------------------- the findings
# Each returns (this run's value, uncertainty, verdict, keys read) from numbers.json and the
# name of its experiment (the numbers' prefix).

def _power_law(n, x):
    archs = _archs(n, f"{x}.alpha.")
    if not archs:
        raise Missing(f"{x}.alpha.<arch>")
    alphas = {a: estimate(n, f"{x}.alpha.{a}") for a in archs}
    floor = estimate(n, f"{x}.aleatoric.{archs[0]}")
    sides = [e.side(0.0) for e in alphas.values()] + [floor.side(0.0)]
    verdict = "contradicted" if -1 in sides else "supported" if all(s == 1 for s in sides) else "unresolved"
    return ("; ".join(f"alpha {a} = {e.text()}" for a, e in alphas.items()) + f"; floor {floor.text()} nats",
            "; ".join(f"{a} {e.ci_text()}" for a, e in alphas.items()) + f"; floor {floor.ci_text()}",
            verdict, [k for e in (*alphas.values(), floor) for k in e.keys])


def _same_floor(n, x):
    archs = _archs(n, f"{x}.aleatoric.")
    if len(archs) < 2:
        raise Missing(f"{x}.aleatoric.<arch> for two architectures")
    diffs = [difference(n, f"{x}.aleatoric.{a}", f"{x}.aleatoric.{b}") for i, a in enumerate(archs)
             for b in archs[i + 1:]]
    if any(d.half is None for d in diffs):
        raise Missing(f"{x}.aleatoric.<arch> se")
    worst = max(diffs, key=lambda d: abs(d.value) - d.half)
    verdict = "contradicted" if worst.side(0.0) != 0 else "supported"
    floors = ", ".join(f"{a} {estimate(n, f'{x}.aleatoric.{a}').text()}" for a in archs)
    return (f"floors (nats): {floors}; largest difference {worst.value:.3g}",
            f"largest difference's {worst.ci_text()}", verdict, [f"{x}.aleatoric.{a}" for a in archs])


def _exponents_differ(n, x):
    archs = _archs(n, f"{x}.alpha.")
    resnet, vit = _arch_named(archs, "resnet"), _arch_named(archs, "vit")
    if resnet is None or vit is None:
        raise Missing(f"{x}.alpha.<resnet> and {x}.alpha.<vit>")
    d = difference(n, f"{x}.alpha.{resnet}", f"{x}.alpha.{vit}")
    return (f"alpha {resnet} - alpha {vit} = {d.text()}", d.ci_text(), _sided(d.side(0.0), +1), list(d.keys))


def _soft_beats_hard(n, x):
    sizes = sorted(_archs(n, f"{x}.gain."), key=lambda s: float(s.lstrip("N")) if s.lstrip("N").isdigit() else math.inf)
    if not sizes:
        raise Missing(f"{x}.gain.N<size>")
    gains = {s: estimate(n, f"{x}.gain.{s}") for s in sizes}
    sides = [g.side(0.0) for g in gains.values()]
    half = len(sides) / 2
    verdict = ("supported" if sides.count(1) > half else "contradicted" if sides.count(-1) >= half
               else "unresolved")
    unit = n[f"{x}.gain.{sizes[0]}"].get("unit", "")
    return ("; ".join(f"{s}: {g.text()}" for s, g in gains.items()) + f" (soft - hard test accuracy, {unit})",
            "; ".join(f"{s} {g.ci_text()}" for s, g in gains.items()), verdict, [f"{x}.gain.{s}" for s in sizes])


def _soft_calibration(n, x):
    e = estimate(n, f"{x}.ece_soft_max_n")
    return (f"ECE {e.text()}", e.ci_text(), _sided(e.side(NEAR_PERFECT_ECE), -1), list(e.keys))


def _ece_rate(n, x):
    archs = [a for a in _archs(n, f"{x}.ece_alpha.") if f"{x}.alpha.{a}" in n]
    if not archs:
        raise Missing(f"{x}.ece_alpha.<arch> and {x}.alpha.<arch>")
    diffs = {a: difference(n, f"{x}.ece_alpha.{a}", f"{x}.alpha.{a}") for a in archs}
    differ = any(d.side(0.0) != 0 for d in diffs.values())
    same = all(d.half is not None and -SAME_RATE_MARGIN < d.lo and d.hi < SAME_RATE_MARGIN for d in diffs.values())
    verdict = "supported" if differ else "contradicted" if same else "unresolved"
    return ("; ".join(f"{a}: {d.text()}" for a, d in diffs.items()) + " (alpha_ECE - alpha_KL)",
            "; ".join(f"{a} {d.ci_text()}" for a, d in diffs.items()), verdict,
            [k for d in diffs.values() for k in d.keys])


def _shift_type(n, x):
    r = estimate(n, f"{x}.r2_drop_vs_exact_kl")
    verdict = "supported" if r.value < R2_LOW else "contradicted" if r.value > R2_HIGH else "unresolved"
    return f"R^2 {r.text()}", r.ci_text(), verdict, list(r.keys)


def _active(n, x):
    archs = _archs(n, f"{x}.gain_ratio.")
    arch = _arch_named(archs, "resnet") or (archs[0] if archs else None)
    if arch is None:
        raise Missing(f"{x}.gain_ratio.<arch>")
    ratio, fewer = estimate(n, f"{x}.gain_ratio.{arch}"), estimate(n, f"{x}.fewer_labels.{arch}")
    parts = [_sided(ratio.side(1.0), +1), _sided(fewer.side(0.0), +1)]
    verdict = ("contradicted" if "contradicted" in parts else "supported" if parts == ["supported"] * 2
               else "unresolved")
    return (f"{arch}: gain ratio {ratio.text()}x, {100 * fewer.value:.3g}% fewer labels",
            f"ratio {ratio.ci_text()}; fewer labels {fewer.ci_text()}", verdict, [*ratio.keys, *fewer.keys])


def _bayes_bound(n, x):
    archs = _archs(n, f"{x}.accuracy_max_n.")
    if not archs:
        raise Missing(f"{x}.accuracy_max_n.<arch>")
    bayes = estimate(n, f"{x}.test_bayes_accuracy")
    gains = {a: difference(n, f"{x}.accuracy_max_n.{a}", f"{x}.accuracy_min_n.{a}") for a in archs}
    above = {a: difference(n, f"{x}.accuracy_max_n.{a}", f"{x}.test_bayes_accuracy") for a in archs}
    if any(d.side(0.0) == 1 for d in above.values()) or any(g.side(0.0) == -1 for g in gains.values()):
        verdict = "contradicted"
    elif all(g.side(0.0) == 1 for g in gains.values()):
        verdict = "supported"
    else:
        verdict = "unresolved"
    return ("; ".join(f"{a}: gap to Bayes {-above[a].value:.3g} at N_max, accuracy gain {gains[a].text()}"
                      for a in archs) + f" (Bayes accuracy {bayes.text()})",
            "; ".join(f"{a} gain {g.ci_text()}" for a, g in gains.items()), verdict,
            [*bayes.keys, *(k for g in gains.values() for k in g.keys)])


def _learner_gap(n, x):
    worlds = _archs(n, f"{x}.gap.")
    if len(worlds) < 2:
        raise Missing(f"{x}.gap.<world> for two worlds")
    tau = {w: estimate(n, f"{x}.base_temperature.{w}").value for w in worlds}
    worlds.sort(key=lambda w: (tau[w], w))
    gaps = {w: estimate(n, f"{x}.gap.{w}") for w in worlds}
    d = difference(n, f"{x}.gap.{worlds[-1]}", f"{x}.gap.{worlds[0]}")
    return ("; ".join(f"tau {tau[w]:g}: gap {g.text()}" for w, g in gaps.items())
            + f"; gap(tau {tau[worlds[-1]]:g}) - gap(tau {tau[worlds[0]]:g}) = {d.text()} (error fractions)",
            "; ".join(f"tau {tau[w]:g} {g.ci_text()}" for w, g in gaps.items()) + f"; difference {d.ci_text()}",
            _sided(d.side(0.0), +1), [*(f"{x}.gap.{w}" for w in worlds), *(f"{x}.base_temperature.{w}" for w in worlds)])


@dataclass(frozen=True)
class Finding:
    id: str
    kind: str  # the experiment kind whose numbers it reads
    finding: str
    paper: str
    rule: str
    judge: Callable[[Mapping, str], tuple[str, str, str, list[str]]]


_CI = "95% CI (value ± t(0.975, seeds - 1) SE over seeds; 1.96 SE for a Monte Carlo SE)"

FINDINGS: tuple[Finding, ...] = (
    Finding("power_law", "scaling", "epistemic KL follows a power law in N while total loss flattens",
            "KL ~ N^-alpha, alpha > 0; total = floor + KL flattens at the floor",
            f"supported if every architecture's {_CI} of alpha lies above 0 and the aleatoric floor's above 0 "
            "(total = floor + KL then flattens at the floor); contradicted if any lies below 0; else unresolved",
            _power_law),
    Finding("same_floor", "scaling", "the aleatoric floor is the same for every architecture",
            "one floor E[H(p)] for all architectures",
            "supported if the 95% CI (Monte Carlo se over the test set) of every pairwise difference of the "
            "architectures' floors contains 0; contradicted if one excludes 0", _same_floor),
    Finding("exponents_differ", "scaling", "architectures differ in their exponents (ResNet clean, ViT stalls at "
            "small N)", "alpha_ResNet > alpha_ViT",
            f"supported if the {_CI} of alpha_ResNet - alpha_ViT lies above 0; contradicted if below 0; else "
            "unresolved", _exponents_differ),
    Finding("soft_labels", "labels", "soft labels beat hard at most N", "soft > hard at most N",
            f"per N, the {_CI} of the paired accuracy gain (soft - hard): supported if it lies above 0 at more "
            "than half of the sizes; contradicted if below 0 at half or more; else unresolved", _soft_beats_hard),
    Finding("soft_calibration", "labels", "soft labels give near-perfect calibration", "ECE ~0.018",
            f"supported if the {_CI} of the soft-label ECE at the largest N lies below {NEAR_PERFECT_ECE}; "
            f"contradicted if above {NEAR_PERFECT_ECE}; else unresolved", _soft_calibration),
    Finding("ece_rate", "scaling", "ECE falls with N at a different rate than the epistemic KL",
            "alpha_ECE != alpha_KL",
            f"per architecture, the {_CI} of alpha_ECE - alpha_KL: supported if one excludes 0; contradicted if "
            f"every one lies within ±{SAME_RATE_MARGIN}; else unresolved", _ece_rate),
    Finding("shift_type", "shift", "shift type matters more than magnitude",
            "R^2 of the accuracy drop on KL across types 0.042",
            f"R^2 of the accuracy drop on the exact KL across shift types (one fit, no interval): supported if "
            f"< {R2_LOW}; contradicted if > {R2_HIGH}; else unresolved", _shift_type),
    Finding("active_learning", "active", "max epistemic gains 1.6x what max entropy gains and needs 47.8% fewer "
            "labels", "gain ratio 1.6x; 47.8% fewer labels",
            f"supported if the {_CI} of the gain ratio lies above 1 and that of the fraction of fewer labels above "
            "0; contradicted if either lies on the other side; else unresolved", _active),
    Finding("bayes_bound", "scaling", "classifiers approach the Bayes bound",
            "accuracy rises towards the Bayes accuracy",
            f"supported if every architecture's {_CI} of accuracy(N_max) - accuracy(N_min) lies above 0; "
            "contradicted if one lies below 0 or an accuracy's CI lies above the Bayes accuracy; else unresolved",
            _bayes_bound),
    Finding("learner_bayes_gap", "difficulty", "a learner comes close to the Bayes error on easy worlds and falls "
            "further behind it as tau makes the world harder (Theisen et al., Figure 3)",
            "test error near the Bayes error at small tau; the gap grows with tau",
            f"the gap = test error - Bayes error of the same test rows per world, {_CI}: supported if the CI of "
            "gap(largest tau) - gap(smallest tau) lies above 0; contradicted if below 0; else unresolved",
            _learner_gap),
)


def claims(numbers: Mapping[str, Mapping], experiments: Mapping[str, Mapping]) -> list[dict]:
    """One row per finding of `FINDINGS` (module docstring), in that order.

    numbers: numbers.json's dict ("<experiment>.<name>" -> entry); experiments: the config's
    ``experiments`` (name -> spec with ``kind``). A kind run by several experiments is judged
    on the first in the config's order.
    """
    by_kind: dict[str, str] = {}
    for name, spec in experiments.items():
        by_kind.setdefault(spec["kind"], name)
    rows = []
    for f in FINDINGS:
        row = {"id": f.id, "finding": f.finding, "paper": f.paper, "this run": "", "uncertainty": "",
               "rule": f.rule, "verdict": "not run", "numbers": ""}
        exp = by_kind.get(f.kind)
        if exp is None:
            row["this run"] = f"no {f.kind} experiment in the config"
        else:
            try:
                value, unc, verdict, keys = f.judge(numbers, exp)
                row.update({"this run": value, "uncertainty": unc, "verdict": verdict, "numbers": " ".join(keys)})
            except Missing as m:
                row.update({"this run": f"missing number {m.args[0]}", "verdict": "unresolved"})
        rows.append(row)
    return rows
