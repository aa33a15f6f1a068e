"""Experiment kind ``scaling``: what its learners say of their recipe (README "How the learners
are trained"): the ``learners`` table per cell and the numbers per architecture."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from oracle.errors import DataError
from oracle.report.numbers import converged_entry, entry, mean_spread

CELL_HEADERS = {"arch": "Architecture", "labels": "Labels"}


def learners_table(df: pd.DataFrame, cell: Sequence[str]) -> pd.DataFrame:
    """One row per cell (the columns `cell`, e.g. arch and N): how its classifiers trained and
    how calibrated they came out, means over seeds: ``Converged`` (k/n by the stopping rule),
    ``Stopped by rule`` (k/n), ``Steps`` (optimizer steps of the weights kept), ``Epistemic KL
    (nats)``, ``Overconf. truth`` (mean confidence - mean p(argmax q|x)), ``True ECE``."""
    missing = [c for c in (*cell, "seed", "epistemic", "overconfidence_truth", "ece_posterior") if c not in df]
    if missing:
        raise DataError(f"runs lack column(s) {missing}; rerun the prediction jobs")
    rows = []
    for key, g in df.drop_duplicates(subset=[*cell, "seed"]).groupby(list(cell), sort=True):
        key = key if isinstance(key, tuple) else (key,)
        known = "converged" in g and g["converged"].notna().all()
        rows.append({**{CELL_HEADERS.get(c, c): v for c, v in zip(cell, key)}, "Seeds": len(g),
                     "Converged": f"{int(g['converged'].astype(bool).sum())}/{len(g)}" if known else "n/a",
                     "Stopped by rule": f"{int((g['stopped_by'] == 'patience').sum())}/{len(g)}" if known else "n/a",
                     "Steps": float(g["kept_steps"].mean()) if known else math.nan,
                     "Epistemic KL (nats)": float(g["epistemic"].mean()),
                     "Overconf. truth": float(g["overconfidence_truth"].mean()),
                     "True ECE": float(g["ece_posterior"].mean())})
    return pd.DataFrame(rows)


def curvature_entry(fit: pd.Series | None, label: str, what: str, fits_path: str) -> dict | None:
    """The log-log curvature of a fitted curve (`fit`: a ``kind="arch"`` row of the power-law
    fits, with ``curvature``, ``curvature_std`` and ``n_seeds``) as a numbers entry, mean ± std
    and SE over seeds (the claims' lack-of-fit test of a power law); None without a finite one."""
    if fit is None or not np.isfinite(fit.get("curvature", np.nan)):
        return None
    n = int(fit["n_seeds"])
    std = fit.get("curvature_std")
    return entry(float(fit["curvature"]), "1", fits_path, (
        f"{label}: curvature of ln {what} against ln N (coefficient of (ln N)^2 of a quadratic fit per seed), "
        "mean ± std over seeds; 0 on a power law"), **mean_spread(None if std is None else float(std), n))


def learner_numbers(sub: pd.DataFrame, fit: pd.Series | None, arch: str, label: str, runs_path: str,
                     fits_path: str) -> dict[str, dict]:
    """What an architecture's learners say of their recipe: the curvature of its KL curve in
    log-log (a step schedule tied to N bends it), how many converged, and how far from
    calibrated against the truth they are in the upper half of the grid of N. `sub`: the runs of
    architecture `arch`; `fit`: its row of the epistemic fits (`report.power_law_fits`, kind arch)."""
    out: dict[str, dict] = {}
    curvature = curvature_entry(fit, label, "KL", fits_path)
    if curvature is not None:
        out[f"curvature.{arch}"] = curvature
    one = sub.drop_duplicates(subset=["N", "seed"])
    converged = converged_entry(one, ("N", "seed"), label, runs_path)
    if converged is not None:
        out[f"converged.{arch}"] = converged
    upper = one[one["N"] >= float(np.median(sorted(one["N"].unique())))]
    if "overconfidence_truth" in upper and len(upper):
        out[f"abs_overconfidence_truth.{arch}"] = entry(
            float(upper["overconfidence_truth"].abs().mean()), "fraction", runs_path,
            f"{label}: mean |confidence - p(argmax q | x)| per classifier at N >= {int(upper['N'].min())} (the upper "
            f"half of the grid), over {len(upper)} classifiers")
    return out
