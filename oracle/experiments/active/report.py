"""Experiment kind ``active``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.active`)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from oracle.errors import DataError
from oracle.experiments.active import ARTIFACTS, STRATEGY_COLORS, STRATEGY_LABELS, TARGET_LABELS, TARGETS
from oracle.measures.power_laws import aggregate_over_seeds
from oracle.report.figures import print_widths, panel_letters, save_figure, style, top_legend
from oracle.report.numbers import converged_entries, correlation_ci95, entry, ratio_spread

# --------------------------------------------------------------------------- data
ROUND_COLUMNS = ("labelled", "epochs", "steps", "kept_steps", "converged", "stopped_by", "kept_lr", "train_seconds", "train_loss",
                 "test_size", "acc", "acc_se", "epistemic", "epistemic_se", "total", "total_se", "aleatoric", "aleatoric_se", "bayes_accuracy",
                 "bayes_accuracy_se", "ece", "pool_remaining", "pool_epistemic", "pool_aleatoric",
                 "selected_epistemic", "selected_aleatoric")


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``rounds`` and ``correlations`` from the runs' rounds.json files (``inputs["rounds"]``)."""
    rounds, corr = [], []
    for path in inputs["rounds"]:
        try:
            blob = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read active-learning rounds {path}: {exc}") from None
        ident = {k: blob.get(k) for k in ("experiment", "arch", "strategy", "seed")}
        if None in ident.values() or not blob.get("rounds"):
            raise DataError(f"{path}: lacks experiment/arch/strategy/seed or rounds; rerun its active_learning job")
        if ident["strategy"] not in spec["strategies"] or ident["arch"] not in spec["archs"]:
            raise DataError(f"{path}: run {ident} is not one of experiment {spec.get('name', '')!r}'s strategies/archs")
        source = Path(path).as_posix()
        for rec in blob["rounds"]:
            row = {**ident, "round": int(rec["round"])}
            row.update({c: rec.get(c, math.nan) for c in ROUND_COLUMNS})
            row["n_selected"] = len(rec.get("selected", []))
            rounds.append({**row, "source": source})
            for score, per in (rec.get("correlations") or {}).items():
                for target in TARGETS:
                    rho = per.get(target)
                    corr.append({**ident, "round": row["round"], "labelled": row["labelled"], "score": score,
                                 "target": target, "spearman": math.nan if rho is None else float(rho),
                                 "source": source})
    if not rounds:
        raise DataError("active collect: no rounds.json files")
    keys = ["arch", "strategy", "seed", "round"]
    df = pd.DataFrame(rounds).sort_values(keys, kind="stable").reset_index(drop=True)
    if df.duplicated(keys).any():
        raise DataError("active collect: a (arch, strategy, seed, round) appears twice")
    cols = [*keys[:3], "round", "labelled", "score", "target", "spearman", "source"]
    cf = pd.DataFrame(corr, columns=["experiment", *cols])
    cf = cf.sort_values([*keys, "score", "target"], kind="stable").reset_index(drop=True)
    return {"rounds": df, "correlations": cf}


def _labels(spec: Mapping) -> tuple[dict, dict]:
    return spec["arch_labels"], {s: STRATEGY_LABELS[s] for s in spec["strategies"]}


def _curves(rounds: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """Mean, std and se over seeds of `cols` per (arch, strategy, labelled)."""
    return aggregate_over_seeds(rounds, list(cols), ["arch", "strategy", "labelled"])


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``rounds``: one row per (arch, strategy, labels), mean and std over seeds."""
    if name != "rounds":
        raise DataError(f"active: no table named {name!r} (tables: rounds)")
    arch_labels, strat_labels = _labels(spec)
    agg = _curves(data["rounds"], ["acc", "epistemic", "selected_epistemic", "selected_aleatoric"])
    rows = []
    for arch in spec["archs"]:
        for strategy in spec["strategies"]:
            for _, r in agg[(agg["arch"] == arch) & (agg["strategy"] == strategy)].iterrows():
                rows.append({"Architecture": arch_labels[arch], "Strategy": strat_labels[strategy],
                             "Labels": int(r["labelled"]), "Seeds": int(r["n_seeds"]),
                             "Accuracy (%)": 100 * r["acc_mean"], "Accuracy std (%)": 100 * r["acc_std"],
                             "Epistemic KL (nats)": r["epistemic_mean"], "Epistemic KL std": r["epistemic_std"],
                             "Acquired KL(p||q) (nats)": r["selected_epistemic_mean"],
                             "Acquired KL std": r["selected_epistemic_std"],
                             "Acquired H(p) (nats)": r["selected_aleatoric_mean"],
                             "Acquired H std": r["selected_aleatoric_std"]})
    if not rows:
        raise DataError("active: no rounds for the experiment's archs and strategies")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- figures
def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``acquisition_panels`` (paper Figure 8; its panel (a) is the ImageNet-64 preset's Figure 9)
    or ``proxy_correlations`` (beyond the paper)."""
    if name == "acquisition_panels":
        return acquisition_panels(data["rounds"], spec, stem)
    if name == "proxy_correlations":
        return proxy_correlations(data["correlations"], spec, stem)
    raise DataError(f"active: no figure named {name!r} (figures: {', '.join(a for a in ARTIFACTS if a != 'rounds')})")


def _curve(ax, agg, col: str, strategy: str, scale: float = 1.0) -> None:
    a = agg[agg["strategy"] == strategy].sort_values("labelled")
    ax.errorbar(a["labelled"], a[f"{col}_mean"] * scale, yerr=a[f"{col}_std"].fillna(0.0) * scale, marker="o", ms=3,
                capsize=2, lw=1.2, color=STRATEGY_COLORS[strategy], label=STRATEGY_LABELS[strategy])


def acquisition_panels(rounds: pd.DataFrame, spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """One row per architecture: (a) accuracy (%) vs labels, (b) exact epistemic KL (nats) vs
    labels, (c) final accuracy (%) per strategy as points on a zoomed axis; mean ± std over
    seeds."""


    agg = _curves(rounds, ["acc", "epistemic"])
    archs = [a for a in spec["archs"] if a in set(agg["arch"])]
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.4 * len(archs) + 0.4), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(archs), 3, squeeze=False))
        for row, arch in zip(axes, archs):
            a = agg[agg["arch"] == arch]
            strategies = [s for s in spec["strategies"] if s in set(a["strategy"])]
            for s in strategies:
                _curve(row[0], a, "acc", s, 100.0)
                _curve(row[1], a, "epistemic", s)
            last = a[a["labelled"] == a["labelled"].max()].set_index("strategy").loc[strategies]
            x = np.arange(len(strategies))
            acc = 100 * last["acc_mean"].to_numpy()
            err = 100 * last["acc_std"].fillna(0.0).to_numpy()
            # points, not bars: the axis is zoomed like the paper's panel (c), and a bar cut off at
            # the axis' lower end would show a length that means nothing
            for xi, s, ai, ei in zip(x, strategies, acc, err):
                row[2].errorbar(xi, ai, yerr=ei, fmt="o", ms=5, capsize=3, color=STRATEGY_COLORS[s])
            # every error bar stays inside
            lo, hi = float(np.nanmin(acc - err)), float(np.nanmax(acc + err))
            pad = max(1.0, 0.25 * (hi - lo))
            row[2].set_ylim(max(0.0, lo - pad), min(100.0, hi + pad))
            row[2].set_xlim(-0.5, len(strategies) - 0.5)
            row[2].set_xticks(x, [STRATEGY_LABELS[s] for s in strategies], rotation=30, ha="right")
            label = spec["arch_labels"][arch]
            row[0].set(xlabel="labels", ylabel="test accuracy (%)", title=f"{label}: accuracy")
            row[1].set(xlabel="labels", ylabel="epistemic KL(p || q) (nats)", title="exact epistemic KL")
            row[2].set(ylabel="final test accuracy (%)", title=f"at {int(a['labelled'].max())} labels")
        # one legend of the strategies above the rows: inside panel (a) it covered the BALD curve
        handles, labels = axes[0][0].get_legend_handles_labels()
        top_legend(fig, handles, labels)
        panel_letters(axes)
        return save_figure(fig, stem)


def proxy_correlations(corr: pd.DataFrame, spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """Spearman rho of each score with the exact KL(p || q) (left) and H(p) (right) against
    labels, one row per architecture; mean ± std over every run (strategies and seeds)."""


    archs = [a for a in spec["archs"] if a in set(corr["arch"])]
    if not archs:
        raise DataError("active: no correlations (the experiment needs a strategy other than random)")
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.6 * len(archs) + 0.4), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(archs), 2, squeeze=False))
        for row, arch in zip(axes, archs):
            for ax, target in zip(row, TARGETS):
                sub = corr[(corr["arch"] == arch) & (corr["target"] == target)]
                for score in [s for s in spec["strategies"] if s in set(sub["score"])]:
                    g = sub[sub["score"] == score].groupby("labelled")["spearman"].agg(["mean", "std"]).reset_index()
                    ax.errorbar(g["labelled"], g["mean"], yerr=g["std"].fillna(0.0), marker="o", ms=3, capsize=2,
                                lw=1.2, color=STRATEGY_COLORS[score], label=f"{STRATEGY_LABELS[score]} score")
                ax.axhline(0.0, color="k", lw=0.8)
                ax.set(ylim=(-1.05, 1.05), xlabel="labels when scored",
                       ylabel=f"Spearman ρ with {TARGET_LABELS[target]}",
                       title=f"{spec['arch_labels'][arch]}: vs {TARGET_LABELS[target]}")
        handles, labels = axes[0][0].get_legend_handles_labels()
        top_legend(fig, handles, labels)
        panel_letters(axes)
        return save_figure(fig, stem)


# --------------------------------------------------------------------------- numbers
def labels_to_reach(labelled: Sequence[float], acc: Sequence[float], target: float) -> float:
    """Labels at which an accuracy curve first reaches `target`: linear interpolation between
    the two rounds around the first crossing; the first round's labels when it starts at or
    above the target; NaN when it never reaches it."""
    lab, acc = np.asarray(labelled, np.float64), np.asarray(acc, np.float64)
    hit = np.flatnonzero(acc >= target)
    if not hit.size:
        return math.nan
    i = int(hit[0])
    if i == 0:
        return float(lab[0])
    return float(lab[i - 1] + (target - acc[i - 1]) / (acc[i] - acc[i - 1]) * (lab[i] - lab[i - 1]))


def _spread(values: Sequence[float]) -> dict:
    v = np.asarray([x for x in values if math.isfinite(x)], np.float64)
    if not v.size:
        return {"value": None, "std": None, "se": None, "n_seeds": 0}
    std = float(v.std(ddof=1)) if v.size > 1 else None
    return {"value": float(v.mean()), "std": std, "se": std / math.sqrt(v.size) if std is not None else None,
            "se_over": "seeds", "n_seeds": int(v.size)}


def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """The in-text numbers (`oracle.report.numbers.entry`; spreads are over seeds):
    * the budget: ``labels_initial``, ``labels_final``, ``batch``, ``rounds``, ``pool_size``,
      ``test_size``;
    * per arch and strategy: ``final_accuracy``, ``final_epistemic`` (last round),
      ``accuracy_gain`` (last round minus round 0, per seed);
    * with max_entropy and max_epistemic (the paper's comparison), per arch:
      ``gain_ratio`` = geometric mean over seeds of gain(max_epistemic) / gain(max_entropy) with
      its log-scale ci95 (`oracle.report.numbers.ratio_spread`; the paper's
      "1.6x larger accuracy gain under the same budget"; None when a seed's max-entropy gain is
      <= 0), ``gain_ratio_of_means`` (ratio of the seed-mean gains), ``target_accuracy`` (the
      configured one, else the mid-regime default: halfway between the seed-mean accuracy of
      round 0 and max entropy's seed-mean final accuracy), ``labels_to_target.<strategy>``
      (`labels_to_reach` per seed) and ``fewer_labels`` = mean over seeds of 1 - L(max_epistemic)
      / L(max_entropy) (the paper's "47.8% fewer labels"; seeds where either curve misses the
      target are left out and counted in the description);
    * per arch and score: ``spearman_epistemic``, ``spearman_aleatoric``: Spearman rho with the
      exact KL(p || q) and H(p) over the pool, mean over every round and run, std over seeds of
      the per-seed means (the trivial rho(max_epistemic, KL) = 1 is left out).
    """
    rounds, corr = data["rounds"], data["correlations"]
    path, cpath = data_paths["rounds"], data_paths["correlations"]
    out: dict[str, dict] = {}
    if rounds.empty:
        return out
    labels_all = spec["labels_per_round"]
    for k, v, unit, desc in (
            ("labels_initial", labels_all[0], "labels", "initial labelled set (seeded, the same for every strategy)"),
            ("labels_final", labels_all[-1], "labels", "labels after the last round (the budget, initial set included)"),
            ("batch", spec["batch"], "labels", "labels acquired per round"),
            ("rounds", spec["rounds"], "rounds", "acquisition rounds (the model is retrained from scratch each round)"),
            ("pool_size", spec["pool_size"], "samples", "unlabelled pool at the start (disjoint from the test set)"),
            ("test_size", int(rounds["test_size"].iloc[0]), "samples", "oracle test set every round is scored on")):
        out[k] = entry(int(v), unit, path, desc)
    out.update(converged_entries(rounds, ("strategy", "seed", "round"),
                                 {a: f"{spec['arch_labels'][a]}, every round's classifier" for a in spec["archs"]}, path))
    last_round = rounds["round"].max()
    for arch in spec["archs"]:
        label = spec["arch_labels"][arch]
        sub = rounds[rounds["arch"] == arch]
        gains = {}
        for s in spec["strategies"]:
            runs_s = sub[sub["strategy"] == s]
            if runs_s.empty:
                continue
            first = runs_s[runs_s["round"] == 0].set_index("seed")
            final = runs_s[runs_s["round"] == last_round].set_index("seed")
            gains[s] = (final["acc"] - first["acc"]).dropna()
            name = STRATEGY_LABELS[s]
            out[f"final_accuracy.{arch}.{s}"] = entry(unit="fraction", artifact=path, description=(
                f"{label}, {name}: test accuracy after the last round ({labels_all[-1]} labels)"),
                **_spread(final["acc"].tolist()))
            out[f"final_epistemic.{arch}.{s}"] = entry(unit="nats", artifact=path, description=(
                f"{label}, {name}: exact epistemic KL E[KL(p || q)] on the test set after the last round"),
                **_spread(final["epistemic"].tolist()))
            out[f"accuracy_gain.{arch}.{s}"] = entry(unit="fraction", artifact=path, description=(
                f"{label}, {name}: test accuracy gain from round 0 ({labels_all[0]} labels) to the last round "
                f"({labels_all[-1]} labels)"), **_spread(gains[s].tolist()))
        if {"max_entropy", "max_epistemic"} <= set(gains):
            out.update(_paper_comparison(sub, gains, spec, arch, path))
        for target, tag in (("exact_epistemic", "epistemic"), ("exact_aleatoric", "aleatoric")):
            c = corr[(corr["arch"] == arch) & (corr["target"] == target)]
            for score in [s for s in spec["strategies"] if s in set(c["score"])]:
                if score == "max_epistemic" and target == "exact_epistemic":
                    continue  # identically 1: the score is the exact KL
                per_seed = c[c["score"] == score].groupby("seed")["spearman"].mean().tolist()
                out[f"spearman_{tag}.{arch}.{score}"] = entry(unit="1", artifact=cpath, description=(
                    f"{label}: Spearman rho over the pool between the {STRATEGY_LABELS[score]} score and the "
                    f"{TARGET_LABELS[target]}, mean over every round and run; ci95 through Fisher's z of the "
                    "seeds' means"), **_spread(per_seed), ci95=correlation_ci95(per_seed))
    return out


def _paper_comparison(sub, gains: Mapping, spec: Mapping, arch: str, path: str) -> dict[str, dict]:
    """gain_ratio, gain_ratio_of_means, target_accuracy, labels_to_target, fewer_labels of one arch."""
    label = spec["arch_labels"][arch]
    out: dict[str, dict] = {}
    ent, epi = gains["max_entropy"], gains["max_epistemic"]
    seeds = sorted(set(ent.index) & set(epi.index))
    bad = [s for s in seeds if ent[s] <= 0]
    ratios = [float(epi[s] / ent[s]) for s in seeds] if not bad else []
    why = f"; undefined: max entropy's gain is <= 0 at seed(s) {bad}" if bad else ""
    out[f"gain_ratio.{arch}"] = entry(unit="ratio", artifact=path, description=(
        f"{label}: accuracy gain of Max Epistemic over that of Max Entropy under the same budget "
        f"({spec['labels_per_round'][0]} -> {spec['labels_per_round'][-1]} labels), geometric mean over seeds of "
        f"the per-seed ratio with its interval on the log scale (the arithmetic mean where a ratio is <= 0; "
        f"paper: 1.6x){why}"), **ratio_spread(ratios))
    mean_ent = float(ent.loc[seeds].mean()) if seeds else math.nan
    out[f"gain_ratio_of_means.{arch}"] = entry(
        float(epi.loc[seeds].mean()) / mean_ent if seeds and mean_ent > 0 else None, "ratio", path,
        f"{label}: seed-mean accuracy gain of Max Epistemic over that of Max Entropy (None when Max Entropy's "
        "mean gain is <= 0)")
    curves = {s: sub[sub["strategy"] == s].sort_values("round") for s in ("max_entropy", "max_epistemic")}
    if spec["target_accuracy"] is not None:
        target, how = float(spec["target_accuracy"]), "the configured target_accuracy"
    else:
        # round 0 is the same model for every strategy of a seed (same initial set and weights)
        start = float(curves["max_entropy"].query("round == 0")["acc"].mean())
        end = float(curves["max_entropy"].groupby("round")["acc"].mean().iloc[-1])
        target = 0.5 * (start + end) if end > start else math.nan
        how = (f"mid-regime: halfway between the round-0 accuracy {start:.4f} and Max Entropy's final accuracy "
               f"{end:.4f} (seed means)" if end > start else
               f"undefined: Max Entropy's final accuracy {end:.4f} does not exceed the round-0 accuracy {start:.4f}")
    out[f"target_accuracy.{arch}"] = entry(target, "fraction", path, f"{label}: accuracy target of labels_to_target, {how}")
    needed = {}
    for s, c in curves.items():
        needed[s] = {seed: labels_to_reach(g["labelled"], g["acc"], target) for seed, g in c.groupby("seed")}
        out[f"labels_to_target.{arch}.{s}"] = entry(unit="labels", artifact=path, description=(
            f"{label}, {STRATEGY_LABELS[s]}: labels (initial set included) to reach test accuracy {target:.4f}, "
            "linear between rounds, mean over the seeds that reach it"), **_spread(list(needed[s].values())))
    fractions, missed = [], []
    for seed in sorted(set(needed["max_entropy"]) & set(needed["max_epistemic"])):
        a, b = needed["max_epistemic"][seed], needed["max_entropy"][seed]
        if math.isfinite(a) and math.isfinite(b) and b > 0:
            fractions.append(1.0 - a / b)
        else:
            missed.append(seed)
    note = f"; seed(s) {missed} left out: a curve never reaches the target" if missed else ""
    out[f"fewer_labels.{arch}"] = entry(unit="fraction", artifact=path, description=(
        f"{label}: fraction fewer labels Max Epistemic needs than Max Entropy to reach test accuracy {target:.4f} "
        f"({how}), 1 - L_epistemic / L_entropy per seed, labels counting the initial set (paper: 47.8% fewer)"
        f"{note}"), **_spread(fractions))
    return out
