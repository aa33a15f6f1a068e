"""Experiment kind ``shift``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.shift`)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.classifiers.evaluate import read_metrics_frame
from oracle.classifiers.identity import run_identities
from oracle.errors import DataError
from oracle.io.atomic import read_json
from oracle.decomposition import mean_se
from oracle.experiments._pairs import Pair, one_file, over_seeds_and_rows, pair_rows, pairs_of_rows, read_row_values
from oracle.experiments.shift import ARTIFACTS, shift_type
from oracle.experiments.shift.panels import shift_panels
from oracle.measures.divergences import categorical_kl, counts_kl, label_kl
from oracle.measures.accuracy_estimators import r2
from oracle.measures.prior_shift import bayes_prior_cost, prior_adjusted_classes
from oracle.report.numbers import converged_entries, entry, mean_spread, scale_spread


# --------------------------------------------------------------------------- data
def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``runs`` from the metrics (``inputs["metrics"]``) and histories (``inputs["histories"]``:
    validation accuracy, realised class counts); ``configurations`` from runs, the world
    variants' divergence checks (``inputs["divergences"]``) and the noisy test sets' constants
    (``inputs["noise"]``); ``pairs`` (`configuration_pairs`: accuracy of one configuration minus
    another's, per arch and seed, paired per test row) from the predictions
    (``inputs["predictions"]``) and the baseline world's samples (``inputs["samples"]``), which
    also give each run's logit-adjusted accuracy and each configuration's Bayes cost of its
    training prior (`prior_rows`)."""
    views = spec.get("classifiers")  # the runs each model file stands for (plan.classifier_views)
    runs = read_metrics_frame(inputs["metrics"], views)
    hist = {}
    for path in inputs["histories"]:
        h = read_json(path)
        last = h["history"][-1] if h.get("history") else {}
        counts = (h.get("shift") or {}).get("counts")
        hist |= {(r["arch"], r["cell"], int(r["seed"])): {
            "val_acc": last.get("val_acc", math.nan), "counts": json.dumps(counts) if counts else "",
            "kl_y_empirical": counts_kl(counts, baseline_prior(spec)) if counts else math.nan,
            "smallest_class_rows": smallest_class(counts, spec) if counts else math.nan,
            "unique_rows": (h.get("shift") or {}).get("unique_rows", math.nan),
            "resampled_classes": json.dumps((h.get("shift") or {}).get("resampled", [])),
        } for r in run_identities(h, views, path)}
    missing = [k for k in zip(runs["arch"], runs["cell"], runs["seed"].astype(int)) if k not in hist]
    if missing:
        raise DataError(f"shift: no history for classifier(s) {missing[:3]}")
    pool = pool_counts(spec, inputs, sorted({(k[1], k[2]) for k in hist if not hist[k]["counts"]}))
    for k, h in hist.items():
        if not h["counts"] and (k[1], k[2]) in pool:
            h["smallest_class_rows"] = smallest_class(pool[(k[1], k[2])], spec)
    per_row, n_rows = read_row_values(inputs["predictions"], one_file(inputs, "samples"), prior_rows(spec), views)
    keys = list(zip(runs["arch"], runs["cell"], runs["seed"].astype(int)))
    unscored = [k for k in keys if k not in per_row]
    if unscored:
        raise DataError(f"shift: no predictions for classifier(s) {unscored[:3]}")
    adjusted = {k: mean_se(per_row[k]["acc_adjusted"]) for k in keys}
    extra = pd.DataFrame([{**hist[k], "acc_adjusted": adjusted[k]["mean"], "acc_adjusted_se": adjusted[k]["se"]}
                          for k in keys])
    runs = pd.concat([runs.reset_index(drop=True), extra], axis=1)
    runs.insert(3, "shift_type", [shift_type(spec, c) for c in runs["cell"]])
    divergences = {d["world"]: d for d in map(read_json, inputs.get("divergences", []))}
    noise = {round(float(n["sigma"]), 12): n for n in map(read_json, inputs.get("noise", []))}
    costs = {k[1]: mean_se(v["bayes_cost"]) for k, v in per_row.items()}  # a cell's cost: the same per classifier
    return {"runs": runs, "configurations": configuration_frame(spec, runs, divergences, noise, costs),
            "pairs": pairs_of_rows(per_row, n_rows, configuration_pairs(spec, runs), ("acc",))}


def pool_counts(spec: Mapping, inputs: Mapping[str, Sequence[str]],
                wanted: Sequence[tuple[str, int]]) -> dict[tuple[str, int], np.ndarray]:
    """Class counts int64 [K] of the training set (the pool's first N rows of the seed's order)
    of each wanted (cell, seed) whose configuration has no ``prior``, from its world's splits and
    samples (``inputs["pool_splits"]``, ``inputs["pool_samples"]``, one per
    `oracle.experiments.shift.pool_worlds` in that order); cells with a prior are left out."""
    from oracle.experiments.shift import pool_worlds
    from oracle.io.sample_rows import read_rows
    from oracle.io.splits import read_splits_h5, training_indices

    worlds = pool_worlds(spec)
    splits, samples = list(inputs.get("pool_splits") or []), list(inputs.get("pool_samples") or [])
    if len(splits) != len(worlds) or len(samples) != len(worlds):
        raise DataError(f"shift collect inputs pool_splits/pool_samples: expected one file per pool world "
                        f"({', '.join(worlds) or 'none'}), got {len(splits)} and {len(samples)}")
    files = dict(zip(worlds, zip(splits, samples)))
    read: dict[str, dict] = {}
    out = {}
    for cell, seed in wanted:
        c = spec["configurations"].get(cell)
        if c is None or c["prior"] is not None:
            continue
        split_path, sample_path = files[c["world"]]
        order = read.setdefault(c["world"], read_splits_h5(split_path))
        rows = read_rows(sample_path, training_indices(order, seed, spec["size"]), fields=("label",))
        out[(cell, seed)] = np.bincount(rows["label"], minlength=int(rows["attrs"]["num_classes"]))
    return out


def smallest_class(counts: Sequence[int] | np.ndarray, spec: Mapping) -> int:
    """The fewest rows of a class the baseline world draws (P0 > 0) among class counts [K]."""
    p0 = baseline_prior(spec)
    c = np.asarray(counts, dtype=np.int64)
    return int(c[np.asarray(p0, dtype=np.float64) > 0].min() if p0 is not None else c.min())


def baseline_prior(spec: Mapping) -> list[float] | None:
    """P0 of KL_y (the paper's Eq. 8): the baseline world's class prior (None: uniform)."""
    return spec["world_priors"][spec["world"]]


def training_prior(spec: Mapping, cell: str, k: int) -> list[float]:
    """The class prior [K] of configuration `cell`'s training set: its ``prior``, else its
    world's, else uniform."""
    c = spec["configurations"][cell]
    prior = c["prior"] if c["prior"] is not None else spec["world_priors"][c["world"]]
    return list(prior) if prior is not None else [1.0 / k] * k


def prior_rows(spec: Mapping):
    """The per-row values (`oracle.experiments._pairs.read_row_values`'s ``extra``) a shift
    classifier adds on the baseline's test rows, for its configuration's training prior pi_train
    and the test world's prior pi_world (its samples file's): ``acc_adjusted`` (1 where
    argmax [log q - log pi_train + log pi_world] is the label, else 0) and ``bayes_cost``
    (max_y p(y|x) - p(yhat|x), yhat the world's Bayes rule under pi_train:
    `oracle.measures.prior_shift`)."""
    def extra(key, log_q, log_p, labels, attrs) -> dict[str, np.ndarray]:
        cell = key[1]
        if cell not in spec["configurations"]:
            raise DataError(f"shift: predictions of classifier {key} of no configuration "
                            f"({', '.join(spec['configurations'])})")
        train, world = training_prior(spec, cell, log_p.shape[1]), np.asarray(attrs["prior"], dtype=np.float64)
        adjusted = prior_adjusted_classes(log_q, train, world)
        return {"acc_adjusted": (adjusted == labels).astype(np.float64),
                "bayes_cost": bayes_prior_cost(log_p, world, train)["cost"]}
    return extra


def configuration_pairs(spec: Mapping, runs: pd.DataFrame) -> list[Pair]:
    """(arch, seed, cell a, cell b) for every two configurations (a before b in config order)
    that a classifier of the same arch and seed trained on: every difference of accuracies the
    shift claims may compare, each to be paired on the baseline's test rows."""
    cells = list(spec["configurations"])
    have = set(zip(runs["arch"], runs["cell"], runs["seed"].astype(int)))
    return [(arch, int(seed), a, b) for arch, seed in sorted({(a, int(s)) for a, _, s in have})
            for i, a in enumerate(cells) for b in cells[i + 1:] if (arch, a, seed) in have and (arch, b, seed) in have]


def configuration_frame(spec: Mapping, runs: pd.DataFrame, divergences: Mapping[str, Mapping],
                        noise: Mapping[float, Mapping], costs: Mapping[str, Mapping]) -> pd.DataFrame:
    """One row per configuration (config order), aggregated over seeds and architectures;
    `costs` {cell: {"mean", "se"}} the Bayes cost of its training prior (fraction, per row)."""
    base = runs[runs["cell"] == spec["baseline"]]
    base_acc, base_adjusted = base["acc"].mean(), base["acc_adjusted"].mean()
    rows = []
    for cell, c in spec["configurations"].items():
        r = runs[runs["cell"] == cell]
        if r.empty:
            raise DataError(f"shift: no results for configuration {cell!r}")
        t_world = spec["label_temperatures"][c["world"]]
        k = int(r["num_classes"].iloc[0])
        train_prior = training_prior(spec, cell, k)
        test_prior = spec["world_priors"][spec["world"]] or [1.0 / k] * k
        div = divergences.get(c["world"]) if c["world"] != spec["world"] else None
        if c["world"] != spec["world"] and div is None:
            raise DataError(f"shift: no divergence check for world {c['world']!r}")
        exact = math.nan
        if c["noise_std"] == 0 and t_world == 1.0:
            exact = categorical_kl(train_prior, test_prior) + (div["closed_form"]["tau"] if div else 0.0)
        nz = noise.get(round(c["noise_std"], 12), {}) if c["noise_std"] > 0 else {}
        rows.append({
            "cell": cell, "label": c["label"], "shift_type": shift_type(spec, cell), "world": c["world"],
            "prior": json.dumps(c["prior"]), "noise_std": c["noise_std"], "n_runs": len(r),
            "kl_y_target": label_kl(c["prior"], baseline_prior(spec)) if c["prior"] is not None else math.nan,
            "kl_y_empirical": r["kl_y_empirical"].mean(), "kl_y_empirical_std": r["kl_y_empirical"].std(ddof=1),
            "kl_exact": exact,
            "kl_monte_carlo": div["monte_carlo"]["mean"] if div else math.nan,
            "kl_monte_carlo_se": div["monte_carlo"]["se"] if div else math.nan,
            "kl_monte_carlo_z": div["z"] if div else math.nan,
            "acc": r["acc"].mean(), "acc_std": r["acc"].std(ddof=1), "acc_se_rows": r["acc_se"].mean(),
            "delta_pp": 100.0 * (r["acc"].mean() - base_acc),
            "acc_adjusted": r["acc_adjusted"].mean(), "acc_adjusted_std": r["acc_adjusted"].std(ddof=1),
            "acc_adjusted_se_rows": r["acc_adjusted_se"].mean(),
            "delta_adjusted_pp": 100.0 * (r["acc_adjusted"].mean() - base_adjusted),
            "bayes_cost_pp": 100.0 * costs[cell]["mean"], "bayes_cost_se_pp": 100.0 * costs[cell]["se"],
            "smallest_class_rows_min": r["smallest_class_rows"].min(),
            "smallest_class_rows_max": r["smallest_class_rows"].max(),
            "val_acc": r["val_acc"].mean(), "val_acc_std": r["val_acc"].std(ddof=1),
            "bayes_accuracy": r["bayes_accuracy"].mean(),
            "posterior_shift": nz.get("posterior_shift", {}).get("mean", math.nan),
            "posterior_shift_se": nz.get("posterior_shift", {}).get("se", math.nan),
            "oracle_acc_noisy": nz.get("oracle_accuracy_noisy", {}).get("mean", math.nan),
            "oracle_acc_noisy_se": nz.get("oracle_accuracy_noisy", {}).get("se", math.nan),
        })
    return pd.DataFrame(rows)


def drop_fits(conf: pd.DataFrame) -> dict[str, dict]:
    """Linear fits of the accuracy drop (pp) against KL: ``kl_y`` over the paper-style
    configurations (not world variants; x = empirical KL_y, or the target where no counts
    were drawn), ``exact`` over those with an exact KL. Each {"r2", "slope", "intercept", "n"}."""
    drop = -conf["delta_pp"].to_numpy(float)
    kl_y = conf["kl_y_empirical"].fillna(conf["kl_y_target"]).fillna(0.0).to_numpy(float)
    paper = ~conf["shift_type"].str.startswith("variant").to_numpy()
    exact = np.isfinite(conf["kl_exact"].to_numpy(float))
    out = {}
    for name, x, mask in (("kl_y", kl_y, paper), ("exact", conf["kl_exact"].to_numpy(float), exact)):
        xs, ys = x[mask], drop[mask]
        fit = {"r2": r2(xs, ys), "slope": math.nan, "intercept": math.nan, "n": int(mask.sum())}
        if np.isfinite(fit["r2"]):
            fit["slope"], fit["intercept"] = (float(v) for v in np.polyfit(xs, ys, 1))
        out[name] = fit
    return out


def type_comparisons(conf: pd.DataFrame, pairs: pd.DataFrame, path: str, conf_path: str | None = None
                     ) -> dict[str, dict]:
    """The paper's "shift type matters more than magnitude", asked directly: how many more
    percentage points of accuracy a shift of p(x|y) costs than a shift of the prior at a
    comparable divergence, both scored on the baseline's test set (the baseline cancels: the
    difference is acc(imbalance) - acc(other)), the mean over (arch, seed) of the two classifiers'
    difference paired per test row (`pairs`, read from `path`); SE over those and the test rows
    (`oracle.experiments._pairs.over_seeds_and_rows`: the two-way (seed x test row) SE).

    * ``noise_vs_imbalance``: the noise-only configuration with the largest drop against the
      prior-only configuration with the largest drop, at the paper's measure of divergence
      (KL_y, Table 7: a noise configuration keeps the balanced prior, KL_y ~ 0; the KL of
      clipped noise in x is not tractable);
    * ``variant_vs_imbalance``: the world variant of exact KL (a base-temperature shift of
      p(x|y)) with the largest KL not above the largest prior-only KL, against the prior-only
      configuration with the largest drop among those whose exact KL is at least as large.

    An entry whose configurations are missing has value None and ``posed`` False, its
    description saying what is missing. With `conf_path` (where `conf` was read), each posed
    entry's imbalance arm also gives ``<key>_smallest_class``: its smallest class's training rows,
    fewest over seeds (where the claims ask whether the arm is a prior or a starved class)."""
    types = conf["shift_type"].to_numpy()
    drop = -conf["delta_pp"]
    exact = np.isfinite(conf["kl_exact"].to_numpy(float))
    imb = conf[(types == "prior") & exact]
    noise = conf[types == "noise"]
    variants = conf[(types == "variant") & exact]
    out: dict[str, dict] = {}

    def compare(key: str, other: pd.Series | None, imb_rows: pd.DataFrame, what: str, why_not: str) -> None:
        if other is None or imb_rows.empty:
            out[key] = entry(None, "percentage points", path, f"not posed: {why_not}", posed=False)
            return
        i = imb_rows.loc[drop[imb_rows.index].idxmax()]
        rows = pair_rows(pairs, "acc", i["cell"], other["cell"])
        if rows.empty:
            raise DataError(f"shift: pairs hold no accuracy of {i['cell']!r} against {other['cell']!r}; rerun the "
                            "experiment's collect job")
        out[key] = entry(unit="percentage points", artifact=path, description=(
            f"accuracy drop of {other['label']} ({what}) minus that of {i['label']} (exact KL {i['kl_exact']:.3g} nats, "
            f"KL_y {i['kl_y_empirical']:.3g}), the prior shift with the largest drop at a divergence at least as "
            "large; > 0: the shift of p(x|y) costs more. Mean over (arch, seed) of the difference paired per test "
            "row"), posed=True, **scale_spread(over_seeds_and_rows(rows, "diff", int(rows["n_rows"].iloc[0])), 100.0))
        if conf_path is not None and np.isfinite(i.get("smallest_class_rows_min", np.nan)):
            out[f"{key}_smallest_class"] = entry(int(i["smallest_class_rows_min"]), "rows", conf_path, (
                f"training rows of the smallest class of {i['label']} (its arm of {key}; fewest over seeds)"))

    n_best = noise.loc[drop[noise.index].idxmax()] if len(noise) else None
    compare("noise_vs_imbalance", n_best, imb,
            f"sigma {n_best['noise_std']:g}, KL_y {n_best['kl_y_empirical']:.3g}" if n_best is not None else "",
            "needs a noise-only and a prior-only configuration")
    top_kl = float(imb["kl_exact"].max()) if len(imb) else -math.inf
    near = variants[variants["kl_exact"] <= top_kl + 1e-12]
    v = near.loc[near["kl_exact"].idxmax()] if len(near) else None
    compare("variant_vs_imbalance", v, imb[imb["kl_exact"] >= (v["kl_exact"] if v is not None else 0) - 1e-12],
            f"world {v['world']}, exact KL {v['kl_exact']:.3g} nats" if v is not None else "",
            "needs a prior-only configuration and a world variant of exact KL no larger than the largest prior shift's "
            f"({top_kl:.3g} nats)" if len(imb) else "needs a prior-only configuration and a world variant of exact KL")
    return out


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``shift_configurations`` (paper Table 7), ``shift_accuracy`` (Table 8), ``shift_axes`` (Table 9)."""
    c = data["configurations"]
    if name == "shift_configurations":
        return pd.DataFrame({
            "Configuration": c["label"], "pi": [_prior_text(p) for p in c["prior"]], "sigma": c["noise_std"],
            "World": c["world"], "KL_y (target)": c["kl_y_target"], "KL_y (empirical)": c["kl_y_empirical"],
            "± std": c["kl_y_empirical_std"], "Exact KL": c["kl_exact"], "Monte Carlo KL": c["kl_monte_carlo"],
            "± SE": c["kl_monte_carlo_se"], "Smallest class (rows)": _range_text(c),
            "Bayes cost of pi (pp)": c["bayes_cost_pp"]})
    if name == "shift_accuracy":
        return pd.DataFrame({
            "Configuration": c["label"], "Test Acc (%)": 100 * c["acc"], "± std": 100 * c["acc_std"],
            "Δ TestAcc (pp)": c["delta_pp"], "Logit-adjusted Acc (%)": 100 * c["acc_adjusted"],
            "Adjusted ± std": 100 * c["acc_adjusted_std"], "Δ adjusted (pp)": c["delta_adjusted_pp"],
            "Bayes cost of pi (pp)": c["bayes_cost_pp"], "Test Error (%)": 100 * (1 - c["acc"]),
            "Val Acc (%)": 100 * c["val_acc"], "Val ± std": 100 * c["val_acc_std"]})
    if name == "shift_axes":
        return shift_axes(c)
    raise DataError(f"shift: no table named {name!r} (tables: {', '.join(a for a in ARTIFACTS if ARTIFACTS[a].type == 'table')})")


def _prior_text(prior_json: str | float) -> str:
    """The prior column as text; "null" (no resampling: the pool's rows) reads back from CSV as NaN."""
    p = json.loads(prior_json) if isinstance(prior_json, str) else None
    return "(pool)" if p is None else "(" + ", ".join(f"{v:g}" for v in p) + ")"


def _range_text(c: pd.DataFrame) -> list[str | None]:
    """The smallest class's rows over a configuration's classifiers as text, "lo-hi" (one
    number when they agree); None where no counts were recorded."""
    out: list[str | None] = []
    for lo, hi in zip(c["smallest_class_rows_min"].astype(float), c["smallest_class_rows_max"].astype(float)):
        out.append(None if not math.isfinite(lo) else f"{lo:.0f}" if lo == hi else f"{lo:.0f}–{hi:.0f}")
    return out


def shift_axes(c: pd.DataFrame) -> pd.DataFrame:
    """Table 9: prior-only rows (baseline first) beside noise-only rows, aligned by position."""
    prior = c[c["shift_type"].isin(["baseline", "prior"])]
    noise = c[c["shift_type"] == "noise"].sort_values("noise_std", kind="stable")
    n = max(len(prior), len(noise))
    left = pd.DataFrame({"Prior config": prior["label"].tolist(), "KL_y": prior["kl_y_empirical"].tolist(),
                         "KL_y std": prior["kl_y_empirical_std"].tolist(),
                         "Test Acc (%)": (100 * prior["acc"]).tolist(), "Test Acc std (%)": (100 * prior["acc_std"]).tolist(),
                         "Δ (pp)": prior["delta_pp"].tolist()})
    right = pd.DataFrame({"sigma": noise["noise_std"].tolist(), "Noise Test Acc (%)": (100 * noise["acc"]).tolist(),
                          "Noise Test Acc std (%)": (100 * noise["acc_std"]).tolist(),
                          "Noise Δ (pp)": noise["delta_pp"].tolist(),
                          "Oracle posterior shift (nats)": noise["posterior_shift"].tolist(),
                          "Oracle acc on x' (%)": (100 * noise["oracle_acc_noisy"]).tolist()})
    return pd.concat([left.reindex(range(n)), right.reindex(range(n))], axis=1)


# --------------------------------------------------------------------------- figure and numbers
def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``shift_panels`` (paper Figure 3, panels a-f)."""
    if name != "shift_panels":
        raise DataError(f"shift: no figure named {name!r} (figures: shift_panels)")
    return shift_panels(data["configurations"], drop_fits(data["configurations"]), stem)


def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """``r2_drop_vs_kl_y`` (the paper's 0.04) and ``r2_drop_vs_exact_kl`` with their point counts
    ``r2_points_*``; `type_comparisons` (the shift-type claim); per configuration: ``noise_std``,
    ``accuracy``, ``accuracy_change`` (pp), ``accuracy_adjusted`` (logit-adjusted), ``bayes_cost``
    (pp, of the training prior), ``val_accuracy``, ``kl_y_target``,
    ``kl_y_empirical``, ``kl_exact`` and ``kl_monte_carlo`` (world variants),
    ``posterior_shift`` and ``oracle_accuracy_noisy`` (noise)."""
    c, path = data["configurations"], data_paths["configurations"]
    out: dict[str, dict] = {}
    for tag, fit in drop_fits(c).items():
        what = "KL_y of the paper's configurations" if tag == "kl_y" else "the exact KL where it exists"
        name = "kl_y" if tag == "kl_y" else "exact_kl"
        out[f"r2_drop_vs_{name}"] = entry(
            fit["r2"], "1", path, f"R^2 of a linear fit of the accuracy drop against {what} ({fit['n']} configurations)")
        out[f"r2_points_{name}"] = entry(fit["n"], "configurations", path, f"configurations in the fit of r2_drop_vs_{name}")
    out.update(type_comparisons(c, data["pairs"], data_paths["pairs"], path))
    out.update(converged_entries(data["runs"], ("cell", "seed"), spec["arch_labels"], data_paths["runs"]))
    for _, r in c.iterrows():
        cell, lab, n = r["cell"], r["label"], int(r["n_runs"])
        out[f"accuracy.{cell}"] = entry(r["acc"], "fraction", path, f"{lab}: baseline test accuracy, mean over {n} runs",
                                        **mean_spread(r["acc_std"], n))
        out[f"accuracy_change.{cell}"] = entry(r["delta_pp"], "percentage points", path,
                                               f"{lab}: test accuracy minus the baseline configuration's")
        out[f"noise_std.{cell}"] = entry(float(r["noise_std"]), "1", path, f"{lab}: std of the training images' noise")
        if "acc_adjusted" in r:  # data collected before these columns lack them
            out[f"accuracy_adjusted.{cell}"] = entry(
                r["acc_adjusted"], "fraction", path, f"{lab}: logit-adjusted baseline test accuracy (argmax of log q - "
                f"log pi_train + log pi_world), mean over {n} runs",
                **mean_spread(r["acc_adjusted_std"], n))
            out[f"bayes_cost.{cell}"] = entry(
                r["bayes_cost_pp"], "percentage points", path, f"{lab}: exact Bayes cost of its training prior on the "
                "baseline test rows, in expectation over the labels", se=r["bayes_cost_se_pp"], se_over="test rows")
        out[f"val_accuracy.{cell}"] = entry(r["val_acc"], "fraction", path,
                                            f"{lab}: accuracy on the held-out part of its shifted training set",
                                            **mean_spread(r["val_acc_std"], n))
        for col, desc in (("kl_y_target", "KL_y(pi || P0) of the target prior, P0 the baseline world's class prior"),
                          ("kl_y_empirical", "KL_y of the realised class counts, mean over runs"),
                          ("kl_exact", "exact KL(p_train || p_test)"),
                          ("kl_monte_carlo", "Monte Carlo KL(p_train || p_test) from the flow's own log densities"),
                          ("posterior_shift", "oracle's posterior shift E[KL(p(y|x) || p(y|x'))] on the test set"),
                          ("oracle_acc_noisy", "oracle's accuracy (argmax p(y|x')) on the noised test set")):
            if np.isfinite(r[col]):
                spread = mean_spread(r["kl_y_empirical_std"], n) if col == "kl_y_empirical" else {}
                if f"{col}_se" in r and np.isfinite(r[f"{col}_se"]):
                    spread = {"se": r[f"{col}_se"], "se_over": "samples"}
                key = "oracle_accuracy_noisy" if col == "oracle_acc_noisy" else col
                out[f"{key}.{cell}"] = entry(r[col], "fraction" if key.startswith("oracle_acc") else "nats", path,
                                             f"{lab}: {desc}", **spread)
    return out
