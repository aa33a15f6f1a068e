"""Experiment kind ``difficulty``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.difficulty`)."""

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
from oracle.report.figures import print_widths, panel_letters, save_figure, style
from oracle.experiments._pairs import over_seeds_and_rows
from oracle.report.numbers import converged_entries, entry, over_seeds

#: Columns of the ``learner`` data (one row per world and seed of the learner).
LEARNER_COLUMNS = ("world", "base_temperature", "arch", "N", "seed", "n_test", "num_classes", "test_error", "test_error_se",
                   "bayes_error", "bayes_error_se", "gap", "gap_se", "excess_error_truth", "converged", "stopped_by",
                   "kept_lr", "source")


def learner_frame(spec: Mapping, metrics_paths: Sequence[str]) -> pd.DataFrame:
    """One row per (world, seed) of the learner: its test error against the world's labels,
    the Bayes error E[1 - max p(y|x)] of the same test rows, ``gap`` = their difference (paired
    per row, with its SE over the test rows ``gap_se``) and
    ``excess_error_truth`` = E[max p(y|x) - p(yhat|x)] (mean confidence minus the two
    overconfidences: acc + (conf - acc) - (conf - E p(yhat|x)) = E p(yhat|x)); fractions. Only
    a model's scores on its own world's test set are kept. Empty (with the columns) when
    there is no learner."""
    from oracle.classifiers.evaluate import read_metrics_frame

    if not spec.get("learner"):
        return pd.DataFrame(columns=list(LEARNER_COLUMNS))
    m = read_metrics_frame(metrics_paths, spec.get("classifiers"))
    m = m[m["evalset"].astype(str) == m["cell"].astype(str)]
    want = {(w, s) for w in spec["worlds"] for s in spec["learner"]["seeds"]}
    have = set(zip(m["cell"].astype(str), m["seed"].astype(int)))
    if want - have:
        raise DataError(f"difficulty: no metrics of the learner on its own world's test set for (world, seed) "
                        f"{sorted(want - have)}")
    expected_acc = m["acc"] + m["overconfidence"] - m["overconfidence_truth"]
    out = pd.DataFrame({
        "world": m["cell"].astype(str), "base_temperature": m["cell"].map(spec["base_temperatures"]).astype(float),
        "arch": m["arch"], "N": m["N"].astype(int), "seed": m["seed"].astype(int), "n_test": m["n"].astype(int),
        "num_classes": m["num_classes"].astype(int),
        "test_error": 1.0 - m["acc"], "test_error_se": m["acc_se"], "bayes_error": 1.0 - m["bayes_accuracy"],
        "bayes_error_se": m["bayes_accuracy_se"], "gap": m["bayes_gap"], "gap_se": m["bayes_gap_se"],
        "excess_error_truth": m["bayes_accuracy"] - expected_acc, "converged": m["converged"],
        "stopped_by": m["stopped_by"], "kept_lr": m["kept_lr"], "source": m["source"]})
    order = {w: i for i, w in enumerate(spec["worlds"])}
    out = out.sort_values(["world", "seed"], key=lambda c: c.map(order) if c.name == "world" else c, kind="stable")
    return out.reset_index(drop=True)[list(LEARNER_COLUMNS)]


def learner_summary(learner: pd.DataFrame) -> pd.DataFrame:
    """Per world (sorted by tau): the learner's test error, Bayes error, gap and excess error
    against the truth, mean with std and SE over seeds (`oracle.report.numbers.over_seeds`; the
    gap's SE over seeds and test rows, `over_seeds_and_rows`)."""
    rows = []
    for world, g in learner.groupby("world", sort=False):
        row = {"world": world, "base_temperature": float(g["base_temperature"].iloc[0]), "arch": g["arch"].iloc[0],
               "N": int(g["N"].iloc[0]), "n_seeds": len(g), "n_test": int(g["n_test"].iloc[0])}
        for col in ("test_error", "bayes_error", "gap", "excess_error_truth"):
            # the seeds share the world's test rows: the gap's SE holds the rows' error too
            o = over_seeds_and_rows(g, col, int(g["n_test"].iloc[0])) if col == "gap" else over_seeds(g, col)
            row.update({col: o["value"], f"{col}_std": o["std"], f"{col}_se": o["se"]})
        rows.append(row)
    cols = ["world", "base_temperature", "arch", "N", "n_seeds", "n_test"] + [
        f"{c}{x}" for c in ("test_error", "bayes_error", "gap", "excess_error_truth") for x in ("", "_std", "_se")]
    return pd.DataFrame(rows, columns=cols).sort_values("base_temperature", kind="stable").reset_index(drop=True)


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``curve`` from the worlds' constants files (``inputs["constants"]``, in spec order);
    ``learner`` from the learner's metrics (``inputs["metrics"]``; `learner_frame`)."""
    rows = []
    for path in inputs["constants"]:
        try:
            c = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read world constants {path}: {exc}") from None
        w, mi = c["all"], c["all"]["mutual_information"]
        closed = c.get("bayes_error_closed_form") or {}
        rows.append({
            "world": c["world"], "base_temperature": float(c["base_temperature"]),
            "label_temperature": float(c["label_temperature"]), "prior": json.dumps(c["prior"]), "n": int(w["n"]),
            "bayes_error": w["bayes_error"]["mean"], "bayes_error_se": w["bayes_error"]["se"],
            "aleatoric": w["aleatoric"]["mean"], "aleatoric_se": w["aleatoric"]["se"],
            "mutual_information_bits": mi["bits"], "mutual_information_se": mi["se"],
            "normalized_mutual_information": mi["normalized"],
            "bayes_error_closed_form": closed.get("value", math.nan), "closed_form_z": closed.get("z", math.nan),
            "closed_form_method": closed.get("method", ""), "source": Path(path).as_posix(),
        })
    order = {w: i for i, w in enumerate(spec["worlds"])}
    df = pd.DataFrame(rows)
    if set(df["world"]) != set(order):
        raise DataError(f"difficulty: constants of worlds {sorted(df['world'])}, expected {sorted(order)}")
    return {"curve": df.sort_values("world", key=lambda s: s.map(order)).reset_index(drop=True),
            "learner": learner_frame(spec, inputs.get("metrics", []))}


def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``difficulty_vs_tau``: one row per world, sorted by tau; ``learner_vs_bayes``: one row
    per world of the learner (no rows without one)."""
    if name == "learner_vs_bayes":
        s = learner_summary(data["learner"])
        return pd.DataFrame({
            "World": s["world"], "tau": s["base_temperature"], "Architecture": s["arch"].map(lambda a: _arch_label(spec, a)),
            "N": s["N"],
            "Seeds": s["n_seeds"], "Test rows": s["n_test"], "Test error (%)": 100 * s["test_error"],
            "SE (%)": 100 * s["test_error_se"], "Bayes error (%)": 100 * s["bayes_error"],
            "Gap (pp)": 100 * s["gap"], "Gap SE (pp)": 100 * s["gap_se"], "Gap std (pp)": 100 * s["gap_std"],
            "Excess vs truth (pp)": 100 * s["excess_error_truth"],
            "Excess SE (pp)": 100 * s["excess_error_truth_se"]})
    if name != "difficulty_vs_tau":
        raise DataError(f"difficulty: no table named {name!r} (tables: difficulty_vs_tau, learner_vs_bayes)")
    c = data["curve"].sort_values("base_temperature", kind="stable")
    out = pd.DataFrame({
        "World": c["world"], "tau": c["base_temperature"], "Samples": c["n"].astype(int),
        "Bayes error (%)": 100 * c["bayes_error"], "SE (%)": 100 * c["bayes_error_se"],
        "Closed form (%)": 100 * c["bayes_error_closed_form"], "z": c["closed_form_z"],
        "Aleatoric (nats)": c["aleatoric"], "Aleatoric SE": c["aleatoric_se"],
        "I(X;Y) (bits)": c["mutual_information_bits"], "I SE": c["mutual_information_se"],
        "I/H(Y)": c["normalized_mutual_information"],
    })
    if not np.isfinite(out["Closed form (%)"].to_numpy(float)).any():
        out = out.drop(columns=["Closed form (%)", "z"])
    return out.reset_index(drop=True)


def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``difficulty_curve``: three panels against tau."""


    if name == "learner_vs_bayes_curve":
        return _learner_figure(data["learner"], spec, stem)
    if name != "difficulty_curve":
        raise DataError(f"difficulty: no figure named {name!r} (figures: difficulty_curve, learner_vs_bayes_curve)")
    c = data["curve"].sort_values("base_temperature", kind="stable")
    tau = c["base_temperature"].to_numpy(float)
    panels = (("bayes_error", "bayes_error_se", 100.0, "Bayes error (%)"),
              ("aleatoric", "aleatoric_se", 1.0, "floor E[H(p(y|x))] (nats)"),
              ("mutual_information_bits", "mutual_information_se", 1.0, "I(X;Y) (bits)"))
    with style():
        fig = Figure(figsize=(print_widths().page_in, 2.8), layout="constrained")
        axes = fig.subplots(1, 3)
        for ax, (col, se, scale, label) in zip(axes, panels):
            ax.errorbar(tau, scale * c[col], yerr=scale * c[se].fillna(0.0), marker="o", ms=4, capsize=2, lw=1.2,
                        label="Monte Carlo ± SE")
            if col == "bayes_error" and np.isfinite(c["bayes_error_closed_form"].to_numpy(float)).any():
                ax.plot(tau, 100.0 * c["bayes_error_closed_form"], "s", mfc="none", color="k", ms=7,
                        label="closed form")
            ax.set(xlabel="base temperature τ", ylabel=label, title=label.split(" (")[0])
            ax.legend(loc="best")
        panel_letters(axes)
        return save_figure(fig, stem)


def _arch_label(spec: Mapping, arch: str) -> str:
    """The display name of a learner architecture (classifiers.archs.<arch>.label)."""
    return (spec.get("arch_labels") or {}).get(arch, arch)


#: The titles of the learner figure's panels (a) and (b), each sharing a word with what the
#: caption says of it (`oracle.report.figures.caption_panel_problems`).
LEARNER_TITLES = ("learner and Bayes error", "gap and excess error, mean ± SE")


def _learner_figure(learner: pd.DataFrame, spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """Left: test error and Bayes error (%) against tau; right: gap and excess error (pp).
    Without a learner both panels stand, titled, each saying there is none: the caption names them."""
    with style():
        fig = Figure(figsize=(print_widths().page_in, 3.0), layout="constrained")
        ax_a, ax_b = fig.subplots(1, 2)
        if learner.empty:
            for ax, title in zip((ax_a, ax_b), LEARNER_TITLES):
                ax.axis("off")
                ax.set_title(title)
                ax.text(0.5, 0.5, "no learner in this experiment\n(config key\nexperiments.<name>.learner)",
                        ha="center", va="center", transform=ax.transAxes)
            panel_letters([ax_a, ax_b])
            return save_figure(fig, stem)
        s = learner_summary(learner)
        tau = s["base_temperature"].to_numpy(float)
        for _, g in learner.groupby("seed"):
            ax_a.plot(g["base_temperature"], 100 * g["test_error"], color="C0", lw=0.6, alpha=0.35)
        ax_a.errorbar(tau, 100 * s["test_error"], yerr=100 * s["test_error_se"].fillna(0.0), color="C0", marker="o",
                      ms=4, capsize=2, lw=1.4, label=f"{_arch_label(spec, s['arch'].iloc[0])}, N={int(s['N'].iloc[0])}: test error")
        ax_a.plot(tau, 100 * s["bayes_error"], "s--", color="k", ms=5, mfc="none", label="Bayes error (same rows)")
        ax_a.set(xlabel="base temperature τ", ylabel="error (%)", title=LEARNER_TITLES[0])
        ax_b.errorbar(tau, 100 * s["gap"], yerr=100 * s["gap_se"].fillna(0.0), marker="o", ms=4, capsize=2, lw=1.4,
                      label="gap to Bayes error")
        ax_b.errorbar(tau, 100 * s["excess_error_truth"], yerr=100 * s["excess_error_truth_se"].fillna(0.0),
                      marker="s", ms=4, capsize=2, lw=1.2, ls="--", label="excess vs truth")
        ax_b.axhline(0.0, color="k", lw=0.8)
        ax_b.set(xlabel="base temperature τ", ylabel="percentage points", title=LEARNER_TITLES[1])
        for ax in (ax_a, ax_b):
            ax.legend(loc="best")
        panel_letters([ax_a, ax_b])
        return save_figure(fig, stem)


def learner_numbers(learner: pd.DataFrame, path: str) -> dict[str, dict]:
    """Per world of the learner: ``gap.<world>``, ``learner_error.<world>`` and
    ``excess_error_truth.<world>``, mean with std and SE over seeds (fractions), ``num_classes.<world>``
    and ``learner_n.<world>`` (its training-set size); none without
    a learner; ``converged.<arch>`` (`oracle.report.numbers.converged_entries`) over every world
    and seed."""
    out: dict[str, dict] = converged_entries(learner, ("world", "seed"), {}, path)
    for world, g in learner.groupby("world", sort=False):
        tau, arch, n = float(g["base_temperature"].iloc[0]), g["arch"].iloc[0], int(g["N"].iloc[0])
        who = f"world {world} (tau={tau:g}): {arch} trained on N={n}"
        out[f"gap.{world}"] = entry(unit="fraction", artifact=path, description=f"{who}: test error minus the Bayes "
                                    "error of the same test rows (paired per row), mean over seeds (SE over seeds "
                                    "and test rows)", **over_seeds_and_rows(g, "gap", int(g["n_test"].iloc[0])))
        out[f"num_classes.{world}"] = entry(int(g["num_classes"].iloc[0]), "classes", path, f"world {world}: K")
        out[f"learner_n.{world}"] = entry(n, "samples", path, f"{who}: the learner's training-set size")
        out[f"learner_error.{world}"] = entry(unit="fraction", artifact=path, description=f"{who}: test error "
                                              "against the world's labels, mean over seeds",
                                              **over_seeds(g, "test_error"))
        out[f"excess_error_truth.{world}"] = entry(unit="fraction", artifact=path, description=f"{who}: "
                                                   "E[max p(y|x) - p(yhat|x)], the excess error against the truth, "
                                                   "mean over seeds", **over_seeds(g, "excess_error_truth"))
    return out


def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """Per world: ``bayes_error.<world>``, ``aleatoric_floor.<world>``,
    ``mutual_information.<world>`` (± SE over its samples), ``base_temperature.<world>``, and
    ``bayes_error_closed_form.<world>`` with ``closed_form_z.<world>`` where a closed form
    exists; ``bayes_error_increases_with_tau`` (true when the estimates rise with tau); with a
    learner, `learner_numbers`."""
    c, path = data["curve"], data_paths["curve"]
    out: dict[str, dict] = {}
    for _, r in c.iterrows():
        w, n = r["world"], int(r["n"])
        out[f"base_temperature.{w}"] = entry(float(r["base_temperature"]), "1", path, f"world {w}: base temperature tau")
        out[f"bayes_error.{w}"] = entry(float(r["bayes_error"]), "fraction", path,
                                        f"world {w} (tau={r['base_temperature']:g}): Bayes error E[1 - max p(y|x)] over "
                                        f"{n} samples", se=float(r["bayes_error_se"]), se_over="samples")
        out[f"aleatoric_floor.{w}"] = entry(float(r["aleatoric"]), "nats", path,
                                            f"world {w}: aleatoric floor E[H(p(y|x))] over {n} samples",
                                            se=float(r["aleatoric_se"]), se_over="samples")
        out[f"mutual_information.{w}"] = entry(float(r["mutual_information_bits"]), "bits", path,
                                               f"world {w}: I(X;Y) = H(Y) - E[H(p(y|x))]",
                                               se=float(r["mutual_information_se"]), se_over="samples")
        if np.isfinite(r["bayes_error_closed_form"]):
            out[f"bayes_error_closed_form.{w}"] = entry(float(r["bayes_error_closed_form"]), "fraction", path,
                                                        f"world {w}: Bayes error in closed form "
                                                        f"({r['closed_form_method']})")
            out[f"closed_form_z.{w}"] = entry(float(r["closed_form_z"]), "1", path,
                                              f"world {w}: (Monte Carlo - closed form) / SE of the Bayes error")
    by_tau = c.sort_values("base_temperature", kind="stable")["bayes_error"].to_numpy(float)
    out["bayes_error_increases_with_tau"] = entry(bool(np.all(np.diff(by_tau) > 0)), "bool", path,
                                                  "the Bayes error estimates rise strictly with tau (Theisen et al., "
                                                  "Prop. 2)")
    if "learner" in data and not data["learner"].empty:
        out.update(learner_numbers(data["learner"], data_paths["learner"]))
    return out
