"""Experiment kind ``scaling``: the finding sentence of each artifact's caption, computed from
the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from oracle.experiments._calibration import findings as _calibration_findings
from oracle.experiments._pairs import over_seeds_and_rows, pair_rows
from oracle.experiments.scaling import report
from oracle.measures.power_laws import aggregate_over_seeds, fit_per_seed
from oracle.report.captions import convergence_finding, count_of, error_bar_note, num, paper_says, span
from oracle.report.claim_margins import PAPER_ROWS_PER_CLASS, PLATEAU_DROP
from oracle.report.intervals import estimate, straightness
from oracle.report.numbers import mean_spread


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.scaling.ARTIFACTS`); "" for one that
    only shows data."""
    runs = report.select_runs(data["runs"], spec["arch_labels"])
    if name == "accuracy_vs_bayes":
        return f"{bayes_gap_finding(report.table(name, data, spec), runs)} {convergence_finding(runs)}".strip()
    if name == "epistemic_vs_n":
        return (f"{epistemic_finding(report.table(name, data, spec), data['runs'], data.get('pairs'), spec['arch_labels'])} "
                f"{convergence_finding(runs)}").strip()
    if name == "learners":
        return convergence_finding(runs)
    if name == "scaling_panels":
        return " ".join((plateau_finding(runs), exponent_finding(runs, "epistemic", "epistemic KL"),
                         bayes_gap_finding(report.accuracy_vs_bayes(runs), runs, lead=""),
                         error_bar_note(runs, "(a)-(c)")))
    if name == "epistemic_curves":
        return f"{exponent_finding(runs, 'epistemic', 'epistemic KL')} {error_bar_note(runs)}".strip()
    if name == "calibration_vs_n":
        return f"{ece_rate_finding(runs)} {error_bar_note(runs)}".strip()
    if name == "calibration_agreement":
        return f"{_calibration_findings.agreement_finding(runs)} {error_bar_note(runs, '(b)')}".strip()
    return ""


def bayes_gap_finding(frame: pd.DataFrame, runs: pd.DataFrame, lead: str = "This run: ") -> str:
    """The gap to the Bayes-optimal accuracy at the largest N (the accuracy_vs_bayes frame) and
    how much accuracy rose from the smallest N."""
    gaps = dict(zip(frame["Architecture"], frame["Gap (%)"].astype(float)))
    closest = min(gaps, key=gaps.get)
    agg = aggregate_over_seeds(runs, ["acc"], ["arch", "N"])
    rise = {}
    for arch, a in agg.groupby("arch"):
        a = a.sort_values("N")
        if len(a) >= 2:
            rise[arch] = 100.0 * (a["acc_mean"].iloc[-1] - a["acc_mean"].iloc[0])
    size = int(frame["N"].max())
    k = int(runs["num_classes"].iloc[0]) if "num_classes" in runs and len(runs) else None
    scale = (f"N = {size:,} ({size / k:,.0f} training rows a class; the paper's Table 1: 50,000 samples of 3 classes, "
             f"{PAPER_ROWS_PER_CLASS:,.0f} a class)" if k else f"N = {size:,}")
    text = (f"{lead}{'at' if lead else 'At'} {scale} the Bayes-optimal accuracy minus the test accuracy is "
            f"{span(gaps.values())} percentage points (smallest: {closest}, {num(gaps[closest])} pp)")
    if rise:
        text += (f"; from the smallest to the largest N the accuracy changed by {span(rise.values())} pp (it rose "
                 f"for {count_of(sum(v > 0 for v in rise.values()), len(rise), 'architectures')})")
    return text + f". The paper: {paper_says('bayes_bound')}."


def epistemic_finding(frame: pd.DataFrame, runs: pd.DataFrame | None = None, pairs: pd.DataFrame | None = None,
                      labels: Mapping[str, str] | None = None) -> str:
    """How much the seed-mean epistemic KL fell from the smallest to the largest N (the
    epistemic_vs_n frame), and for how many architectures it fell at every step: a step counts as a
    fall only where the 95% interval of KL(N) - KL(N_next), paired per test row over the seeds
    (`pairs`), lies above 0; without the pairs, no step is called a fall."""
    n = frame["Dataset size N"]
    factors = {}
    for arch in frame.columns[1:]:
        if arch.endswith(" std"):  # the spread columns beside each architecture's mean
            continue
        col = frame[arch].astype(float)
        ok = col.notna()
        if ok.sum() < 2:
            continue
        v = col[ok].to_numpy()
        factors[arch] = v[0] / v[-1]
    if not factors:
        return ""
    falls = step_falls(runs, pairs, labels or {}) if runs is not None and pairs is not None else {}
    every = [a for a, steps in falls.items() if a in factors and steps and all(side == 1 for _, side in steps)]
    unclear = {a: [step for step, side in steps if side != 1] for a, steps in falls.items() if a in factors and a not in every}
    text = (f"This run: the epistemic KL at N={int(n.min())} is {span(factors.values())} times that at "
            f"N={int(n.max())}; it fell at every step of N (each step's 95% interval, paired per test row, above 0) "
            f"for {count_of(len(every), len(factors), 'architectures')}")
    if unclear:
        text += "; no clear fall at " + "; ".join(f"{a} {', '.join(s)}" for a, s in unclear.items() if s)
    return text + "."


def step_falls(runs: pd.DataFrame, pairs: pd.DataFrame, labels: Mapping[str, str]) -> dict[str, list[tuple[str, int]]]:
    """Per architecture of `labels` (by its label; `runs` with the config's names), each step of N
    as ("N1 -> N2", side): +1 where the 95% interval
    of KL(N1) - KL(N2) over the seeds, paired per test row (`oracle.report.numbers.over_seeds_and_rows`
    of the pairs' ``diff``), lies above 0, -1 below, 0 across it or without two seeds."""
    out: dict[str, list[tuple[str, int]]] = {}
    for arch, sub in runs[runs["arch"].isin(list(labels))].groupby("arch", sort=False):
        cells = sub.drop_duplicates("N").sort_values("N")
        steps = []
        for (n1, c1), (n2, c2) in zip(zip(cells["N"], cells["cell"]), list(zip(cells["N"], cells["cell"]))[1:]):
            fall = pair_rows(pairs, "epistemic", c1, c2, arch)
            side = 0
            if len(fall) >= 2:
                e = over_seeds_and_rows(fall, "diff", int(fall["n_rows"].iloc[0]))
                side = estimate({"fall": e}, "fall").side(0.0)
            steps.append((f"N={int(n1)} -> {int(n2)}", side))
        out[labels.get(arch, arch)] = steps
    return out


def plateau_finding(runs: pd.DataFrame) -> str:
    """Whether the total cross-entropy flattened: its relative drop per doubling of N over the
    last step of N (seed means) against the claims' `PLATEAU_DROP`, and its distance from the
    aleatoric floor."""
    agg = aggregate_over_seeds(runs, ["total"], ["arch", "N"])
    floor = float(runs["aleatoric"].mean())
    drops, over_floor, steps = {}, {}, set()
    for arch, a in agg.groupby("arch"):
        a = a.sort_values("N")
        if len(a) < 2:
            continue
        last, prev = a["total_mean"].iloc[-1], a["total_mean"].iloc[-2]
        doublings = np.log2(a["N"].iloc[-1] / a["N"].iloc[-2])
        drops[arch] = 1.0 - (last / prev) ** (1.0 / doublings)
        over_floor[arch] = last / floor if floor > 0 else float("nan")
        steps.add((int(a["N"].iloc[-2]), int(a["N"].iloc[-1])))
    if not drops:
        return ""
    flat = sum(d < PLATEAU_DROP for d in drops.values())
    step = " / ".join(f"N={a} to {b}" for a, b in sorted(steps))
    verdict = ("it has flattened for every architecture" if flat == len(drops) else
               "it has not flattened" if flat == 0 else
               f"it has flattened for {count_of(flat, len(drops), 'architectures')}")
    return (f"This run: over the last step ({step}) the total cross-entropy dropped by "
            f"{span((100 * d for d in drops.values()), unit='%')} per doubling of N and stays {span(over_floor.values())} "
            f"times the aleatoric floor {num(floor)} nats: {verdict} (flattened: a drop below {100 * PLATEAU_DROP:g}% "
            "per doubling).")


def _fits(runs: pd.DataFrame, value: str) -> pd.DataFrame:
    """`fit_per_seed` of `value` per architecture (index arch), over the architectures the
    figures fit too: at least two N and every value positive."""
    ok = [a for a, sub in runs.groupby("arch") if sub["N"].nunique() >= 2 and bool((sub[value] > 0).all())]
    if not ok:
        return pd.DataFrame(columns=["alpha", "alpha_std"])
    return fit_per_seed(runs[runs["arch"].isin(ok)], value).set_index("arch")


def exponent_finding(runs: pd.DataFrame, value: str, what: str) -> str:
    """The power-law exponent of `value` per architecture, mean ± std over per-seed fits; at one N,
    that nothing is fitted (the caption's fits and alpha are not drawn)."""
    if runs["N"].nunique() == 1:
        return (f"One training-set size (N = {int(runs['N'].iloc[0]):,}): no power law is fitted, so the figure "
                f"draws no dashed fit and no alpha; it compares the architectures at that N.")
    fits = _fits(runs, value)
    if fits.empty:
        return ""
    parts = [f"{arch} {num(r['alpha'])}" + ("" if pd.isna(r["alpha_std"]) else f" ± {num(r['alpha_std'], 2)}")
             for arch, r in fits.iterrows()]
    positive = int((fits["alpha"] > 0).sum())
    return (f"Exponent alpha of the {what} (mean ± std over per-seed fits): {'; '.join(parts)}; alpha > 0 for "
            f"{count_of(positive, len(fits), 'architectures')}. The paper: {paper_says('power_law')}.")


def _straight(fit: pd.Series) -> int:
    """`oracle.report.intervals.straightness` of one fit row's curvature (mean, std and count over
    seeds): +1 straight, -1 bent, 0 unknown (one seed, or fewer than three N)."""
    if not np.isfinite(fit.get("curvature", np.nan)):
        return 0
    std = fit.get("curvature_std")
    e = {"value": float(fit["curvature"]), **mean_spread(None if std is None else float(std), int(fit["n_seeds"]))}
    return straightness(estimate({"curvature": e}, "curvature"))


def ece_rate_finding(runs: pd.DataFrame) -> str:
    """alpha_ECE - alpha_KL per architecture (means of per-seed fits), with the lack-of-fit test
    the claims use (`oracle.report.intervals.straightness`): where either curve bends on a log-log
    plot, or its bend has no interval, its exponent is no rate to compare."""
    kl_fits, ece_fits = _fits(runs, "epistemic"), _fits(runs, "ece")
    kl, ece = kl_fits["alpha"], ece_fits["alpha"]
    diffs = {a: float(ece[a] - kl[a]) for a in kl.index if a in ece.index}
    if not diffs:
        return ""
    parts = "; ".join(f"{a} {num(ece[a])} (R^2 {num(ece_fits.loc[a, 'r2'], 2)}) vs {num(kl[a])} "
                      f"(R^2 {num(kl_fits.loc[a, 'r2'], 2)})" for a in diffs)
    laws = [a for a in diffs if _straight(ece_fits.loc[a]) == 1 and _straight(kl_fits.loc[a]) == 1]
    note = (f"both are straight on a log-log plot (the 95% CI of the curvature over seeds contains 0) for "
            f"{count_of(len(laws), len(diffs), 'architectures')}"
            + ("" if len(laws) == len(diffs) else "; elsewhere a curve bends or its bend is unknown, and its exponent "
               "is no rate"))
    return (f"This run: alpha_ECE vs alpha_KL {parts} (difference {span(diffs.values())}); {note}. "
            f"The paper: {paper_says('ece_rate')}.")
