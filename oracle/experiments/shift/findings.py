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
        return change_finding(conf)
    if name == "shift_axes":
        return type_finding(conf)
    return ""


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
