"""Calibration as every classifier-training kind reports it: against the labels a benchmark
would have, and against the truth only the oracle has (paper section 4.1 and appendix D; the
calibration seed's ECE, Brier and overconfidence gap).

Per classifier the metrics files hold (`oracle.classifiers.evaluate.evaluate_predictions`):
``ece`` (10 equal-width bins, top label, against the world's labels), ``ece_posterior`` (the
same bins with the 0/1 correctness replaced by p(yhat|x): the ECE with infinitely many
labels per input), ``calibration_pointwise`` (E|max q - p(yhat|x)|, the true calibration
error without bins), ``overconfidence`` / ``overconfidence_truth`` (mean confidence minus
accuracy, against labels / truth), ``brier`` and the per-bin reliability data.

This module turns those into the artifacts the kinds share: reliability diagrams with both
y quantities, the agreement figure of ECE against labels vs against the truth, and the
numbers that say whether and where the two agree.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from oracle.errors import DataError
from oracle.measures.calibration import pool_reliability
from oracle.measures.power_laws import aggregate_over_seeds, fit_per_seed
from oracle.report.figures import (print_widths, errorbar, log_tick_labels, palette, panel_letters, save_figure,
                                   size_ticks, style, top_legend)
from oracle.report.numbers import entry


def reliability_panels(rel: pd.DataFrame, selections: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, dict]:
    """{title: pooled bins} for each ``(title, {column: value})`` selection of a reliability
    frame (`oracle.classifiers.evaluate.read_reliability_frame`): the selected classifiers'
    bins pooled with `oracle.measures.calibration.pool_reliability`. DataError for a
    selection that matches no classifier."""
    out = {}
    for title, where in selections:
        sub = rel
        for col, value in where.items():
            sub = sub[sub[col] == value]
        if sub.empty:
            raise DataError(f"reliability data: no classifier with {dict(where)}")
        bins = [{k: part.sort_values("bin")[k].to_numpy(float)
                 for k in ("count", "confidence", "accuracy", "true_probability")}
                for _, part in sub.groupby(["experiment", "arch", "cell", "seed", "evalset"], sort=True)]
        out[title] = pool_reliability(bins)
    return out


def agreement_figure(runs: pd.DataFrame, stem: str | os.PathLike, group: str = "arch") -> dict[str, Path]:
    """Left: label ECE (y) against the true binned ECE (x), one point per classifier, coloured
    by `group`, marker size growing with N, the diagonal drawn. Right: label ECE minus true
    ECE against N (log x), per `group`."""


    _require(runs, [group, "N", "ece", "ece_posterior"])
    groups = sorted(runs[group].astype(str).unique())
    colors = palette(groups)
    n_log = np.log10(runs["N"].to_numpy(float))
    span = max(float(n_log.max() - n_log.min()), 1e-9)
    sizes = 12 + 40 * (n_log - n_log.min()) / span
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.9 + 0.2 * math.ceil(2 * len(groups) / 4)), layout="constrained")
        ax_a, ax_b = fig.subplots(1, 2)
        top = float(max(runs["ece"].max(), runs["ece_posterior"].max())) * 1.05 + 1e-3
        for g in groups:
            mask = (runs[group].astype(str) == g).to_numpy()
            sub = runs[mask]
            ax_a.scatter(sub["ece_posterior"], sub["ece"], s=sizes[mask], color=colors[g], alpha=0.75,
                         edgecolor="k", lw=0.3, label=g)
            diff = sub.assign(d=sub["ece"] - sub["ece_posterior"]).groupby("N")["d"].agg(["mean", "std"])
            ax_b.errorbar(diff.index, diff["mean"], yerr=diff["std"].fillna(0.0), color=colors[g], marker="o",
                          ms=3, capsize=2, lw=1.2, label=g)
        ax_a.plot([0, top], [0, top], "k--", lw=1)
        ax_a.set(xlim=(0, top), ylim=(0, top), xlabel="true ECE (exact p(ŷ|x), 10 bins)",
                 ylabel="ECE against labels (10 bins)", title="per classifier; size ~ log N")
        ax_b.axhline(0.0, color="k", lw=1)
        ax_b.set(xlabel="dataset size N", ylabel="label ECE - true ECE", title="difference, mean ± std")
        size_ticks(ax_b, runs["N"])
        for ax in (ax_a, ax_b):
            ax.legend(loc="best")
        panel_letters([ax_a, ax_b])
        return save_figure(fig, stem)


#: Fills of the three measures in calibration_vs_n's panel (b): greys and hatches, not the
#: groups' palette colours, which panel (a) already uses for the groups themselves.
METRIC_SHADES = ("0.35", "0.65", "0.9")
METRIC_HATCHES = ("", "//", "..")


def calibration_vs_n(runs: pd.DataFrame, stem: str | os.PathLike, group: str = "arch") -> dict[str, Path]:
    """(a) ECE against labels (solid) and true ECE (dashed) against N per `group`, mean ± std
    over seeds, log-log (its legend above the panels, `top_legend`, the figure taller by its
    rows: it fits however many groups and however long their names); (b) per group the
    exponent alpha of the ECE beside that of the epistemic KL, mean ± std over per-seed power-law fits (groups whose values are not all
    positive, or with fewer than two N, get no bar)."""


    _require(runs, [group, "N", "seed", "ece", "ece_posterior", "epistemic"])
    groups = sorted(runs[group].unique())
    colors = palette(groups)
    agg = aggregate_over_seeds(runs, ["ece", "ece_posterior"], [group, "N"])
    values = {"epistemic KL": "epistemic", "ECE (labels)": "ece", "true ECE": "ece_posterior"}
    alphas = {}
    for g in groups:
        sub = runs[runs[group] == g]
        for name, col in values.items():
            if sub["N"].nunique() >= 2 and bool((sub[col] > 0).all()):
                fit = fit_per_seed(sub, col, group_cols=(group,)).iloc[0]
                alphas[g, name] = (fit["alpha"], 0.0 if np.isnan(fit["alpha_std"]) else fit["alpha_std"])
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.9 + 0.2 * math.ceil(2 * len(groups) / 4)), layout="constrained")
        ax_a, ax_b = fig.subplots(1, 2)
        for g in groups:
            a = agg[agg[group] == g]
            errorbar(ax_a, a, "ece", colors[g], f"{g}: labels")
            ax_a.errorbar(a["N"], a["ece_posterior_mean"], yerr=a["ece_posterior_std"].fillna(0.0), color=colors[g],
                          ls="--", marker="s", ms=3, capsize=2, lw=1, label=f"{g}: truth")
        ax_a.set(yscale="log", xlabel="dataset size N", ylabel="ECE (fraction, 10 bins)",
                 title="ECE: labels solid, truth dashed")
        # above the panels in the columns that fit the page: inside panel (a), two columns of six
        # "EfficientNet (test): labels" ran past the 6.8 in canvas of the cpu-study's figure
        top_legend(fig, *ax_a.get_legend_handles_labels())
        size_ticks(ax_a, runs["N"])
        log_tick_labels(ax_a, "y")
        width = 0.8 / len(values)
        x = np.arange(len(groups))
        for j, name in enumerate(values):
            pairs = [alphas.get((g, name), (np.nan, 0.0)) for g in groups]
            ax_b.bar(x + (j - (len(values) - 1) / 2) * width, [p[0] for p in pairs], width,
                     yerr=[p[1] for p in pairs], capsize=2, label=name, color=METRIC_SHADES[j], edgecolor="k",
                     lw=0.5, hatch=METRIC_HATCHES[j])
        ax_b.set_xticks(x, [str(g) for g in groups], rotation=30, ha="right")
        ax_b.axhline(0.0, color="k", lw=0.8)
        ax_b.set(ylabel="exponent α (value ∝ N^-α)", title="exponents, mean ± std")
        ax_b.legend(loc="best")
        panel_letters([ax_a, ax_b])
        return save_figure(fig, stem)


def agreement_numbers(runs: pd.DataFrame, path: str, who: Sequence[str] = ("arch", "cell", "seed")) -> dict[str, dict]:
    """Whether and where ECE against labels and against the truth agree, over the classifiers
    of ``runs`` (keys under ``calibration.``):
    * ``n_classifiers``;
    * ``ece_label_minus_truth``: mean of ece - ece_posterior with its se over classifiers
      (positive: the labels make classifiers look worse calibrated than they are), and
      ``ece_label_minus_truth_z`` = mean / se;
    * ``ece_label_above_truth``: the fraction of classifiers whose label ECE is the larger;
    * ``ece_rank_correlation``: Spearman rho between the two over classifiers (do they order
      classifiers the same way?);
    * ``ece_largest_difference``: the largest |ece - ece_posterior|, its classifier named in
      the description (columns `who`);
    * ``binning_hides``: the mean of calibration_pointwise - ece_posterior, the calibration
      error that equal-width bins average away (>= 0 by Jensen).
    """


    _require(runs, ["ece", "ece_posterior", "calibration_pointwise", *who])
    diff = (runs["ece"] - runs["ece_posterior"]).to_numpy(float)
    n = len(diff)
    out = {"calibration.n_classifiers": entry(n, "classifiers", path, "classifiers compared")}
    se = float(np.std(diff, ddof=1) / math.sqrt(n)) if n >= 2 else None
    out["calibration.ece_label_minus_truth"] = entry(
        float(diff.mean()), "fraction", path, "ECE against the world's labels minus the true ECE (same bins, exact "
        "p(yhat|x)), mean over classifiers", se=se, se_over="classifiers" if se else None)
    if se:
        out["calibration.ece_label_minus_truth_z"] = entry(float(diff.mean() / se), "1", path,
                                                           "that mean difference over its standard error")
    out["calibration.ece_label_above_truth"] = entry(float((diff > 0).mean()), "fraction", path,
                                                     "fraction of classifiers whose label ECE exceeds the true ECE")
    if n >= 3 and runs["ece"].nunique() > 1 and runs["ece_posterior"].nunique() > 1:
        rho = stats.spearmanr(runs["ece"], runs["ece_posterior"]).statistic
        out["calibration.ece_rank_correlation"] = entry(float(rho), "1", path,
                                                        "Spearman rank correlation of label ECE and true ECE over classifiers")
    i = int(np.argmax(np.abs(diff)))
    row = runs.iloc[i]
    name = ", ".join(f"{c}={row[c]}" for c in who)
    out["calibration.ece_largest_difference"] = entry(float(diff[i]), "fraction", path,
                                                      f"largest label ECE minus true ECE, at {name}")
    hidden = (runs["calibration_pointwise"] - runs["ece_posterior"]).to_numpy(float)
    out["calibration.binning_hides"] = entry(float(hidden.mean()), "fraction", path,
                                             "pointwise true calibration error E|conf - p(yhat|x)| minus the "
                                             "binned true ECE, mean over classifiers")
    return out


def _require(df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if df.empty or missing:
        raise DataError(f"calibration: expected classifier rows with columns {list(columns)}; "
                        f"{'no rows' if df.empty else f'missing {missing}'}")
