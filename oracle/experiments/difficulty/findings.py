"""Experiment kind ``difficulty``: the finding sentence of each artifact's caption, computed
from the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from oracle.report.captions import error_bar_note, num, span
from oracle.report.claims import BAYES_GAP_PP


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.difficulty.ARTIFACTS`): how the
    Bayes error moves with tau (the curve, over all of each world's samples), or for the
    learner's table and figure how its gap to the Bayes error of its own test rows moves."""
    if name == "learner_vs_bayes_curve":
        bars = error_bar_note(data["learner"], what="mean ± SE") if len(data["learner"]) else ""
        return f"{learner_finding(data['learner'], spec)} {bars}".strip()
    if name == "learner_vs_bayes":
        return learner_finding(data["learner"], spec)
    c = data["curve"].sort_values("base_temperature", kind="stable")
    if len(c) < 2:
        return ""
    err = 100 * c["bayes_error"].to_numpy(float)
    tau = c["base_temperature"].to_numpy(float)
    rises = bool((np.diff(err) > 0).all())
    return (f"This run: the Bayes error goes from {num(err[0])}% at tau={tau[0]:g} to {num(err[-1])}% at "
            f"tau={tau[-1]:g}; it {'rises at every step' if rises else 'does not rise at every step'} of tau.")


def learner_finding(learner: pd.DataFrame, spec: Mapping) -> str:
    """From the learner's own rows (what its table and figure show): the Bayes error of the
    test rows it was scored on, its test error and the gap between them (pp, mean ± SE over
    seeds and the shared test rows) at the smallest and largest tau, whether the gap widens at
    every step of tau, and how far from chance to the Bayes accuracy it gets at the smallest
    tau; the Bayes-error-of-flows seed's finding beside it. "" without a learner."""
    from oracle.experiments.difficulty.report import learner_summary
    from oracle.report.captions import paper_says

    if learner.empty:
        return ""
    s = learner_summary(learner)
    lo, hi = s.iloc[0], s.iloc[-1]
    arch = (spec.get("arch_labels") or {}).get(lo["arch"], lo["arch"])

    def pp(row, col):
        se = row[f"{col}_se"]
        return f"{num(100 * row[col])}" + ("" if not np.isfinite(se) else f" ± {num(100 * se, 2)}")

    n_test = span(s["n_test"].astype(float), digits=6)
    text = (f"This run ({arch}, N={int(lo['N'])}, {int(lo['n_seeds'])} seeds; the Bayes error of the test rows it "
            f"was scored on, {n_test} per world): Bayes error {num(100 * lo['bayes_error'])}% at "
            f"tau={lo['base_temperature']:g} to {num(100 * hi['bayes_error'])}% at tau={hi['base_temperature']:g}, "
            f"test error {pp(lo, 'test_error')}% to {pp(hi, 'test_error')}%")
    if len(s) < 2:
        return text + "."
    gaps = 100 * s["gap"].to_numpy(float)
    widens = bool((np.diff(gaps) > 0).all())
    near = "within" if 100 * lo["gap"] <= BAYES_GAP_PP else "beyond"
    return (f"{text}; the gap (test error - Bayes error) goes from {pp(lo, 'gap')} pp to {pp(hi, 'gap')} pp and "
            f"{'widens at every step' if widens else 'does not widen at every step'} of tau; at "
            f"tau={lo['base_temperature']:g} the learner is {near} the {BAYES_GAP_PP:g} pp the claims read as close "
            f"(the paper's \"within 2-3%\"). The seed (Theisen et al.): {paper_says('learner_bayes_gap')}.")
