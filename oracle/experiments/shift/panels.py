"""The figure of experiment kind ``shift`` (paper Figure 3, panels a-f), from its
``configurations`` data (`oracle.experiments.shift.configuration_frame`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from oracle.report.figures import print_widths, panel_letters, save_figure, style

#: Marker and colour index of each shift type (`oracle.experiments.shift.TYPES`).
_STYLE = {"baseline": ("o", 7), "prior": ("D", 0), "noise": ("v", 3), "prior+noise": ("s", 1),
          "variant": ("*", 2), "variant+noise": ("P", 4)}


def _kl_axis(conf: pd.DataFrame) -> np.ndarray:
    """The x of panels (a), (b): the exact KL for world variants, KL_y otherwise (the paper's axis)."""
    kl_y = conf["kl_y_empirical"].fillna(conf["kl_y_target"]).fillna(0.0).to_numpy(float)
    variant = conf["shift_type"].str.startswith("variant").to_numpy()
    exact = conf["kl_exact"].to_numpy(float)
    return np.where(variant & np.isfinite(exact), exact, kl_y)


def _dodge(x: np.ndarray, step: float) -> np.ndarray:
    """Horizontal offsets (in the unit of x, `step` apart) that set side by side the markers of
    panels (a), (b) whose x lie within 1.5% of the x range of each other (the baseline and the
    noise configurations all have KL_y near 0); the data x is unchanged, only where the marker
    is drawn. In data units, not points: the axis limits then hold every marker drawn, however
    many stand side by side at the ends of the axis (in points, the outer ones were cut off)."""
    order = np.argsort(x, kind="stable")
    span = float(np.ptp(x)) or 1.0
    out = np.zeros(len(x))
    start = 0
    for end in range(1, len(order) + 1):
        if end == len(order) or x[order[end]] - x[order[end - 1]] > 0.015 * span:
            group = order[start:end]
            out[group] = (np.arange(len(group)) - (len(group) - 1) / 2) * step
            start = end
    return out


def shift_panels(conf: pd.DataFrame, fits: Mapping[str, Mapping], stem: str | os.PathLike) -> dict[str, Path]:
    """Six panels (module docstring of `oracle.experiments.shift`); error bars: std over runs.
    Accuracies are on each configuration's own (shifted) test set."""
    colors = sns.color_palette("colorblind", 8)
    x = _kl_axis(conf)
    acc, acc_std = 100 * conf["acc"].to_numpy(float), 100 * conf["acc_std"].fillna(0.0).to_numpy(float)
    drop = -conf["delta_pp"].to_numpy(float)
    types = conf["shift_type"].to_numpy()
    with style():
        fig = Figure(figsize=(print_widths().page_in, 5.6), layout="constrained")
        axes = fig.subplots(2, 3).ravel()
        # markers side by side where configurations share nearly one KL, 4% of the KL range apart
        drawn = x + _dodge(x, 0.04 * (float(np.ptp(x)) or 1.0))
        for t, (marker, ci) in _STYLE.items():
            m = types == t
            if not m.any():
                continue
            label = {"variant": "world variant (exact KL)", "variant+noise": "variant + noise"}.get(t, t)
            for ax, y, err in ((axes[0], acc, acc_std), (axes[1], drop, acc_std)):
                ax.errorbar(drawn[m], y[m], yerr=err[m], fmt=marker, color=colors[ci], ms=4.5, capsize=2, label=label)
        for ax in axes[:2]:
            ax.margins(x=0.08)  # room for the half marker past the outermost drawn x
        axes[0].set(xlabel="KL (nats)", ylabel="test accuracy under shift (%)", title="accuracy vs KL")
        axes[1].axhline(0.0, color="k", lw=0.8)
        axes[1].set(xlabel="KL (nats)", ylabel="accuracy drop (pp)", title="drop vs KL")
        prior = conf[conf["shift_type"].isin(["baseline", "prior"])].sort_values("kl_y_empirical")
        axes[2].errorbar(prior["kl_y_empirical"], 100 * prior["acc"], yerr=100 * prior["acc_std"].fillna(0.0),
                         marker="D", color=colors[0], capsize=2)
        axes[2].set(xlabel="KL_y empirical (nats)", ylabel="test accuracy under shift (%)",
                    title="prior shift only")
        noise = conf[conf["shift_type"].isin(["baseline", "noise"])].sort_values("noise_std")
        axes[3].errorbar(noise["noise_std"], 100 * noise["acc"], yerr=100 * noise["acc_std"].fillna(0.0),
                         marker="v", color=colors[3], capsize=2, label="trained on x'")
        oracle = noise[np.isfinite(noise["oracle_acc_noisy"].to_numpy(float))]
        if len(oracle):
            axes[3].errorbar(oracle["noise_std"], 100 * oracle["oracle_acc_noisy"],
                             yerr=100 * oracle["oracle_acc_noisy_se"], marker="x", ls="--", color="k", capsize=2,
                             label="oracle on x'")
        axes[3].set(xlabel="noise σ ([-1, 1] scale)", ylabel="accuracy (%)", title="covariate shift only")
        axes[3].legend(loc="best", handlelength=1.2)
        present = [t for t in _STYLE if t != "baseline" and (types == t).any()]
        means = [drop[types == t].mean() for t in present]
        spread = [drop[types == t].std(ddof=1) if (types == t).sum() > 1 else 0.0 for t in present]
        bars = axes[4].bar(range(len(present)), means, yerr=spread, capsize=3, edgecolor="k", lw=0.6,
                           color=[colors[_STYLE[t][1]] for t in present])
        # the value on every bar: a drop near 0 pp is a bar of no height, seen only by its label
        axes[4].bar_label(bars, labels=[f"{m:.1f}" for m in means], padding=2)
        axes[4].axhline(0.0, color="k", lw=0.8)
        axes[4].margins(y=0.2)
        axes[4].set_xticks(range(len(present)), present, rotation=30, ha="right")
        axes[4].set(ylabel="mean accuracy drop (pp)", title="drop by shift type")
        _fit_panel(axes[5], conf, fits, colors)
        # one legend of the shift types for (a) and (b), above the panels: inside, it covered points
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncol=3, frameon=False)
        panel_letters(axes)
        return save_figure(fig, stem)


def _fit_panel(ax, conf: pd.DataFrame, fits: Mapping[str, Mapping], colors) -> None:
    drop = -conf["delta_pp"].to_numpy(float)
    kl_y = conf["kl_y_empirical"].fillna(conf["kl_y_target"]).fillna(0.0).to_numpy(float)
    paper = ~conf["shift_type"].str.startswith("variant").to_numpy()
    exact = conf["kl_exact"].to_numpy(float)
    for name, xs, mask, color, what in (("kl_y", kl_y, paper, colors[0], "on KL_y"),
                                        ("exact", exact, np.isfinite(exact), colors[2], "on exact KL")):
        fit = fits[name]
        ax.scatter(xs[mask], drop[mask], color=color, s=25)
        if np.isfinite(fit["r2"]):
            grid = np.linspace(np.nanmin(xs[mask]), np.nanmax(xs[mask]), 20)
            ax.plot(grid, fit["intercept"] + fit["slope"] * grid, color=color, lw=1.2,
                    label=f"{what}: R² {fit['r2']:.2f}, n {fit['n']}")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set(xlabel="KL (nats)", ylabel="accuracy drop (pp)", title="linear fits of drop on KL")
    # under the axes: inside, "best" still covered a point (the data fill every corner)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, handlelength=1.2, borderaxespad=0)
