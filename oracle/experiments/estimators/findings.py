"""Experiment kind ``estimators``: the finding sentence of each artifact's caption, computed
from the data the artifact is drawn from (`oracle.report.captions`)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from oracle.experiments.estimators import report
from oracle.report.captions import num


def findings(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> str:
    """The finding of artifact `name` (`oracle.experiments.estimators.ARTIFACTS`); "" for one
    that only shows data."""
    if name in ("estimator_scores", "estimates_vs_accuracy"):
        return ranking_finding(report.table("estimator_scores", data, spec))
    return ""


def ranking_finding(scores: pd.DataFrame) -> str:
    """The estimators with the highest and lowest R^2 against the true accuracy (the
    estimator_scores frame)."""
    r2 = scores.set_index("Method")["R²"].astype(float).dropna()
    if r2.empty:
        return ""
    best, worst = r2.idxmax(), r2.idxmin()
    return (f"This run: highest R^2 against the true accuracy {best} {num(r2[best])}, lowest {worst} "
            f"{num(r2[worst])} (means over models).")
