"""Experiment kind ``scaling``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.scaling`)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from oracle.classifiers.evaluate import read_metrics_frame, read_reliability_frame
from oracle.errors import ConfigError, DataError
from oracle.experiments._calibration import report as _calibration_report
from oracle.experiments._pairs import (Pair, log_ratio_contrasts, one_file, over_seeds_and_rows, pairs_of_rows,
                                       read_row_values, with_seed_mean_se)
from oracle.experiments.scaling import ARTIFACTS, FIT_VALUES
from oracle.experiments.scaling.claim_numbers import arch_fit, claim_numbers
from oracle.experiments.scaling.contrasts import contrast_numbers
from oracle.experiments.scaling.learners import learner_numbers, learners_table
from oracle.measures.power_laws import aggregate_over_seeds, fit_each_seed, fit_per_seed, fit_seed_mean, power_law
from oracle.report.figures import (print_widths, errorbar, log_tick_labels, palette, panel_letters,
                                   reliability_diagram, save_figure,
                                   size_ticks, style)
from oracle.report.numbers import entry, over_seeds, scale_spread


# --------------------------------------------------------------------------- data
def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``runs`` and ``reliability`` from the classifiers' metrics files (``inputs["metrics"]``;
    runs with each cell's ``<value>_se_mean``, `oracle.experiments._pairs.with_seed_mean_se`, for
    the two-way SE of its mean over seeds), ``contrasts`` (two archs' KL ratio at each N paired per
    seed and row: `oracle.experiments._pairs.log_ratio_contrasts`), ``fits`` (every value of `FIT_VALUES`) from runs, ``pairs`` (`next_size_pairs`) from their
    predictions (``inputs["predictions"]``) and the world's samples (``inputs["samples"]``)."""
    views = spec.get("classifiers")  # the runs each model file stands for (plan.classifier_views)
    per_row, n_rows = read_row_values(inputs["predictions"], one_file(inputs, "samples"), views=views)
    runs = with_seed_mean_se(read_metrics_frame(inputs["metrics"], views), per_row)
    return {"runs": runs, "fits": all_fits(runs), "reliability": read_reliability_frame(inputs["metrics"], views),
            "pairs": pairs_of_rows(per_row, n_rows, next_size_pairs(runs), ("epistemic",)),
            "contrasts": log_ratio_contrasts(per_row, runs)}


def next_size_pairs(runs: pd.DataFrame) -> list[Pair]:
    """(arch, seed, cell at N, cell at the next N of the arch) for every seed trained at both:
    the pairs whose KL difference the plateau claim reads (its last step of N)."""
    out = []
    for arch, sub in runs.groupby("arch", sort=True):
        cells = sub.drop_duplicates("N").sort_values("N")[["N", "cell"]].to_numpy().tolist()
        for (_, lo), (_, hi) in zip(cells, cells[1:]):
            seeds = set(sub.loc[sub["cell"] == lo, "seed"]) & set(sub.loc[sub["cell"] == hi, "seed"])
            out += [(arch, int(s), lo, hi) for s in sorted(seeds)]
    return out


def all_fits(runs: pd.DataFrame) -> pd.DataFrame:
    """`power_law_fits` of every value of `FIT_VALUES`, one long table (column ``value``)."""
    return pd.concat([power_law_fits(runs, v) for v in FIT_VALUES], ignore_index=True)


def power_law_fits(df: pd.DataFrame, value: str = "epistemic") -> pd.DataFrame:
    """Power laws ``value ~ c N^-alpha`` per architecture (`oracle.measures.power_laws`), one
    long table: ``kind="seed"``: one fit per (arch, seed); ``kind="arch"``: alpha = mean ± std
    over those (the paper's "alpha ± std over seeds"); ``kind="curve"``: one fit to the
    seed-mean curve (the dashed lines of the figures). A curve with fewer than two N, or a
    non-positive value, has NaN fields and a ``note``."""


    out = []
    for arch, sub in df.groupby("arch", sort=True):
        if sub["N"].nunique() < 2 or not bool((sub[value] > 0).all()):
            note = "fewer than two N" if sub["N"].nunique() < 2 else f"{value} <= 0 at some N"
            out.append({"kind": "arch", "arch": arch, "note": note})
            continue
        for fit, tag in ((fit_each_seed, "seed"), (fit_per_seed, "arch"), (fit_seed_mean, "curve")):
            out += [{"kind": tag, **r.to_dict()} for _, r in fit(sub, value_col=value).iterrows()]
    fits = pd.DataFrame(out)
    fits.insert(1, "value", value)
    fits["note"] = fits["note"].fillna("") if "note" in fits else ""
    return fits


def select_runs(df: pd.DataFrame, labels: Mapping[str, str], sizes: Sequence[int] | None = None) -> pd.DataFrame:
    """The rows of ``df`` for the architectures of `labels` ({name: display label}, in config
    order) and `sizes` (None = all), with ``arch`` replaced by the display label. DataError
    when nothing is left; ConfigError when two architectures share a label (their runs would
    be pooled)."""
    shown = list(labels.values())
    dup = sorted({lab for lab in shown if shown.count(lab) > 1})
    if dup:
        raise ConfigError(f"config key 'classifiers.archs': label {dup[0]!r} is used by more than one architecture")
    sub = df[df["arch"].isin(list(labels))]
    if sizes:
        sub = sub[sub["N"].isin([int(n) for n in sizes])]
    if sub.empty:
        raise DataError(f"no classifier results for archs {list(labels)} and N in {sizes or 'any'}")
    sub = sub.copy()
    sub["arch"] = sub["arch"].map(labels)
    return sub.reset_index(drop=True)


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``accuracy_vs_bayes`` (paper Table 1) or ``epistemic_vs_n`` (Table 2, with the std over
    seeds beside each architecture)."""
    labels = spec["arch_labels"]
    runs = data["runs"]
    if name == "accuracy_vs_bayes":
        size = spec["table_size"]
        return accuracy_vs_bayes(select_runs(runs, labels, [size] if size else None))
    if name == "epistemic_vs_n":
        archs = spec["table_archs"] or spec["archs"]
        return epistemic_vs_n(select_runs(runs, {a: labels[a] for a in archs}, spec["table_sizes"]), with_std=True)
    if name == "learners":
        return learners_table(select_runs(runs, labels), ["arch", "N"])
    raise DataError(f"scaling: no table named {name!r} (tables: accuracy_vs_bayes, epistemic_vs_n, learners)")


def accuracy_vs_bayes(df: pd.DataFrame, acc_col: str = "acc") -> pd.DataFrame:
    """Accuracy, error and gap to the Bayes-optimal accuracy per architecture at its largest N.

    Over seeds: ``Accuracy (%)`` = 100 * mean(acc_col), ``Accuracy std (%)`` (ddof=1),
    ``Error (%)`` = 100 - accuracy, ``Bayes (%)`` = 100 * mean(bayes_accuracy) and
    ``Gap (%)`` = Bayes - accuracy; with the per-row paired gap (column ``bayes_gap`` of the
    metrics, for the world's labels) ``Gap SE (%)``, its SE over seeds and the shared test rows
    (`oracle.experiments._pairs.over_seeds_and_rows`). Rows sorted by accuracy, best first.
    """
    _check_runs(df, ["arch", "N", "seed", acc_col, "bayes_accuracy"])
    rows = []
    for arch, runs in df.groupby("arch", sort=True):
        n_max = runs["N"].max()
        agg = aggregate_over_seeds(runs[runs["N"] == n_max], [acc_col, "bayes_accuracy"], ["arch", "N"]).iloc[0]
        acc, bayes = 100.0 * agg[f"{acc_col}_mean"], 100.0 * agg["bayes_accuracy_mean"]
        at = runs[runs["N"] == n_max]
        gap_se = (100.0 * over_seeds_and_rows(at, "bayes_gap", int(at["n"].iloc[0]))["se"]
                  if acc_col == "acc" and {"bayes_gap", "bayes_gap_se", "n"} <= set(at.columns) else math.nan)
        rows.append({"Architecture": arch, "N": int(n_max), "Seeds": int(agg["n_seeds"]), "Accuracy (%)": acc,
                     "Accuracy std (%)": 100.0 * agg[f"{acc_col}_std"], "Error (%)": 100.0 - acc,
                     "Bayes (%)": bayes, "Gap (%)": bayes - acc,
                     "Gap SE (%)": gap_se if gap_se is not None else math.nan})
    return pd.DataFrame(rows).sort_values("Accuracy (%)", ascending=False, kind="stable").reset_index(drop=True)


def epistemic_vs_n(df: pd.DataFrame, value_col: str = "epistemic", with_std: bool = False) -> pd.DataFrame:
    """Mean over seeds of ``value_col`` (epistemic KL, nats): one row per N (``Dataset size N``),
    one column per architecture; NaN where an architecture lacks that N. ``with_std`` adds
    ``<arch> std`` columns."""


    _check_runs(df, ["arch", "N", "seed", value_col])
    agg = aggregate_over_seeds(df, [value_col], ["arch", "N"])
    wide = agg.pivot(index="N", columns="arch", values=f"{value_col}_mean")
    out = pd.DataFrame({"Dataset size N": wide.index.astype(int)})
    for arch in wide.columns:
        out[arch] = wide[arch].to_numpy()
        if with_std:
            out[f"{arch} std"] = agg.pivot(index="N", columns="arch", values=f"{value_col}_std")[arch].to_numpy()
    return out


def _check_runs(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:

    if not isinstance(df, pd.DataFrame) or df.empty:
        raise DataError("expected a non-empty data frame with one row per classifier run")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"run data frame lacks column(s) {missing}; has {list(df.columns)}")
    if "labels" in df.columns and df["labels"].nunique() > 1:
        raise DataError(f"run data frame mixes label modes {sorted(df['labels'].unique())}; select one first")
    return df


# --------------------------------------------------------------------------- figures
def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``scaling_panels`` (paper Figure 2), ``epistemic_curves`` (Figures 5, 6),
    ``calibration_vs_n``, ``reliability`` (smallest and largest N per architecture) or
    ``calibration_agreement``."""
    runs = select_runs(data["runs"], spec["arch_labels"])
    if name == "scaling_panels":
        return scaling_panels(runs, stem)
    if name == "epistemic_curves":
        return epistemic_curves(runs, stem)
    if name == "calibration_vs_n":
        return _calibration_report.calibration_vs_n(runs, stem)
    if name == "calibration_agreement":
        return _calibration_report.agreement_figure(runs, stem)
    if name == "reliability":
        rel = data["reliability"]
        selections = [(f"{label}, N={n}", {"arch": arch, "N": n}) for arch, label in spec["arch_labels"].items()
                      for n in (rel[rel["arch"] == arch]["N"].min(), rel[rel["arch"] == arch]["N"].max())]
        return reliability_diagram(_calibration_report.reliability_panels(rel, selections), stem, ncols=2)
    figures = ", ".join(n for n, a in ARTIFACTS.items() if a.type == "figure")
    raise DataError(f"scaling: no figure named {name!r} (figures: {figures})")


def _epistemic_fits(df: pd.DataFrame) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The power laws of the epistemic KL per architecture: (the fit to the seed means, mean ± std
    of the per-seed fits), each indexed by arch; (None, None) for an experiment of one N, which
    compares architectures at that N and fits nothing (a line needs two N)."""
    if df["N"].nunique() < 2:
        return None, None
    return fit_seed_mean(df, "epistemic").set_index("arch"), fit_per_seed(df, "epistemic").set_index("arch")


def scaling_panels(df: pd.DataFrame, stem: str | os.PathLike, acc_col: str = "acc") -> dict[str, Path]:
    """Four panels over dataset size N (mean ± std over seeds): (a) total cross-entropy
    (nats), log-log, with the aleatoric floor E[H(p)] as a line; (b) epistemic KL (nats),
    log-log, dashed power-law fits to the seed-mean curves; (c) accuracy (%) against the
    Bayes-optimal accuracy line; (d) the total loss stacked: the aleatoric floor (grey; the
    mean E[H(p)] over the test rows the classifiers were scored on, labelled so: the report's
    worlds table gives the floor over all of the world's samples) and
    each architecture's epistemic KL above it (shaded to its seed-mean total), linear y. The
    exponent alpha per architecture (mean ± std over per-seed fits) is in (b)'s legend: as its
    own bar panel it was a whole panel for one bar in a one-architecture experiment."""
    _check_runs(df, ["arch", "N", "seed", "total", "aleatoric", "epistemic", acc_col, "bayes_accuracy"])
    archs = sorted(df["arch"].unique())
    colors = palette(archs)
    agg = aggregate_over_seeds(df, ["total", "epistemic", acc_col], ["arch", "N"])
    mean_fits, seed_fits = _epistemic_fits(df)
    floor = float(df["aleatoric"].mean())
    bayes = 100.0 * float(df["bayes_accuracy"].mean())
    n_grid = np.geomspace(df["N"].min(), df["N"].max(), 50)
    with style():
        fig = Figure(figsize=(print_widths().page_in, 5.4), layout="constrained")
        (ax_a, ax_b), (ax_c, ax_d) = fig.subplots(2, 2)
        for arch in archs:
            a = agg[agg["arch"] == arch]
            errorbar(ax_a, a, "total", colors[arch], arch)
            if seed_fits is None:
                errorbar(ax_b, a, "epistemic", colors[arch], arch)
            else:
                s = seed_fits.loc[arch]
                spread = "" if math.isnan(s["alpha_std"]) else f" ± {s['alpha_std']:.2f}"
                # two-line labels: a legend as wide as "EfficientNet (test): α = 0.21 ± 0.01" left no room
                # for the panels of a 5.5 in figure (constrained layout collapsed them)
                errorbar(ax_b, a, "epistemic", colors[arch], f"{arch}:\nα = {s['alpha']:.2f}{spread}")
                fit = mean_fits.loc[arch]
                ax_b.plot(n_grid, power_law(n_grid, fit["coef"], fit["alpha"]), ls="--", lw=1, color=colors[arch])
            errorbar(ax_c, a, acc_col, colors[arch], arch, scale=100.0)
            if len(archs) <= 2:  # more shaded bands than two only muddy each other
                ax_d.fill_between(a["N"], floor, floor + a["epistemic_mean"], color=colors[arch], alpha=0.2, lw=0)
            ax_d.plot(a["N"], floor + a["epistemic_mean"], color=colors[arch], marker="o", ms=3, lw=1.2,
                      label=arch)  # the title says floor + epistemic
        ax_a.axhline(floor, color="k", ls=":", lw=1.2, label=f"floor E[H(p)],\ntest rows {floor:.3g}")
        ax_a.set(yscale="log", xlabel="dataset size N", ylabel="total cross-entropy (nats)", title="total loss")
        ax_b.set(yscale="log", xlabel="dataset size N", ylabel="epistemic KL(p || q) (nats)",
                 title="epistemic error" + ("" if seed_fits is None else ", fits dashed"))
        ax_c.axhline(bayes, color="k", ls=":", lw=1.2, label=f"Bayes-optimal {bayes:.2f}%")
        ax_c.set(xlabel="dataset size N", ylabel="test accuracy (%)", title="accuracy")
        ax_d.fill_between(n_grid, 0.0, floor, color="0.8", lw=0, label=f"aleatoric floor {floor:.3g}")
        ax_d.set(xlabel="dataset size N", ylabel="cross-entropy (nats)", title="floor + epistemic", ylim=(0, None))
        for ax in (ax_a, ax_b, ax_c, ax_d):
            ax.legend(loc="best")
            size_ticks(ax, df["N"])
            if ax is not ax_d:
                log_tick_labels(ax, "y")
        panel_letters([ax_a, ax_b, ax_c, ax_d])
        return save_figure(fig, stem)


def epistemic_curves(df: pd.DataFrame, stem: str | os.PathLike) -> dict[str, Path]:
    """Epistemic KL vs N, one panel per architecture: every seed's curve (faint), the mean ±
    std over seeds, the dashed power-law fit to the seed mean, and alpha as mean ± std of the
    per-seed fits in the panel's upper right corner (the title names the architecture: one line at
    any panel width)."""


    _check_runs(df, ["arch", "N", "seed", "epistemic"])
    archs = sorted(df["arch"].unique())
    colors = palette(archs)
    agg = aggregate_over_seeds(df, ["epistemic"], ["arch", "N"])
    mean_fits, seed_fits = _epistemic_fits(df)
    ncols = min(3, len(archs))
    nrows = math.ceil(len(archs) / ncols)
    with style():
        width = print_widths().column_in if ncols == 1 else print_widths().page_in
        fig = Figure(figsize=(width, (width / ncols) * 0.9 * nrows + 0.2), layout="constrained")
        axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
        for ax, arch in zip(axes, archs):
            runs = df[df["arch"] == arch]
            for _, curve in runs.groupby("seed"):
                curve = curve.sort_values("N")
                ax.plot(curve["N"], curve["epistemic"], color=colors[arch], alpha=0.3, lw=0.8)
            errorbar(ax, agg[agg["arch"] == arch], "epistemic", colors[arch], "mean ± std")
            if seed_fits is not None:
                n_grid = np.geomspace(runs["N"].min(), runs["N"].max(), 50)
                fit = mean_fits.loc[arch]
                s = seed_fits.loc[arch]
                spread = "" if math.isnan(s["alpha_std"]) else f" ± {s['alpha_std']:.3f}"
                ax.plot(n_grid, power_law(n_grid, fit["coef"], fit["alpha"]), "k--", lw=1, label="power-law fit")
                # upper right, where a falling curve leaves room: one line at any panel width
                ax.text(0.97, 0.96, f"α = {s['alpha']:.3f}{spread}", transform=ax.transAxes, ha="right", va="top")
            ax.set(yscale="log", xlabel="dataset size N", ylabel="epistemic KL (nats)", title=arch)
            size_ticks(ax, runs["N"])
            log_tick_labels(ax, "y")
            ax.legend(loc="best")
        for ax in axes[len(archs):]:
            ax.set_visible(False)
        panel_letters(axes)
        return save_figure(fig, stem)


# --------------------------------------------------------------------------- numbers
def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """The section's in-text numbers, each an `oracle.report.numbers.entry`:
    * ``n_min``, ``n_max``, ``n_sizes``; ``test_size`` and ``test_bayes_accuracy`` (E[max_y p(y|x)] on the
      test set the classifiers were scored on);
    * per architecture: ``alpha.<arch>`` (mean ± std over seeds of the per-seed exponents of
      the epistemic KL), ``ece_alpha.<arch>`` and ``true_ece_alpha.<arch>`` (the same for the
      ECE against labels and against the truth), ``accuracy.<arch>``, ``ece.<arch>`` and
      ``true_ece.<arch>`` at the table size (default the largest N),
      ``epistemic_min_n.<arch>``/``epistemic_max_n.<arch>``, ``accuracy_min_n``/``_max_n`` (SE
      over seeds and the shared test rows, `over_seeds_and_rows`), and
      ``epistemic_reduction.<arch>`` = KL(N_min) / KL(N_max) of the seed means;
      ``aleatoric.<arch>``, the floor E[H(p)] on the test set its runs were scored on (se over
      that set); the learners (`oracle.experiments.scaling.learners.learner_numbers`): ``curvature.<arch>`` (the log-log curvature of
      its epistemic KL, mean ± std over seeds), ``converged.<arch>`` (classifiers converged by the
      stopping rule) and ``abs_overconfidence_truth.<arch>`` (mean |overconfidence against the
      truth| over its classifiers in the upper half of the grid of N);
    * the accuracy_vs_bayes table: ``bayes_gap.<arch>`` (percentage points) and its range over
      architectures ``bayes_gap_min``/``bayes_gap_max``;
    * ``calibration.*``: whether ECE against labels and against the truth agree
      (`oracle.experiments._calibration.report.agreement_numbers`);
    * two archs paired per seed (and row): ``log_kl_ratio_max_n``, ``alpha_diff``, ``log_kl_drop_low_diff``
      ``.<a>.<b>`` (`oracle.experiments.scaling.contrasts.contrast_numbers`).
    """
    runs, fits = data["runs"], data["fits"]
    runs_path, fits_path = data_paths["runs"], data_paths["fits"]
    labels = spec["arch_labels"]
    out: dict[str, dict] = {}
    if runs.empty:
        return out
    n_sel = int(spec["table_size"] or runs["N"].max())
    out["n_min"] = entry(int(runs["N"].min()), "samples", runs_path, "smallest training-set size N")
    out["n_max"] = entry(int(runs["N"].max()), "samples", runs_path, "largest training-set size N")
    out["n_sizes"] = entry(int(runs["N"].nunique()), "sizes", runs_path, "training-set sizes N of the grid")
    out["n_seeds"] = entry(int(runs["seed"].nunique()), "seeds", runs_path, "classifier seeds of the grid")
    out["test_size"] = entry(int(runs["n"].iloc[0]), "samples", runs_path, "oracle test set every classifier is scored on")
    out["test_bayes_accuracy"] = entry(float(runs["bayes_accuracy"].iloc[0]), "fraction", runs_path,
                                       "Bayes-optimal accuracy E[max_y p(y|x)] on the oracle test set",
                                       se=float(runs["bayes_accuracy_se"].iloc[0]), se_over="test set")
    for arch in spec["archs"]:
        sub = runs[runs["arch"] == arch]
        if sub.empty:
            continue
        label = labels[arch]
        for value, key, what in (("epistemic", "alpha", "epistemic KL"), ("ece", "ece_alpha", "ECE against labels"),
                                 ("ece_posterior", "true_ece_alpha", "true ECE")):
            r = arch_fit(fits, arch, value)
            if r is not None:
                n_seeds = int(r["n_seeds"]) if np.isfinite(r.get("n_seeds", np.nan)) else None
                out[f"{key}.{arch}"] = entry(float(r["alpha"]), "1", fits_path,
                                             f"{label}: exponent of {what} ~ N^-alpha, mean ± std over {n_seeds} "
                                             "seeds", std=r.get("alpha_std"), se=r.get("alpha_se"),
                                             se_over="seeds", n_seeds=n_seeds)
        at = sub[sub["N"] == n_sel]
        if len(at):
            for col, key, what in (("acc", "accuracy", "test accuracy (world labels)"),
                                   ("ece", "ece", "ECE against the world labels"),
                                   ("ece_posterior", "true_ece", "true ECE against the exact posterior")):
                out[f"{key}.{arch}"] = entry(unit="fraction", artifact=runs_path, description=(
                    f"{label}: {what} at N={n_sel}, mean over seeds"), **over_seeds(at, col))
        lo, hi = int(sub["N"].min()), int(sub["N"].max())
        for tag, n in (("min_n", lo), ("max_n", hi)):
            rows = sub[sub["N"] == n]
            n_rows = int(rows["n"].iloc[0])
            out[f"epistemic_{tag}.{arch}"] = entry(unit="nats", artifact=runs_path, description=(
                f"{label}: epistemic KL E[KL(p || q)] at N={n}, mean over seeds (SE over seeds and test rows)"),
                **over_seeds_and_rows(rows, "epistemic", n_rows))
            out[f"accuracy_{tag}.{arch}"] = entry(unit="fraction", artifact=runs_path, description=(
                f"{label}: test accuracy at N={n}, mean over seeds (SE over seeds and test rows)"),
                **over_seeds_and_rows(rows, "acc", n_rows))
        # every run of an architecture is scored on the same test set: its floor E[H(p)] and that
        # set's Monte Carlo se (what the claims' equality test across architectures reads)
        top = sub[sub["N"] == hi]
        if {"aleatoric", "aleatoric_se"} <= set(top.columns):
            out[f"aleatoric.{arch}"] = entry(float(top["aleatoric"].mean()), "nats", runs_path, (
                f"{label}: aleatoric floor E[H(p(y|x))] on its test set at N={hi}, mean over seeds"),
                se=float(top["aleatoric_se"].mean()), se_over="test set")
        out.update(learner_numbers(sub, arch_fit(fits, arch, "epistemic"), arch, label, runs_path, fits_path))
        e_lo, e_hi = sub[sub["N"] == lo]["epistemic"].mean(), sub[sub["N"] == hi]["epistemic"].mean()
        if lo != hi and e_hi > 0:
            out[f"epistemic_reduction.{arch}"] = entry(float(e_lo / e_hi), "ratio", runs_path,
                                                       f"{label}: epistemic KL at N={lo} over N={hi} (seed means)")
    out.update(_bayes_gap_numbers(data, spec, runs_path))
    out.update(claim_numbers(runs, fits, data["pairs"], spec, runs_path, data_paths["pairs"]))
    out.update(_calibration_report.agreement_numbers(runs, runs_path))
    out.update(contrast_numbers(data.get("contrasts"), fits, runs, labels, data_paths.get("contrasts", ""), fits_path,
                                runs_path))
    return out


def _bayes_gap_numbers(data: Mapping[str, Any], spec: Mapping, path: str) -> dict[str, dict]:
    """Gap to the Bayes accuracy per architecture (percentage points) and its range, as in the
    accuracy_vs_bayes table (computed by the same function)."""
    frame = table("accuracy_vs_bayes", data, spec)
    by_label = {v: k for k, v in spec["arch_labels"].items()}
    out: dict[str, dict] = {}
    runs = data["runs"]
    for _, row in frame.iterrows():
        name = by_label.get(row["Architecture"], row["Architecture"])
        at = runs[(runs["arch"] == name) & (runs["N"] == int(row["N"]))]
        spread = over_seeds_and_rows(at, "bayes_gap", int(at["n"].iloc[0])) if "bayes_gap" in at else {}
        spread = {k: v for k, v in scale_spread(spread, 100.0).items() if k != "value"}
        out[f"bayes_gap.{name}"] = entry(float(row["Gap (%)"]), "percentage points", path,
                                         f"{row['Architecture']}: Bayes accuracy minus test accuracy at "
                                         f"N={int(row['N'])} (accuracy_vs_bayes table; SE over seeds and the shared "
                                         "test rows, the gap paired per row)", **spread)
    if len(frame):
        out["table_n"] = entry(int(frame["N"].max()), "samples", path, "training-set size N of the "
                               "accuracy_vs_bayes table (Table 1's is 50,000 of 3 classes)")
        gaps = frame["Gap (%)"].astype(float)
        out["bayes_gap_min"] = entry(float(gaps.min()), "percentage points", path,
                                     "smallest gap to the Bayes accuracy over architectures")
        out["bayes_gap_max"] = entry(float(gaps.max()), "percentage points", path,
                                     "largest gap to the Bayes accuracy over architectures")
    return out
