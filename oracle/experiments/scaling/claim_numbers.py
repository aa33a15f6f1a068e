"""Experiment kind ``scaling``: the numbers `oracle.report.claims` judges section 4.1's findings on
(`claim_numbers`), beside the table and figure numbers of `oracle.experiments.scaling.report`.
Reporting half only (numpy, pandas)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from oracle.experiments._pairs import over_seeds_and_rows, pair_rows
from oracle.experiments.scaling.contrasts import low_data_drops
from oracle.experiments.scaling.learners import curvature_entry
from oracle.measures.power_laws import aggregate_over_seeds, fit_power_law_offset
from oracle.report.numbers import entry, mean_spread, scale_spread


def claim_numbers(runs: pd.DataFrame, fits: pd.DataFrame, pairs: pd.DataFrame, spec: Mapping, path: str,
                  pairs_path: str) -> dict[str, dict]:
    """The numbers `oracle.report.claims` judges the section's findings on (every seed of an
    architecture is scored on the same test rows, so spreads of one N hold the test rows' error
    too: `over_seeds_and_rows`):

    * ``num_classes``; ``label_check``: E[-log p(y|x) - H(p(y|x))] over the test rows (0 when the
      labels are drawn from p; nats, SE over the test set); ``n_classifiers`` and
      ``nll_regret_min``: the smallest E[log p(y|x) - log q(y|x)] over the classifiers (each an
      unbiased estimate of its KL >= 0 when the labels are drawn from p), the one whose 95%
      interval reaches lowest;
    * per architecture: ``kl_r2``/``ece_r2`` (mean per-seed R^2 of the log-log fits), ``ece_curvature``
      (the ECE's log-log curvature, as ``curvature`` is the KL's); ``total_drop_last`` (the seed-mean total
      cross-entropy's relative drop per doubling of N over the last step of N) and
      ``kl_fall_last`` (KL(N_prev) - KL(N_last) per seed, paired per test row: `pairs`, read from
      `pairs_path`; nats); ``log_kl_drop_low``
      (ln KL(N_min) / KL(N_mid) per seed, N_mid the middle size: the low-data half);
      ``total_asymptote`` (c of L(N) = a N^-b + c fitted per seed to the total alone, nats).
    """
    out: dict[str, dict] = {}
    if "num_classes" in runs:
        out["num_classes"] = entry(int(runs["num_classes"].iloc[0]), "classes", path, "K, classes of the world")
    if "oracle_nll_minus_floor" in runs:
        first = runs.iloc[0]
        out["label_check"] = entry(float(first["oracle_nll_minus_floor"]), "nats", path, (
            "E[-log p(y|x) - H(p(y|x))] over the test rows: the labels' cross-entropy under the exact posterior minus "
            "the aleatoric floor (0 in expectation when the labels are drawn from p)"),
            se=float(first["oracle_nll_minus_floor_se"]), se_over="test set")
        lo = runs["nll_regret"] - 1.96 * runs["nll_regret_se"]
        worst = runs.loc[lo.idxmin()]
        out["n_classifiers"] = entry(int(len(runs)), "classifiers", path, "classifiers scored on the test set")
        out["nll_regret_min"] = entry(float(worst["nll_regret"]), "nats", path, (
            f"E[log p(y|x) - log q(y|x)] at the labels of the classifier whose interval reaches lowest "
            f"({spec['arch_labels'].get(worst['arch'], worst['arch'])}, N={int(worst['N'])}, seed {int(worst['seed'])}); "
            "an unbiased estimate of its epistemic KL >= 0"), se=float(worst["nll_regret_se"]), se_over="test set")
    sizes = sorted(int(n) for n in runs["N"].unique())
    for arch in spec["archs"]:
        sub = runs[runs["arch"] == arch]
        if sub.empty:
            continue
        label = spec["arch_labels"][arch]
        for value, key in (("epistemic", "kl_r2"), ("ece", "ece_r2")):
            r = arch_fit(fits, arch, value)
            if r is not None and np.isfinite(r.get("r2", np.nan)):
                out[f"{key}.{arch}"] = entry(float(r["r2"]), "1", path, (
                    f"{label}: R^2 of the log-log power-law fit of the {'epistemic KL' if value == 'epistemic' else 'ECE'}"
                    " against N, mean over per-seed fits"))
        # the KL's curvature is the learners' (`learner_numbers`); the ECE's sits beside its R^2
        ece_bend = curvature_entry(arch_fit(fits, arch, "ece"), label, "ECE", path)
        if ece_bend is not None:
            out[f"ece_curvature.{arch}"] = ece_bend
        arch_sizes = sorted(int(n) for n in sub["N"].unique())
        hi = arch_sizes[-1]
        if len(arch_sizes) < 2 or "total" not in sub:
            continue
        prev = arch_sizes[-2]
        agg = aggregate_over_seeds(sub, ["total"], ["N"]).set_index("N")["total_mean"]
        doublings = math.log2(hi / prev)
        drop = 1.0 - (agg[hi] / agg[prev]) ** (1.0 / doublings)
        cell = {int(n): c for n, c in zip(sub["N"], sub["cell"])}
        fall = pair_rows(pairs, "epistemic", cell[prev], cell[hi], arch)
        spread: dict[str, Any] = {}
        if len(fall) >= 2:
            spread = over_seeds_and_rows(fall, "diff", int(fall["n_rows"].iloc[0]))
            out[f"kl_fall_last.{arch}"] = entry(unit="nats", artifact=pairs_path, description=(
                f"{label}: epistemic KL at N={prev} minus at N={hi}, mean over seeds of the difference paired per "
                "test row (SE over seeds and test rows, the rows' part paired per row)"), **spread)
            # the totals share the floor's test rows, so their fall is the KL's: the drop's spread is the
            # fall's through d drop / d fall (delta method)
            slope = (agg[hi] / agg[prev]) ** (1.0 / doublings - 1.0) / (doublings * agg[prev])
            spread = {k: v for k, v in scale_spread(spread, slope).items() if k != "value"}
        out[f"total_drop_last.{arch}"] = entry(drop, "fraction", pairs_path if spread else path, (
            f"{label}: relative drop of the seed-mean total cross-entropy per doubling of N from N={prev} to N={hi}"
            + (" (its SE the KL fall's, the totals' fall being the KL's on the same test rows)" if spread else "")),
            **spread)
        drops, grid = low_data_drops(sub)
        if arch in drops:
            out[f"log_kl_drop_low.{arch}"] = entry(unit="1", artifact=path, description=(
                f"{label}: ln KL(N={grid[arch][0]}) / KL(N={grid[arch][1]}) per seed, mean over seeds (the low-data "
                "half of the N grid)"), **_seed_spread(drops[arch].to_numpy(float)))
        if len(arch_sizes) >= 3:
            cs = [fit_power_law_offset(g["N"], g["total"])["c"] for _, g in sub.groupby("seed")]
            out[f"total_asymptote.{arch}"] = entry(unit="nats", artifact=path, description=(
                f"{label}: asymptote c of L(N) = a N^-b + c fitted to the total cross-entropy alone (no oracle), "
                "per seed, mean over seeds"), **_seed_spread(np.asarray(cs, float)))
    return out


def _seed_spread(values: np.ndarray) -> dict[str, Any]:
    """Mean of per-seed values with std and SE over seeds (`mean_spread`), NaN seeds left out."""
    v = values[np.isfinite(values)]
    if not v.size:
        return {"value": None}
    return {"value": float(v.mean()), **mean_spread(float(np.std(v, ddof=1)) if v.size > 1 else None, int(v.size))}


def arch_fit(fits: pd.DataFrame, arch: str, value: str) -> pd.Series | None:
    """The ``kind="arch"`` fit of `value` for `arch`, None when it is missing or not finite."""
    if fits.empty or "alpha" not in fits:
        return None
    rows = fits[(fits["kind"] == "arch") & (fits["arch"] == arch) & (fits["value"] == value)]
    return rows.iloc[0] if len(rows) and np.isfinite(rows.iloc[0]["alpha"]) else None
