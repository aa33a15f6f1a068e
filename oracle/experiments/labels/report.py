"""Experiment kind ``labels``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.labels`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from oracle.classifiers.evaluate import read_history_frame, read_metrics_frame, read_reliability_frame
from oracle.errors import DataError
from oracle.experiments._calibration import report as _calibration_report
from oracle.experiments._pairs import (one_file, over_seeds_and_rows, pair_rows, pairs_of_rows, read_row_values,
                                       with_seed_mean_se)
from oracle.experiments.labels import ARTIFACTS, COLORS, MODES, cell_name
from oracle.measures.power_laws import aggregate_over_seeds
from oracle.report.figures import print_widths, errorbar, panel_letters, reliability_diagram, save_figure, size_ticks, style
from oracle.report.numbers import converged_entries, entry, mean_spread, over_seeds, scale_spread


# --------------------------------------------------------------------------- data
def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``runs`` and ``reliability`` from the metrics files (``inputs["metrics"]``; runs with each
    cell's ``<value>_se_mean``, `oracle.experiments._pairs.with_seed_mean_se`), ``curves``
    from the training histories (``inputs["histories"]``), ``pairs`` (soft - hard accuracy per
    N and seed, paired per test row) from the predictions (``inputs["predictions"]``) and the
    world's samples (``inputs["samples"]``)."""
    views = spec.get("classifiers")  # the runs each model file stands for (plan.classifier_views)
    curves = read_history_frame(inputs["histories"], views)
    if "curve_acc" not in curves.columns:
        raise DataError("labels: the training histories have no test-accuracy curve; set classifiers.curve_size > 0")
    per_row, n_rows = read_row_values(inputs["predictions"], one_file(inputs, "samples"), views=views)
    runs = with_seed_mean_se(read_metrics_frame(inputs["metrics"], views), per_row)
    curves = curves[["arch", "cell", "seed", "N", "labels", "epoch", "train_loss", "curve_acc", "curve_epistemic"]]
    g = paired_gains(runs)
    arch = spec["archs"][0] if spec.get("archs") else str(runs["arch"].iloc[0])
    wanted = [(arch, int(s), cell_name("soft", n), cell_name("hard", n)) for n, s in zip(g["N"], g["seed"])]
    return {"runs": runs, "curves": curves.sort_values(["labels", "N", "seed", "epoch"]).reset_index(drop=True),
            "reliability": read_reliability_frame(inputs["metrics"], views),
            "pairs": pairs_of_rows(per_row, n_rows, wanted, ("acc",))}


def paired_gains(runs: pd.DataFrame, col: str = "acc") -> pd.DataFrame:
    """Soft minus hard ``col`` per (N, seed), the two arms of a seed having trained on the same
    images: columns N, seed, hard, soft, gain. DataError when a (N, seed) lacks an arm."""
    wide = runs.pivot_table(index=["N", "seed"], columns="labels", values=col, aggfunc="first")
    missing = [m for m in MODES if m not in wide.columns]
    if missing or wide[list(MODES)].isna().any().any():
        raise DataError(f"labels: runs lack the {missing or 'hard or soft'} arm at some (N, seed)")
    wide = wide[list(MODES)].reset_index()
    wide.columns.name = None
    wide["gain"] = wide["soft"] - wide["hard"]
    return wide


def gain_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per N: the seed means of hard and soft accuracy, the mean gain (soft - hard, fraction)
    with its std and se over seeds, and whether soft wins (mean gain > 0; ties are no win)."""
    g = paired_gains(runs)
    out = g.groupby("N").agg(hard=("hard", "mean"), soft=("soft", "mean"), gain=("gain", "mean"),
                             gain_std=("gain", "std"), n_seeds=("gain", "size")).reset_index()
    out["gain_se"] = out["gain_std"] / np.sqrt(out["n_seeds"])
    # accuracies are multiples of 1/n: a tie must not become a win through rounding
    out["soft_wins"] = out["gain"] > 1e-12
    return out


def gain_spread(pairs: pd.DataFrame, n: int) -> dict:
    """Soft - hard test accuracy at size `n` in percentage points, as `entry` keywords: the mean
    over seeds of the per-seed gains paired per test row (`pairs`), with the seeds' spread and the
    rows' part (`oracle.experiments._pairs.over_seeds_and_rows`). DataError when `pairs` lacks the size."""
    rows = pair_rows(pairs, "acc", cell_name("soft", n), cell_name("hard", n))
    if rows.empty:
        raise DataError(f"labels: pairs hold no soft - hard accuracy at N={n}; rerun the experiment's collect job")
    return scale_spread(over_seeds_and_rows(rows, "diff", int(rows["n_rows"].iloc[0])), 100.0)


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``label_comparison``: one row per (labels, N)."""
    if name != "label_comparison":
        raise DataError(f"labels: no table named {name!r} (tables: label_comparison)")
    return label_comparison(data["runs"])


def label_comparison(runs: pd.DataFrame) -> pd.DataFrame:
    """Accuracy (%), epistemic KL (nats), ECE against labels and true ECE (fractions) per
    (labels, N): mean and std over seeds; the overconfidence against the truth (mean over seeds)
    and how many of the cell's classifiers converged by the stopping rule."""


    cols = ["acc", "epistemic", "ece", "ece_posterior", "overconfidence_truth"]
    agg = aggregate_over_seeds(runs, cols, ["labels", "N"])
    rows = []
    for _, r in agg.iterrows():
        cell = runs[(runs["labels"] == r["labels"]) & (runs["N"] == r["N"])]
        known = "converged" in cell and cell["converged"].notna().all()
        rows.append({"Labels": r["labels"], "N": int(r["N"]), "Seeds": int(r["n_seeds"]),
                     "Converged": f"{int(cell['converged'].astype(bool).sum())}/{len(cell)}" if known else "n/a",
                     "Accuracy (%)": 100 * r["acc_mean"], "Accuracy std (%)": 100 * r["acc_std"],
                     "Epistemic KL (nats)": r["epistemic_mean"], "Epistemic std (nats)": r["epistemic_std"],
                     "ECE": r["ece_mean"], "ECE std": r["ece_std"], "True ECE": r["ece_posterior_mean"],
                     "True ECE std": r["ece_posterior_std"], "Overconf. truth": r["overconfidence_truth_mean"]})
    return pd.DataFrame(rows).sort_values(["Labels", "N"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- figures
def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``soft_vs_hard`` (Figure 7), ``reliability`` or ``calibration_agreement``."""
    if name == "soft_vs_hard":
        return soft_vs_hard(data["runs"], data["curves"], spec["curve_sizes"], stem)
    if name == "reliability":
        lo, hi = min(spec["sizes"]), max(spec["sizes"])
        selections = [(f"{mode} labels, N={n}", {"labels": mode, "N": n}) for n in (lo, hi) for mode in MODES]
        return reliability_diagram(_calibration_report.reliability_panels(data["reliability"], selections), stem)
    if name == "calibration_agreement":
        return _calibration_report.agreement_figure(data["runs"], stem, group="labels")
    raise DataError(f"labels: no figure named {name!r} (figures: {', '.join(n for n in ARTIFACTS if ARTIFACTS[n].type == 'figure')})")


def soft_vs_hard(runs: pd.DataFrame, curves: pd.DataFrame, curve_sizes: Sequence[int],
                 stem: str | os.PathLike) -> dict[str, Path]:
    """Figure 7: training curves at `curve_sizes` (top), final accuracy against N (bottom
    left), soft-minus-hard gain against N (bottom right); mean ± std over seeds."""


    agg = aggregate_over_seeds(runs, ["acc"], ["labels", "N"])
    gains = gain_summary(runs)
    bayes = 100.0 * float(runs["bayes_accuracy"].mean())
    with style():
        fig = Figure(figsize=(print_widths().page_in, 5.0), layout="constrained")
        grid = fig.add_gridspec(2, 2 * len(curve_sizes))
        panels = []
        for i, n in enumerate(curve_sizes):
            ax = fig.add_subplot(grid[0, 2 * i:2 * i + 2])
            panels.append(ax)
            for mode in MODES:
                c = curves[(curves["N"] == n) & (curves["labels"] == mode)].dropna(subset=["curve_acc"])
                per_epoch = c.groupby("epoch")["curve_acc"].agg(["mean", "std"]).fillna(0.0) * 100
                ax.plot(per_epoch.index, per_epoch["mean"], color=COLORS[mode], lw=1.2, label=f"{mode} labels")
                ax.fill_between(per_epoch.index, per_epoch["mean"] - per_epoch["std"],
                                per_epoch["mean"] + per_epoch["std"], color=COLORS[mode], alpha=0.2, lw=0)
            ax.set(xlabel="epoch", ylabel="test accuracy (%)" if i == 0 else "", title=f"N = {n}")
            if i == 0:
                ax.legend(loc="lower right")
        half = len(curve_sizes)
        ax_acc = fig.add_subplot(grid[1, :half])
        for mode in MODES:
            errorbar(ax_acc, agg[agg["labels"] == mode], "acc", COLORS[mode], f"{mode} labels", scale=100.0)
        ax_acc.axhline(bayes, color="k", ls=":", lw=1.2, label=f"Bayes-optimal {bayes:.2f}%")
        wins = int(gains["soft_wins"].sum())
        ax_acc.set(xlabel="dataset size N", ylabel="final test accuracy (%)",
                   title=f"final accuracy; soft wins {wins} of {len(gains)}")
        ax_acc.legend(loc="lower right")
        ax_gain = fig.add_subplot(grid[1, half:])
        ax_gain.errorbar(gains["N"], 100 * gains["gain"], yerr=100 * gains["gain_std"].fillna(0.0), color="k",
                         marker="o", ms=4, capsize=3, lw=1.2)
        ax_gain.axhline(0.0, color="0.5", lw=1)
        ax_gain.set(xlabel="dataset size N", ylabel="soft - hard accuracy (pp)", title="gain of soft labels, mean ± std")
        for ax in (ax_acc, ax_gain):
            size_ticks(ax, gains["N"])
        panel_letters([*panels, ax_acc, ax_gain])
        return save_figure(fig, stem)


# --------------------------------------------------------------------------- numbers
def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """The numbers of section 4.2 / appendix D, each an `oracle.report.numbers.entry`:
    * ``n_sizes`` and ``soft_wins``: at how many sizes the seed-mean accuracy of soft labels
      exceeds that of hard labels (the paper: 4 of 5);
    * ``gain.N<n>`` per size and ``largest_gain`` (percentage points, soft - hard, mean over
      seeds of the difference paired per test row, SE over seeds and test rows: `gain_spread`;
      the paper: up to ~1);
    * at the largest N, per arm: ``accuracy_<mode>_max_n``, ``epistemic_<mode>_max_n`` (nats),
      ``ece_<mode>_max_n`` against the labels (the paper: ECE = 0.018 for soft) and
      ``true_ece_<mode>_max_n`` against the exact posterior, and ``true_ece_reduction_max_n``
      (hard - soft, paired per seed);
    * ``calibration.*``: whether ECE against labels and against the truth agree
      (`oracle.experiments._calibration.report.agreement_numbers`).
    """
    runs, path = data["runs"], data_paths["runs"]
    gains = gain_summary(runs)
    out = {"n_sizes": entry(len(gains), "sizes", path, "training-set sizes compared"),
           "soft_wins": entry(int(gains["soft_wins"].sum()), "sizes", path,
                              f"sizes (of {len(gains)}) at which soft labels reach a higher seed-mean test "
                              "accuracy than hard labels")}
    for _, g in gains.iterrows():
        out[f"gain.N{int(g['N'])}"] = entry(unit="percentage points", artifact=data_paths["pairs"], description=(
            f"test accuracy of soft minus hard labels at N={int(g['N'])}, mean over seeds of the difference paired "
            "per test row (SE over seeds and the shared test rows)"), **gain_spread(data["pairs"], int(g["N"])))
    best = gains.loc[gains["gain"].idxmax()]
    out["largest_gain"] = entry(unit="percentage points", artifact=data_paths["pairs"], description=(
        f"largest accuracy gain of soft over hard labels, at N={int(best['N'])}"),
        **gain_spread(data["pairs"], int(best["N"])))
    n_max = int(runs["N"].max())
    for mode in MODES:
        at = runs[(runs["N"] == n_max) & (runs["labels"] == mode)]
        for col, tag, unit, what in (("acc", "accuracy", "fraction", "test accuracy"),
                                     ("epistemic", "epistemic", "nats", "epistemic KL E[KL(p || q)]"),
                                     ("ece", "ece", "fraction", "ECE against the world's labels (10 bins)"),
                                     ("ece_posterior", "true_ece", "fraction",
                                      "true ECE against the exact posterior (10 bins)")):
            out[f"{tag}_{mode}_max_n"] = entry(unit=unit, artifact=path, description=(
                f"{mode} labels: {what} at N={n_max}, mean over seeds"), **over_seeds(at, col))
    true_ece = paired_gains(runs[runs["N"] == n_max], "ece_posterior")
    reduction = (true_ece["hard"] - true_ece["soft"]).to_numpy(float)
    out["true_ece_reduction_max_n"] = entry(
        float(reduction.mean()), "fraction", path, f"true ECE of hard minus soft labels at N={n_max}, mean over seeds "
        "of the paired difference (> 0: soft labels are better calibrated against the exact posterior)",
        **mean_spread(float(np.std(reduction, ddof=1)) if len(reduction) > 1 else None, len(reduction)))
    out.update(_calibration_report.agreement_numbers(runs, path, who=("cell", "seed")))
    out.update(converged_entries(runs, ("labels", "N", "seed"), spec["arch_labels"], path))
    return out
