"""Experiment kind ``shift``: the finding sentence of each artifact's caption, computed from
the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from oracle.experiments.shift import report
from oracle.report.captions import error_bar_note, num, paper_says


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.shift.ARTIFACTS`); "" for one that
    only shows data."""
    conf = data["configurations"]
    if name == "shift_panels":
        return f"{fit_finding(conf)} {type_finding(conf)} {error_bar_note(data['runs'], '(a)-(d)', ('arch', 'seed'))}"
    if name == "shift_accuracy":
        return f"{change_finding(conf)} {adjusted_finding(conf)}".strip()
    if name == "shift_axes":
        return f"{type_finding(conf)} {noise_finding(conf)}".strip()
    if name == "shift_configurations":
        return prior_finding(conf, spec)
    return ""


def _has(conf: pd.DataFrame, *columns: str) -> bool:
    """Whether `conf` has `columns` (data collected before they existed lack them)."""
    return all(c in conf for c in columns)


def prior_finding(conf: pd.DataFrame, spec: Mapping) -> str:
    """The smallest class's rows (over the configurations with recorded counts) and the largest
    exact Bayes cost of a training prior on the baseline test rows."""
    if not _has(conf, "bayes_cost_pp", "smallest_class_rows_min"):
        return ""
    counted = conf["smallest_class_rows_min"].astype(float)
    lo = conf.loc[counted.idxmin()] if counted.notna().any() else None
    worst = conf.loc[conf["bayes_cost_pp"].astype(float).idxmax()]
    rows = ""
    if lo is not None:
        a, b = f"{lo['smallest_class_rows_min']:.0f}", f"{lo['smallest_class_rows_max']:.0f}"
        rows = (f"the smallest class has {a if a == b else f'{a} to {b}'} of the N = {int(spec['size'])} rows "
                f"({lo['label']}; before the {100 * float(spec['val_fraction']):.0f}% validation split); ")
    cost = ("is 0 for every configuration" if worst["bayes_cost_pp"] == 0 else
            f"is at most {worst['bayes_cost_pp']:.2f} ± {worst['bayes_cost_se_pp']:.2f} pp (SE over the rows; "
            f"{worst['label']})")
    return (f"This run: {rows}the exact Bayes cost of a training prior on the baseline test rows (the world's Bayes "
            f"rule under that prior against its own, in expectation over the labels) {cost}.")


def adjusted_finding(conf: pd.DataFrame) -> str:
    """Per prior-shifted configuration: the change from the baseline raw, logit-adjusted
    (argmax of log q - log pi_train + log pi_world) and the Bayes cost of its prior (pp)."""
    if not _has(conf, "delta_adjusted_pp", "bayes_cost_pp"):
        return ""
    prior = conf[conf["shift_type"].isin(["prior", "prior+noise"])]
    if prior.empty:
        return ""
    parts = "; ".join(f"{r['label']} {r['delta_pp']:+.2f} raw, {r['delta_adjusted_pp']:+.2f} adjusted, Bayes cost of "
                      f"its prior {r['bayes_cost_pp']:.2f}" for _, r in prior.iterrows())
    return (f"Change from the baseline (pp) with the training prior taken back out of the logits (log q - log pi_train "
            f"+ log pi_world): {parts}.")


def noise_finding(conf: pd.DataFrame) -> str:
    """Per noise-only configuration: the learner's change on the clean test rows beside what the
    noise costs the oracle's own accuracy at x' (from its Bayes accuracy on the clean rows),
    then the paper's."""
    noise = conf[conf["shift_type"] == "noise"].sort_values("noise_std", kind="stable")
    if noise.empty or not noise["oracle_acc_noisy"].notna().any():
        return ""
    parts = "; ".join(
        f"sigma {r['noise_std']:g}: the learner trained on x' {r['delta_pp']:+.2f} pp on clean rows, the oracle's own "
        f"accuracy on x' {100 * r['oracle_acc_noisy']:.1f}% against {100 * r['bayes_accuracy']:.1f}% on x"
        for _, r in noise.iterrows())
    return (f"This run, noise at training time only (the test rows stay clean): {parts}. "
            f"The paper: {paper_says('shift_type')}.")


def fit_finding(conf: pd.DataFrame) -> str:
    """R^2 of the linear fits of the accuracy drop against KL_y and the exact KL
    (`report.drop_fits`, the fits of panel f), beside the paper's."""
    fits = report.drop_fits(conf)
    y, e = fits["kl_y"], fits["exact"]
    return (f"This run: R^2 of the accuracy drop against KL_y {num(y['r2'])} ({y['n']} configurations), against "
            f"the exact KL {num(e['r2'])} ({e['n']} configurations). The paper: {paper_says('shift_type')}.")


def type_finding(conf: pd.DataFrame) -> str:
    """The mean accuracy drop (pp) per shift type, and the largest drop of each, ordered from
    the most costly type."""
    shifted = conf[conf["shift_type"] != "baseline"]
    if shifted.empty:
        return ""
    drop = -shifted["delta_pp"].astype(float)
    by_type = drop.groupby(shifted["shift_type"]).agg(["mean", "max"]).sort_values("mean", ascending=False)
    parts = "; ".join(f"{t} {num(r['mean'])} pp (largest {num(r['max'])})" for t, r in by_type.iterrows())
    return f"Mean accuracy drop from the baseline per shift type: {parts}."


def change_finding(conf: pd.DataFrame) -> str:
    """The configurations with the largest and smallest change from the baseline (pp)."""
    shifted = conf[conf["shift_type"] != "baseline"]
    if shifted.empty:
        return ""
    lo, hi = shifted.loc[shifted["delta_pp"].idxmin()], shifted.loc[shifted["delta_pp"].idxmax()]
    return (f"This run: the change from the baseline runs from {lo['delta_pp']:+.3g} pp ({lo['label']}) to "
            f"{hi['delta_pp']:+.3g} pp ({hi['label']}).")
