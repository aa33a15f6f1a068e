"""Experiment kind ``calibration``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.calibration`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from oracle.classifiers.evaluate import read_metrics_frame, read_reliability_frame
from oracle.errors import DataError
from oracle.experiments._calibration.report import reliability_panels
from oracle.experiments.calibration import CALIBRATION_METRICS, evaluation_sets
from oracle.report.figures import print_widths, palette, panel_letters, reliability_diagram, save_figure, style, top_legend
from oracle.report.numbers import entry

#: The calibration metrics of a model on a set (fractions), as named in the metrics files.
METRICS = CALIBRATION_METRICS  # the one list: the planning half's, which its column dictionary reads
#: The metrics against the exact posterior. On a noisy set they are left out (NaN): the flow's
#: p(y|x') at the noisy input is not the posterior of the noisy set's labels. Those labels are
#: the clean rows' draws y ~ p(y|x), so given x' they follow the noisy world's posterior
#: E[p(y|x) | x'], which nothing here computes; the label metrics stay valid.
TRUTH_METRICS = ("ece_posterior", "calibration_pointwise", "overconfidence_truth")


# --------------------------------------------------------------------------- data
def set_info(spec: Mapping, evalset: str) -> dict:
    """What an evaluation set is: ``shift`` (clean, noise, variant), ``sigma`` (0 for the clean
    set, NaN for a variant), ``tau`` (its world's base temperature; NaN for a noisy set),
    ``prior_shifted`` (a variant whose prior differs from the models' world's), ``parameter``
    (text) and ``labels`` (where its labels come from)."""
    base = spec["world_parameters"][spec["world"]]
    if evalset == spec["world"]:
        return {"shift": "clean", "sigma": 0.0, "tau": float(base["base_temperature"]), "prior_shifted": False,
                "parameter": "σ=0", "labels": "y ~ p(y|x)"}
    if evalset in spec["noise_sets"]:
        s = float(spec["noise_sets"][evalset])
        return {"shift": "noise", "sigma": s, "tau": math.nan, "prior_shifted": False, "parameter": f"σ={s:g}",
                "labels": "clean rows' labels (valid draws given x'; the flow's p(y|x') is not their posterior)"}
    p = spec["world_parameters"][evalset]
    prior_shifted = bool(p["prior"] and p["prior"] != base["prior"])
    parts = [f"τ={float(p['base_temperature']):g}"] + (["π skewed"] if prior_shifted else [])
    return {"shift": "variant", "sigma": math.nan, "tau": float(p["base_temperature"]), "prior_shifted": prior_shifted,
            "parameter": ", ".join(parts), "labels": "y ~ p_variant(y|x)"}


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``runs`` (one row per model and set: identity, `set_info`, `METRICS`), ``sets``
    (`set_frame`) and ``reliability`` (the reliability model's per-bin data on every set) from
    the metrics files (``inputs["metrics"]``)."""
    paths = list(inputs["metrics"])
    m = read_metrics_frame(paths, spec.get("classifiers"))
    want = {(r["arch"], r["cell"], int(r["seed"]), e) for r in spec["borrowed_runs"] for e in evaluation_sets(spec)}
    have = set(zip(m["arch"], m["cell"], m["seed"].astype(int), m["evalset"]))
    if want - have:
        raise DataError(f"calibration: no metrics of (arch, cell, seed, set) {sorted(want - have)[:3]}")
    order = {e: i for i, e in enumerate(evaluation_sets(spec))}
    m = m[[(a, c, int(s), e) in want for a, c, s, e in zip(m["arch"], m["cell"], m["seed"], m["evalset"])]]
    info = pd.DataFrame([set_info(spec, e) for e in m["evalset"]], index=m.index)
    runs = pd.concat([m[["arch", "cell", "N", "seed", "evalset", "n"]], info, m[list(METRICS)], m[["source"]]], axis=1)
    runs.loc[runs["shift"] == "noise", list(TRUTH_METRICS)] = math.nan  # no truth at x' (TRUTH_METRICS)
    runs = runs.assign(order=runs["evalset"].map(order)).sort_values(["arch", "N", "seed", "order"], kind="stable")
    runs = runs.drop(columns="order").reset_index(drop=True)
    rel = read_reliability_frame(paths, spec.get("classifiers"))
    top = max(int(n) for n in runs["N"])
    rel = rel[(rel["arch"] == spec["reliability_arch"]) & (rel["N"].astype(int) == top)
              & rel["evalset"].isin(order)].reset_index(drop=True)
    return {"runs": runs, "sets": set_frame(spec, runs), "reliability": rel}


def set_frame(spec: Mapping, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per set (in `evaluation_sets` order), over every model: the mean of each of
    `METRICS`, ``ece_diff`` = mean of label ECE - true ECE with ``ece_diff_se`` (std / sqrt(n)
    over models) and ``ece_diff_z``, ``ece_rank_correlation`` (Spearman over models; NaN with
    fewer than 3 or constant values). A noisy set has no truth (`TRUTH_METRICS`): NaN there."""
    rows = []
    for evalset in evaluation_sets(spec):
        g = runs[runs["evalset"] == evalset]
        d = (g["ece"] - g["ece_posterior"]).to_numpy(float)
        n = len(d)
        se = float(np.std(d, ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
        rho = math.nan
        if n >= 3 and g["ece"].nunique() > 1 and g["ece_posterior"].nunique() > 1 and g["ece_posterior"].notna().all():
            rho = float(stats.spearmanr(g["ece"], g["ece_posterior"]).statistic)
        rows.append({"evalset": evalset, **set_info(spec, evalset), "n_models": n,
                     **{c: float(g[c].mean()) for c in METRICS},
                     **{f"{c}_se": float(g[c].std(ddof=1) / math.sqrt(n)) if n >= 2 else math.nan for c in METRICS},
                     "ece_diff": float(d.mean()), "ece_diff_se": se,
                     "ece_diff_z": float(d.mean() / se) if se and np.isfinite(se) and se > 0 else math.nan,
                     "ece_rank_correlation": rho})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- tables
def _by_model(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of `METRICS` per (arch, N, set), in the runs' order."""
    keys = ["arch", "N", "evalset"]
    agg = runs.groupby(keys, sort=False)[list(METRICS)].agg(["mean", "std"])
    agg.columns = [f"{a}_{b}" for a, b in agg.columns]
    first = runs.groupby(keys, sort=False)[["parameter", "shift", "sigma", "tau", "prior_shifted"]].first()
    seeds = runs.groupby(keys, sort=False)["seed"].nunique().rename("n_seeds")
    return pd.concat([first, seeds, agg], axis=1).reset_index()


def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``calibration_under_shift`` (per arch, N and set) or ``ece_labels_vs_truth_under_shift``
    (per set)."""
    if name == "calibration_under_shift":
        b = _by_model(data["runs"])
        out = {"Architecture": b["arch"].map(spec["arch_labels"]).fillna(b["arch"]), "N": b["N"].astype(int),
               "Set": b["evalset"], "Shift": b["parameter"], "Seeds": b["n_seeds"]}
        for col, label, scale in (("acc", "Accuracy (%)", 100.0), ("ece", "ECE", 1.0), ("ece_posterior", "True ECE", 1.0),
                                  ("calibration_pointwise", "Pointwise true CE", 1.0), ("brier", "Brier", 1.0),
                                  ("overconfidence", "Overconf.", 1.0),
                                  ("overconfidence_truth", "Overconf. (truth)", 1.0)):
            out[label] = scale * b[f"{col}_mean"]
            out[f"{label} std"] = scale * b[f"{col}_std"]
        return pd.DataFrame(out)
    if name == "ece_labels_vs_truth_under_shift":
        s = data["sets"]
        s = s[s["ece_posterior"].notna()]  # noisy sets have no truth to compare with (TRUTH_METRICS)
        return pd.DataFrame({"Set": s["evalset"], "Shift": s["parameter"], "Labels": s["labels"],
                             "Models": s["n_models"], "Label ECE": s["ece"], "True ECE": s["ece_posterior"],
                             "Label - true": s["ece_diff"], "SE": s["ece_diff_se"], "z": s["ece_diff_z"],
                             "Spearman ρ": s["ece_rank_correlation"]})
    raise DataError(f"calibration: no table named {name!r} (tables: calibration_under_shift, "
                    "ece_labels_vs_truth_under_shift)")


# --------------------------------------------------------------------------- figures
def _rows(spec: Mapping, frame: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame, str]]:
    """The two magnitude axes: (x column, x label, the rows on it, a title suffix): the clean set
    and noisy sets against sigma; the clean set and tau-only variants against tau."""
    noise = frame[frame["shift"].isin(["clean", "noise"])]
    tau = frame[frame["shift"].isin(["clean", "variant"]) & ~frame["prior_shifted"].astype(bool)]
    return [("sigma", "noise σ (0 = clean)", noise, "vs noise"),
            ("tau", "test world's τ", tau, "vs τ")]


def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``calibration_vs_shift`` (2 x 4 panels) or ``reliability_under_shift``."""
    if name == "reliability_under_shift":
        rel, sets = data["reliability"], data["sets"]
        if rel.empty:
            raise DataError("calibration: no reliability data of the reliability model")
        n = int(rel["N"].max())
        label = spec["arch_labels"].get(spec["reliability_arch"], spec["reliability_arch"])
        selections = [(f"{label}, N={n}: {r['parameter']}", {"evalset": r["evalset"]}) for _, r in sets.iterrows()
                      if (rel["evalset"] == r["evalset"]).any()]
        return reliability_diagram(reliability_panels(rel, selections), stem, ncols=min(3, len(selections)))
    if name != "calibration_vs_shift":
        raise DataError(f"calibration: no figure named {name!r} (figures: calibration_vs_shift, "
                        "reliability_under_shift)")
    b = _by_model(data["runs"])
    models = list(dict.fromkeys(zip(b["arch"], b["N"].astype(int))))
    colors = palette([f"{a}, N={n}" for a, n in models])
    panels = (("ece", "ece_posterior", "ECE", "ECE"), ("brier", None, "Brier score", "Brier"),
              ("overconfidence", "overconfidence_truth", "overconfidence", "overconf."))
    with style():
        fig = Figure(figsize=(print_widths().page_in, 4.9), layout="constrained")
        axes = fig.subplots(2, 4)
        for row, (x, xlabel, sub, shift) in zip(axes, _rows(spec, b)):
            s = data["sets"]
            s = s[s["evalset"].isin(sub["evalset"])].sort_values(x)
            # the truth exists only on sets whose labels the flow's posterior describes: on
            # noisy sets no dashed line and no label-minus-truth panel (it would be empty)
            truth = bool(np.isfinite(s["ece_diff"].to_numpy(float)[s["shift"].to_numpy() != "clean"]).any())
            for a, n in models:
                g = sub[(sub["arch"] == a) & (sub["N"].astype(int) == n)].sort_values(x)
                c = colors[f"{a}, N={n}"]
                for ax, (solid, dashed, _, _) in zip(row, panels):
                    ax.errorbar(g[x], g[f"{solid}_mean"], yerr=g[f"{solid}_std"].fillna(0.0), color=c, marker="o",
                                ms=3, capsize=2, lw=1.2, label=f"{spec['arch_labels'].get(a, a)}, N={n}")
                    if dashed and truth:
                        ax.errorbar(g[x], g[f"{dashed}_mean"], yerr=g[f"{dashed}_std"].fillna(0.0), color=c, ls="--",
                                    marker="s", ms=3, capsize=2, lw=1.0)
                if truth:
                    row[3].plot(g[x], g["ece_mean"] - g["ece_posterior_mean"], color=c, lw=0.8, alpha=0.5)
            if truth:
                row[3].errorbar(s[x], s["ece_diff"], yerr=s["ece_diff_se"].fillna(0.0), color="k", marker="o", ms=4,
                                capsize=3, lw=1.6, label="mean ± SE over models")
                row[3].axhline(0.0, color="k", lw=0.8)
            else:
                row[3].set_visible(False)
            used = [*panels, (None, None, "label - true ECE", "ECE gap")] if truth else list(panels)
            for ax, (_, dashed, ylabel, title) in zip(row, used):
                lines = " (labels solid,\ntruth dashed)" if dashed and truth else ""
                ax.set(xlabel=xlabel, ylabel=ylabel + lines, title=f"{title} {shift}")
                # ticks at the magnitudes run: autoscaling put a negative σ on a noise axis
                ticks = sorted(set(sub[x].dropna().astype(float)))
                ax.set_xticks(ticks, [f"{t:g}" for t in ticks], rotation=45 if len(ticks) > 4 else 0)
        panel_letters([ax for ax in axes.ravel() if ax.get_visible()])
        # one legend for all panels, above them: the models' colours, then the black mean
        handles, labels = axes[0][0].get_legend_handles_labels()
        more, more_labels = next((ax.get_legend_handles_labels() for ax in axes[:, 3] if ax.get_visible()), ([], []))
        top_legend(fig, [*handles, *more], [*labels, *more_labels])
        return save_figure(fig, stem)


# --------------------------------------------------------------------------- numbers
def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """Per set, over every model (mean with SE over models): ``ece.<set>``, ``ece_true.<set>``,
    ``brier.<set>``, ``overconfidence.<set>``, ``overconfidence_truth.<set>`` and
    ``ece_label_minus_truth.<set>`` (with ``ece_label_minus_truth_z.<set>``); ``n_models``. The
    truth-based ones only where the set has a truth (not on noisy sets: `TRUTH_METRICS`)."""
    s, path = data["sets"], data_paths["sets"]
    out = {"n_models": entry(int(s["n_models"].iloc[0]), "models", path, "classifiers evaluated on every set")}
    for _, r in s.iterrows():
        e, who = r["evalset"], f"{r['evalset']} ({r['parameter']})"
        n = int(r["n_models"])
        for key, col, desc in (("ece", "ece", "ECE against the set's labels (10 bins)"),
                               ("ece_true", "ece_posterior", "true ECE against the exact posterior (10 bins)"),
                               ("brier", "brier", "Brier score against the set's labels"),
                               ("overconfidence", "overconfidence", "mean confidence minus accuracy (labels)"),
                               ("overconfidence_truth", "overconfidence_truth",
                                "mean confidence minus mean p(yhat|x) (truth)")):
            if np.isfinite(r[col]):  # a noisy set has no truth (TRUTH_METRICS)
                out[f"{key}.{e}"] = entry(float(r[col]), "fraction", path, f"{who}: {desc}, mean over {n} models",
                                          se=float(r[f"{col}_se"]), se_over="classifiers")
        if not np.isfinite(r["ece_diff"]):
            continue
        out[f"ece_label_minus_truth.{e}"] = entry(float(r["ece_diff"]), "fraction", path,
                                                  f"{who}: label ECE minus true ECE, mean over {n} models "
                                                  f"(labels: {r['labels']})", se=float(r["ece_diff_se"]),
                                                  se_over="classifiers")
        if np.isfinite(r["ece_diff_z"]):
            out[f"ece_label_minus_truth_z.{e}"] = entry(float(r["ece_diff_z"]), "1", path,
                                                        f"{who}: that difference over its SE")
    return out
