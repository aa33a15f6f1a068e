"""Experiment kind ``estimators``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.estimators`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from oracle.classifiers.identity import run_identities
from oracle.errors import DataError
from oracle.io.atomic import read_json
from oracle.experiments.estimators import evaluation_sets
from oracle.io.predictions import read_predictions
from oracle.measures import accuracy_estimators as est
from oracle.measures.accuracy_estimators import METHODS
from oracle.report.figures import lay_out, print_widths, panel_letters, save_figure, style
from oracle.report.numbers import entry, mean_spread


# --------------------------------------------------------------------------- data
def _set_info(spec: Mapping, evalset: str) -> tuple[str, str]:
    """(shift kind, parameter text) of an evaluation set."""
    if evalset == spec["world"]:
        return "clean", "in-distribution"
    if evalset in spec["noise_sets"]:
        return "noise", f"σ={spec['noise_sets'][evalset]:g}"
    p, b = spec["world_parameters"][evalset], spec["world_parameters"][spec["world"]]
    parts = [f"τ={p['base_temperature']:g}"] if p["base_temperature"] != b["base_temperature"] else []
    parts += ["π=" + ",".join(f"{v:g}" for v in p["prior"])] if p["prior"] != b["prior"] and p["prior"] else []
    return "variant", "; ".join(parts) or "same parameters"


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``estimates``, ``scores`` and ``sets`` from the predictions (``inputs["predictions"]``,
    logits and log q), metrics (``inputs["metrics"]``: accuracy, Bayes accuracy), the variants'
    divergence checks (``inputs["divergences"]``) and the noisy sets' constants (``inputs["noise"]``)."""


    views = spec.get("classifiers")  # the runs each model file stands for (plan.classifier_views)
    metrics = {}
    for path in inputs["metrics"]:
        m = read_json(path)
        metrics |= {(r["arch"], r["cell"], int(r["seed"]), m["evalset"]): m["metrics"]
                    for r in run_identities(m, views, path)}
    preds = {}
    for path in inputs["predictions"]:
        p = read_predictions(path)
        a = p["attrs"]
        if "logits" not in p:
            raise DataError(f"{path} has no logits (MaNo needs them): rerun its predict_classifier job")
        preds |= {(r["arch"], r["cell"], int(r["seed"]), a["evalset"]): p for r in run_identities(a, views, path)}
    rows = []
    for run in spec["borrowed_runs"]:
        ident = (run["arch"], run["cell"], run["seed"])
        clean = preds.get((*ident, spec["world"]))
        if clean is None:
            raise DataError(f"estimators: no predictions of {ident} on {spec['world']!r}")
        thresholds = est.fit_atc(clean["log_q"], clean["label"])
        # the official MaNo code takes its criterion once, from the family's first set
        official_phi = est.mano_official_criterion(clean["logits"])
        for evalset in evaluation_sets(spec):
            p, m = preds.get((*ident, evalset)), metrics.get((*ident, evalset))
            if p is None or m is None:
                raise DataError(f"estimators: no predictions or metrics of {ident} on {evalset!r}")
            kind, param = _set_info(spec, evalset)
            acc = float(np.mean(p["log_q"].argmax(1) == p["label"]))
            bayes = m["bayes_accuracy"] if kind in ("variant", "clean") else {"mean": math.nan, "se": math.nan}
            for method, value in est.estimate_all(p["logits"], p["log_q"], thresholds,
                                                  official_criterion=official_phi).items():
                rows.append({"arch": run["arch"], "cell": run["cell"], "seed": run["seed"], "evalset": evalset,
                             "shift": kind, "parameter": param, "method": method, "estimate": value,
                             "accuracy": acc, "bayes_accuracy": bayes["mean"], "bayes_accuracy_se": bayes["se"],
                             "n": int(len(p["label"]))})
    estimates = pd.DataFrame(rows)
    divergences = {d["world"]: d for d in map(read_json, inputs.get("divergences", []))}
    noise = {round(float(n["sigma"]), 12): n for n in map(read_json, inputs.get("noise", []))}
    return {"estimates": estimates, "scores": score_frame(estimates),
            "sets": set_frame(spec, estimates, divergences, noise)}


def score_frame(estimates: pd.DataFrame) -> pd.DataFrame:
    """Per model and method: scores against ``accuracy`` over the shifted sets and against
    ``bayes_accuracy`` over the exact variants (`oracle.measures.accuracy_estimators.score`)."""


    out = []
    shifted = estimates[estimates["shift"] != "clean"]
    for (arch, cell, seed, method), g in shifted.groupby(["arch", "cell", "seed", "method"], sort=True):
        for target, sub in (("accuracy", g), ("bayes_accuracy", g[g["shift"] == "variant"])):
            out.append({"arch": arch, "cell": cell, "seed": seed, "method": method, "target": target,
                        **est.score(method, sub["estimate"], sub[target])})
    return pd.DataFrame(out)


def set_frame(spec: Mapping, estimates: pd.DataFrame, divergences: Mapping[str, Mapping],
              noise: Mapping[float, Mapping]) -> pd.DataFrame:
    """One row per evaluation set (clean first): accuracy over models, exact quantities."""
    one = estimates[estimates["method"] == estimates["method"].iloc[0]]
    clean = one[one["shift"] == "clean"]
    acc0, bayes0 = clean["accuracy"].mean(), clean["bayes_accuracy"].mean()
    rows = []
    for evalset in evaluation_sets(spec):
        g = one[one["evalset"] == evalset]
        kind, param = _set_info(spec, evalset)
        div = divergences.get(evalset, {})
        nz = noise.get(round(spec["noise_sets"].get(evalset, -1.0), 12), {})
        drop, bayes = 100 * (acc0 - g["accuracy"].mean()), g["bayes_accuracy"].mean()
        bayes_drop = 100 * (bayes0 - bayes)
        rows.append({
            "evalset": evalset, "shift": kind, "parameter": param, "n": int(g["n"].iloc[0]),
            "kl_exact": div.get("closed_form", {}).get("total", 0.0 if kind == "clean" else math.nan),
            "kl_monte_carlo": div.get("monte_carlo", {}).get("mean", math.nan),
            "kl_monte_carlo_se": div.get("monte_carlo", {}).get("se", math.nan),
            "posterior_shift": nz.get("posterior_shift", {}).get("mean", math.nan),
            "posterior_shift_se": nz.get("posterior_shift", {}).get("se", math.nan),
            "oracle_acc_noisy": nz.get("oracle_accuracy_noisy", {}).get("mean", math.nan),
            "accuracy": g["accuracy"].mean(), "accuracy_std": g["accuracy"].std(ddof=1), "n_models": len(g),
            "bayes_accuracy": bayes, "drop_pp": drop, "bayes_drop_pp": bayes_drop,
            "irreducible_share": bayes_drop / drop if kind == "variant" and abs(drop) > 1e-12 else math.nan,
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- tables, figure, numbers
def _summary(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over models of every score, one row per (method, target)."""
    agg = scores.groupby(["method", "target"], sort=False)[["r2", "spearman", "mae"]].agg(["mean", "std", "count"])
    agg.columns = [f"{a}_{b}" for a, b in agg.columns]
    return agg.reset_index()


def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``estimator_scores`` or ``shifted_sets``."""


    if name == "estimator_scores":
        s = _summary(data["scores"]).set_index(["method", "target"])
        rows = []
        for method, (label, predicts) in METHODS.items():
            a, b = s.loc[(method, "accuracy")], s.loc[(method, "bayes_accuracy")]
            rows.append({"Method": label, "Predicts accuracy": "yes" if predicts else "score",
                         "R²": a["r2_mean"], "R² std": a["r2_std"], "ρ": a["spearman_mean"], "ρ std": a["spearman_std"],
                         "MAE (pp)": 100 * a["mae_mean"], "MAE std (pp)": 100 * a["mae_std"],
                         "R² vs Bayes": b["r2_mean"], "R² vs Bayes std": b["r2_std"],
                         "ρ vs Bayes": b["spearman_mean"], "ρ vs Bayes std": b["spearman_std"]})
        return pd.DataFrame(rows)
    if name == "shifted_sets":
        c = data["sets"]
        return pd.DataFrame({
            "Set": c["evalset"], "Shift": c["shift"], "Parameter": c["parameter"], "Exact KL (nats)": c["kl_exact"],
            "MC KL": c["kl_monte_carlo"], "± SE": c["kl_monte_carlo_se"],
            "Oracle posterior shift (nats)": c["posterior_shift"], "Oracle acc on x' (%)": 100 * c["oracle_acc_noisy"],
            "Accuracy (%)": 100 * c["accuracy"], "Acc std (%)": 100 * c["accuracy_std"],
            "Bayes acc (%)": 100 * c["bayes_accuracy"], "Drop (pp)": c["drop_pp"], "Bayes drop (pp)": c["bayes_drop_pp"],
            # a share of a drop: blank where the accuracy rose (an easier world, e.g. tau < 1)
            "Irreducible share": c["irreducible_share"].where(c["drop_pp"] > 0)})
    raise DataError(f"estimators: no table named {name!r} (tables: estimator_scores, shifted_sets)")


#: y labels of the scores that are a transform of what their name says
#: (`oracle.measures.accuracy_estimators.entropy_score`).
SCORE_AXES = {"entropy": "Entropy score: 1 − mean H(q) / log K"}


#: Inches of one row of panels of ``estimates_vs_accuracy`` (its two rows at the default 6.8 in width: 5.2 in).
ROW_HEIGHT_IN = 2.6


def _x_labels_fit(fig: Figure) -> bool:
    """Whether every visible panel's x label ("true accuracy (%)", 1.0 in at 9 pt) is no wider than
    its axes. Constrained layout leaves a label's length out of the margins it makes, so a wider
    one reaches past the canvas (the last column's: x 5.54 in on a 5.5 in figure of four columns)
    or into its neighbour's; the titles are wrapped to their panels by `save_figure`."""
    renderer = lay_out(fig)
    return all(ax.xaxis.label.get_window_extent(renderer).width <= ax.bbox.width
               for ax in fig.axes if ax.axison and ax.get_xlabel())


def _estimates_panels(e: pd.DataFrame, s: pd.DataFrame, width: float, cols: int) -> Figure:
    """The panels of `figure`, one per method, `cols` to a row on a figure `width` inches wide."""
    colors = dict(zip(("noise", "variant", "clean"), sns.color_palette("colorblind", 3)))
    rows = math.ceil(len(METHODS) / cols)
    fig = Figure(figsize=(width, ROW_HEIGHT_IN * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[len(METHODS):]:
        ax.axis("off")
    for ax, (method, (label, predicts)) in zip(axes, METHODS.items()):
        g = e[e["method"] == method]
        for kind, sub in g.groupby("shift"):
            scale = 100.0 if predicts else 1.0
            ax.scatter(100 * sub["accuracy"], scale * sub["estimate"], s=22, color=colors[kind], label=kind,
                       facecolors="none" if kind == "clean" else colors[kind])
        if predicts:
            lo, hi = ax.get_xlim()
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        r = s.loc[(method, "accuracy")]
        ax.set(xlabel="true accuracy (%)",
               ylabel=SCORE_AXES.get(method, f"{label} estimate" + (" (%)" if predicts else " (score)")),
               title=f"{label}\nR² {r['r2_mean']:.3f}, ρ {r['spearman_mean']:.3f}")
        ax.legend(loc="best")
    panel_letters(axes[:len(METHODS)])
    return fig


def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``estimates_vs_accuracy``: one panel per method, in two rows of four at the default 6.8 in;
    at a narrower print width (`print_widths`: ICLR's 5.5 in) in as many columns as leave every
    panel's axes as wide as its x label (`_x_labels_fit`), more rows instead: it fits its canvas
    by construction at any width."""
    if name != "estimates_vs_accuracy":
        raise DataError(f"estimators: no figure named {name!r} (figures: estimates_vs_accuracy)")
    e = data["estimates"]
    s = _summary(data["scores"]).set_index(["method", "target"])
    width = print_widths().page_in
    with style():
        for cols in range(math.ceil(len(METHODS) / 2), 0, -1):
            fig = _estimates_panels(e, s, width, cols)
            if cols == 1 or _x_labels_fit(fig):
                break
        return save_figure(fig, stem)


def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """Per method: ``r2.<m>``, ``spearman.<m>``, ``mae.<m>`` (predictors), ``r2_bayes.<m>``,
    ``spearman_bayes.<m>`` (mean ± std over models); per shifted set: ``accuracy.<set>``,
    ``bayes_accuracy.<set>``, ``kl_exact.<set>``, ``irreducible_share.<set>``,
    ``posterior_shift.<set>``; ``n_models``, ``n_shifted_sets``."""
    scores_path, sets_path = data_paths["scores"], data_paths["sets"]
    s = _summary(data["scores"]).set_index(["method", "target"])
    n_models = int(data["scores"][["arch", "cell", "seed"]].drop_duplicates().shape[0])
    # the models of one architecture and size differ only by seed: their spread is over seeds
    over = "seeds" if data["scores"][["arch", "cell"]].drop_duplicates().shape[0] == 1 else "models"

    def spread(row: pd.Series, col: str) -> dict:
        return mean_spread(row[f"{col}_std"], int(row[f"{col}_count"]), over)

    out = {"n_models": entry(n_models, "models", scores_path, "classifiers whose estimates are scored"),
           "n_shifted_sets": entry(len(spec["shifted_sets"]), "sets", scores_path, "shifted test sets per model")}
    for method, (label, predicts) in METHODS.items():
        a, b = s.loc[(method, "accuracy")], s.loc[(method, "bayes_accuracy")]
        out[f"r2.{method}"] = entry(a["r2_mean"], "1", scores_path, f"{label}: R^2 against the true accuracy over "
                                    f"the shifted sets, mean over {n_models} models", **spread(a, "r2"))
        out[f"spearman.{method}"] = entry(a["spearman_mean"], "1", scores_path, f"{label}: Spearman rho against the "
                                          "true accuracy, mean over models", **spread(a, "spearman"))
        if predicts:
            out[f"mae.{method}"] = entry(a["mae_mean"], "fraction", scores_path, f"{label}: mean absolute error of "
                                         "the accuracy estimate, mean over models", **spread(a, "mae"))
        out[f"r2_bayes.{method}"] = entry(b["r2_mean"], "1", scores_path, f"{label}: R^2 against the exact Bayes "
                                          "accuracy over the world variants", **spread(b, "r2"))
        out[f"spearman_bayes.{method}"] = entry(b["spearman_mean"], "1", scores_path, f"{label}: Spearman rho against "
                                                "the exact Bayes accuracy over the world variants", **spread(b, "spearman"))
    for _, r in data["sets"].iterrows():
        name = r["evalset"]
        out[f"accuracy.{name}"] = entry(r["accuracy"], "fraction", sets_path, f"{name} ({r['parameter']}): true "
                                        "accuracy, mean over models", **mean_spread(r["accuracy_std"], int(r["n_models"]), over))
        for col, unit, desc in (("bayes_accuracy", "fraction", "exact Bayes accuracy E[max p(y|x)] on its test rows"),
                                ("kl_exact", "nats", "exact KL from the models' world"),
                                ("irreducible_share", "ratio", "Bayes-accuracy drop / model accuracy drop"),
                                ("posterior_shift", "nats", "oracle's posterior shift E[KL(p(y|x) || p(y|x'))]")):
            if r["shift"] != "clean" and np.isfinite(r[col]):
                se = r.get(f"{col}_se", math.nan)  # the oracle's Monte Carlo se, where the set has one
                spread = {"se": se, "se_over": "samples"} if np.isfinite(se) else {}
                out[f"{col}.{name}"] = entry(r[col], unit, sets_path, f"{name} ({r['parameter']}): {desc}", **spread)
    return out
