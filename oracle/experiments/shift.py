"""Experiment kind ``shift`` (paper section 4.3, appendix F, Tables 6-9, Figure 3): training-time
distribution shift, every model scored on the one baseline test set.

A *configuration* (the cell of its classifiers) sets how the training set of N rows differs
from the baseline world (`oracle.classifiers.shifted`):

* ``prior``: label-prior shift: class counts ~ Multinomial(N, pi), rows per class from the
  seed's permutation of the pool, with replacement when short (null: no resampling, the
  seed's first N rows of the pool);
* ``noise_std``: covariate shift x' = clip(x + eps, -1, 1), eps ~ N(0, sigma^2), after
  selection, before the classifier's normalization;
* ``world``: train on a world variant (base temperature tau, prior) instead of the baseline
  world: a shift whose KL is exact (`oracle.measures.divergences`).

Every model trains with a validation split (``val_fraction``, the paper's 80/20) and is
scored on the baseline world's test set. Divergences, in nats, of training from test data:

* ``kl_y_target`` = KL(pi || uniform) and ``kl_y_empirical`` from the realised class counts
  (the paper's Eq. 8; mean ± std over seeds);
* ``kl_exact`` = KL(p_train(x, y) || p_test(x, y)) where it is exact: label-prior resampling
  without noise (KL(pi || pi_world), p(x|y) unchanged) and world variants (KL(pi_v || pi_b) +
  D/2 (r^2 - 1 - ln r^2)), beside its Monte Carlo check from the flow's own log densities.
  Only at label temperature 1, where the label is the class a sample was drawn from; NaN
  otherwise and for noise, which has no tractable density;
* for noise: the oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] and the oracle's
  accuracy on x', on the baseline test set (`oracle.noisy_test_sets`), named as what they are.

Data: ``runs`` (one row per classifier) and ``configurations`` (one row per configuration,
aggregated over seeds). Accuracies are fractions in data, percent in tables and figures; drops
are in percentage points (pp).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from oracle.errors import ConfigError, DataError
from oracle.experiments import _training
from oracle.report.paper import Artifact, artifacts_by_name

KIND = "shift"
DATA = ("runs", "configurations")
ARTIFACTS = artifacts_by_name(
    Artifact("shift_configurations", "table",
             "Controlled shift configurations: class prior pi, noise sigma, training world; KL_y target "
             "(from pi) and empirical (from the realised class counts, mean ± std over seeds) against the "
             "uniform prior (nats); the exact KL(p_train || p_test) (nats) where the shift has a tractable "
             "density, with its Monte Carlo check (± SE) for world variants."),
    Artifact("shift_accuracy", "table",
             "Training-time shift, every model scored on the same baseline test set: test accuracy (%), "
             "change from the baseline configuration (percentage points), test error (%) and validation "
             "accuracy on the held-out part of the shifted training set (%), mean ± std over seeds."),
    Artifact("shift_axes", "table",
             "The two shift axes side by side. Left: prior shift only (no noise): KL_y, test accuracy (%), "
             "change (pp). Right: noise only (baseline prior): sigma, test accuracy (%), change (pp), and the "
             "oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] (nats) and its accuracy on x' (%) on the "
             "baseline test set."),
    Artifact("shift_panels", "figure",
             "What shifts matters more than how much: (a) test accuracy (%) and (b) accuracy drop (pp) "
             "against KL (nats): KL_y for the paper's configurations, the exact KL for world variants; "
             "(c) prior shift only against KL_y; (d) noise only against sigma, with the oracle's accuracy "
             "on x'; (e) mean drop per shift type; (f) linear fits of the drop against KL_y (the paper's) "
             "and against the exact KL, with R^2. Error bars: std over seeds."),
)

#: Shift types, in display order.
TYPES = ("baseline", "prior", "noise", "prior+noise", "variant", "variant+noise")


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with defaults filled in. Configurations: ``prior`` (K floats summing to 1, or
    null), ``noise_std`` (>= 0, default 0), ``world`` (default the experiment's), ``label``
    (default the name); ``baseline`` names one of them; ``size`` fits every training pool."""
    from oracle.world_specs import known_num_classes, world_specs

    key = f"experiments.{name}"
    entry.setdefault("labels", "hard")
    entry.setdefault("val_fraction", 0.0)
    entry["sizes"] = [int(entry["size"])]
    spec = _training.check_classifier_entry(name, entry, config)
    worlds = world_specs(config)
    k = known_num_classes(config)
    confs = {}
    for cell, raw in (entry.get("configurations") or {}).items():
        c = dict(raw or {})
        c.setdefault("prior", None)
        c.setdefault("noise_std", 0.0)
        c.setdefault("world", spec["world"])
        c.setdefault("label", cell)
        ckey = f"{key}.configurations.{cell}"
        if c["world"] not in worlds:
            raise ConfigError(f"config key '{ckey}.world': no world named {c['world']!r} (worlds: {', '.join(worlds)})")
        w = worlds[c["world"]]
        pool = w["n_total"] - w["test_size"]
        if spec["size"] > pool:
            raise ConfigError(f"config key '{key}.size': N={spec['size']} exceeds the training pool of world "
                              f"{c['world']!r} ({pool} = n_total {w['n_total']} - test_size {w['test_size']})")
        if c["prior"] is not None:
            if abs(math.fsum(c["prior"]) - 1.0) > 1e-6:
                raise ConfigError(f"config key '{ckey}.prior': must sum to 1, sums to {math.fsum(c['prior'])!r}")
            if k is not None and len(c["prior"]) != k:
                raise ConfigError(f"config key '{ckey}.prior': has {len(c['prior'])} entries but the world has {k} classes")
        c["noise_std"] = float(c["noise_std"])
        confs[cell] = c
    if not confs:
        raise ConfigError(f"config key '{key}.configurations': expected at least one configuration")
    spec["configurations"] = confs
    if spec.get("baseline") not in confs:
        raise ConfigError(f"config key '{key}.baseline': {spec.get('baseline')!r} is not a configuration "
                          f"({', '.join(confs)})")
    spec["label_temperatures"] = {c["world"]: float(worlds[c["world"]]["label_temperature"]) for c in confs.values()}
    spec["world_priors"] = {c["world"]: worlds[c["world"]]["prior"] for c in confs.values()}
    return spec


def classifier_runs(spec: Mapping) -> list[dict]:
    """One classifier per (arch, configuration, seed)."""
    return [{"arch": a, "cell": cell, "seed": int(s)} for a in spec["archs"] for cell in spec["configurations"]
            for s in spec["seeds"]]


def training_spec(spec: Mapping, cell: str) -> dict:
    """The training spec of a configuration: N rows of its world, its prior and noise, the
    validation split."""
    if cell not in spec["configurations"]:
        raise ConfigError(f"shift experiment: no configuration {cell!r} ({', '.join(spec['configurations'])})")
    c = spec["configurations"][cell]
    out = _training.training_spec(spec, spec["size"])
    out.update(world=c["world"], class_prior=c["prior"], noise_std=c["noise_std"], val_fraction=spec["val_fraction"])
    return out


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every model is scored on the baseline world's test set."""
    return [spec["world"]]


def variant_worlds(spec: Mapping) -> list[str]:
    """The training worlds other than the baseline (their exact KL from it is checked by Monte Carlo)."""
    return sorted({c["world"] for c in spec["configurations"].values()} - {spec["world"]})


def noise_levels(spec: Mapping) -> list[float]:
    """The noise stds of the configurations (the oracle's posterior shift is reported for each)."""
    return sorted({c["noise_std"] for c in spec["configurations"].values() if c["noise_std"] > 0})


def shift_type(spec: Mapping, cell: str) -> str:
    """One of `TYPES`."""
    c, base = spec["configurations"][cell], spec["configurations"][spec["baseline"]]
    if cell == spec["baseline"]:
        return "baseline"
    noisy = "+noise" if c["noise_std"] > 0 else ""
    if c["world"] != spec["world"]:
        return f"variant{noisy}"
    if c["prior"] == base["prior"] and noisy:
        return "noise"
    return f"prior{noisy}"


# --------------------------------------------------------------------------- data
def _read_json(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, "pd.DataFrame"]:  # noqa: F821
    """``runs`` from the metrics (``inputs["metrics"]``) and histories (``inputs["histories"]``:
    validation accuracy, realised class counts); ``configurations`` from runs, the world
    variants' divergence checks (``inputs["divergences"]``) and the noisy test sets' constants
    (``inputs["noise"]``)."""
    import pandas as pd

    from oracle.classifiers.evaluate import read_metrics_frame
    from oracle.measures.divergences import counts_kl

    runs = read_metrics_frame(inputs["metrics"])
    hist = {}
    for path in inputs["histories"]:
        h = _read_json(path)
        last = h["history"][-1] if h.get("history") else {}
        counts = (h.get("shift") or {}).get("counts")
        hist[(h["arch"], h["cell"], int(h["seed"]))] = {
            "val_acc": last.get("val_acc", math.nan), "counts": json.dumps(counts) if counts else "",
            "kl_y_empirical": counts_kl(counts) if counts else math.nan,
            "unique_rows": (h.get("shift") or {}).get("unique_rows", math.nan),
            "resampled_classes": json.dumps((h.get("shift") or {}).get("resampled", [])),
        }
    missing = [k for k in zip(runs["arch"], runs["cell"], runs["seed"].astype(int)) if k not in hist]
    if missing:
        raise DataError(f"shift: no history for classifier(s) {missing[:3]}")
    extra = pd.DataFrame([hist[k] for k in zip(runs["arch"], runs["cell"], runs["seed"].astype(int))])
    runs = pd.concat([runs.reset_index(drop=True), extra], axis=1)
    runs.insert(3, "shift_type", [shift_type(spec, c) for c in runs["cell"]])
    divergences = {d["world"]: d for d in map(_read_json, inputs.get("divergences", []))}
    noise = {round(float(n["sigma"]), 12): n for n in map(_read_json, inputs.get("noise", []))}
    return {"runs": runs, "configurations": configuration_frame(spec, runs, divergences, noise)}


def configuration_frame(spec: Mapping, runs: "pd.DataFrame", divergences: Mapping[str, Mapping],  # noqa: F821
                        noise: Mapping[float, Mapping]) -> "pd.DataFrame":  # noqa: F821
    """One row per configuration (config order), aggregated over seeds and architectures."""
    import pandas as pd

    from oracle.measures.divergences import categorical_kl, label_kl

    base_acc = runs.loc[runs["cell"] == spec["baseline"], "acc"].mean()
    rows = []
    for cell, c in spec["configurations"].items():
        r = runs[runs["cell"] == cell]
        if r.empty:
            raise DataError(f"shift: no results for configuration {cell!r}")
        t_world = spec["label_temperatures"][c["world"]]
        k = int(r["num_classes"].iloc[0])
        train_prior = c["prior"] if c["prior"] is not None else spec["world_priors"][c["world"]]
        train_prior = train_prior or [1.0 / k] * k
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
            "kl_y_target": label_kl(c["prior"]) if c["prior"] is not None else math.nan,
            "kl_y_empirical": r["kl_y_empirical"].mean(), "kl_y_empirical_std": r["kl_y_empirical"].std(ddof=1),
            "kl_exact": exact,
            "kl_monte_carlo": div["monte_carlo"]["mean"] if div else math.nan,
            "kl_monte_carlo_se": div["monte_carlo"]["se"] if div else math.nan,
            "kl_monte_carlo_z": div["z"] if div else math.nan,
            "acc": r["acc"].mean(), "acc_std": r["acc"].std(ddof=1),
            "delta_pp": 100.0 * (r["acc"].mean() - base_acc),
            "val_acc": r["val_acc"].mean(), "val_acc_std": r["val_acc"].std(ddof=1),
            "bayes_accuracy": r["bayes_accuracy"].mean(),
            "posterior_shift": nz.get("posterior_shift", {}).get("mean", math.nan),
            "posterior_shift_se": nz.get("posterior_shift", {}).get("se", math.nan),
            "oracle_acc_noisy": nz.get("oracle_accuracy_noisy", {}).get("mean", math.nan),
            "oracle_acc_noisy_se": nz.get("oracle_accuracy_noisy", {}).get("se", math.nan),
        })
    return pd.DataFrame(rows)


def drop_fits(conf: "pd.DataFrame") -> dict[str, dict]:  # noqa: F821
    """Linear fits of the accuracy drop (pp) against KL: ``kl_y`` over the paper-style
    configurations (not world variants; x = empirical KL_y, or the target where no counts
    were drawn), ``exact`` over those with an exact KL. Each {"r2", "slope", "intercept", "n"}."""
    from oracle.measures.estimators import r2

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


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, "pd.DataFrame"], spec: Mapping) -> tuple["pd.DataFrame", str]:  # noqa: F821
    """``shift_configurations`` (paper Table 7), ``shift_accuracy`` (Table 8), ``shift_axes`` (Table 9)."""
    import pandas as pd

    c = data["configurations"]
    if name == "shift_configurations":
        return pd.DataFrame({
            "Configuration": c["label"], "pi": [_prior_text(p) for p in c["prior"]], "sigma": c["noise_std"],
            "World": c["world"], "KL_y (target)": c["kl_y_target"], "KL_y (empirical)": c["kl_y_empirical"],
            "± std": c["kl_y_empirical_std"], "Exact KL": c["kl_exact"], "Monte Carlo KL": c["kl_monte_carlo"],
            "± SE": c["kl_monte_carlo_se"]}), ".4g"
    if name == "shift_accuracy":
        return pd.DataFrame({
            "Configuration": c["label"], "Test Acc (%)": 100 * c["acc"], "± std": 100 * c["acc_std"],
            "Δ TestAcc (pp)": c["delta_pp"], "Test Error (%)": 100 * (1 - c["acc"]),
            "Val Acc (%)": 100 * c["val_acc"], "Val ± std": 100 * c["val_acc_std"]}), ".2f"
    if name == "shift_axes":
        return shift_axes(c), ".4g"
    raise DataError(f"shift: no table named {name!r} (tables: {', '.join(a for a in ARTIFACTS if ARTIFACTS[a].type == 'table')})")


def _prior_text(prior_json: str | float) -> str:
    """The prior column as text; "null" (no resampling: the pool's rows) reads back from CSV as NaN."""
    p = json.loads(prior_json) if isinstance(prior_json, str) else None
    return "(pool)" if p is None else "(" + ", ".join(f"{v:g}" for v in p) + ")"


def shift_axes(c: "pd.DataFrame") -> "pd.DataFrame":  # noqa: F821
    """Table 9: prior-only rows (baseline first) beside noise-only rows, aligned by position."""
    import pandas as pd

    prior = c[c["shift_type"].isin(["baseline", "prior"])]
    noise = c[c["shift_type"] == "noise"].sort_values("noise_std", kind="stable")
    n = max(len(prior), len(noise))
    left = pd.DataFrame({"Prior config": prior["label"].tolist(), "KL_y": prior["kl_y_empirical"].tolist(),
                         "Test Acc (%)": (100 * prior["acc"]).tolist(), "Δ (pp)": prior["delta_pp"].tolist()})
    right = pd.DataFrame({"sigma": noise["noise_std"].tolist(), "Noise Test Acc (%)": (100 * noise["acc"]).tolist(),
                          "Noise Δ (pp)": noise["delta_pp"].tolist(),
                          "Oracle posterior shift (nats)": noise["posterior_shift"].tolist(),
                          "Oracle acc on x' (%)": (100 * noise["oracle_acc_noisy"]).tolist()})
    return pd.concat([left.reindex(range(n)), right.reindex(range(n))], axis=1)


# --------------------------------------------------------------------------- figure and numbers
def figure(name: str, data: Mapping[str, "pd.DataFrame"], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:  # noqa: F821
    """``shift_panels`` (paper Figure 3, panels a-f)."""
    from oracle.experiments._shift_figure import shift_panels

    if name != "shift_panels":
        raise DataError(f"shift: no figure named {name!r} (figures: shift_panels)")
    return shift_panels(data["configurations"], drop_fits(data["configurations"]), stem)


def numbers(data: Mapping[str, "pd.DataFrame"], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:  # noqa: F821
    """``r2_drop_vs_kl_y`` (the paper's 0.04) and ``r2_drop_vs_exact_kl``; per configuration:
    ``accuracy``, ``accuracy_change`` (pp), ``val_accuracy``, ``kl_y_target``,
    ``kl_y_empirical``, ``kl_exact`` and ``kl_monte_carlo`` (world variants),
    ``posterior_shift`` and ``oracle_accuracy_noisy`` (noise)."""
    from oracle.report.numbers import entry

    c, path = data["configurations"], data_paths["configurations"]
    out: dict[str, dict] = {}
    for tag, fit in drop_fits(c).items():
        what = "KL_y of the paper's configurations" if tag == "kl_y" else "the exact KL where it exists"
        out[f"r2_drop_vs_{'kl_y' if tag == 'kl_y' else 'exact_kl'}"] = entry(
            fit["r2"], "1", path, f"R^2 of a linear fit of the accuracy drop against {what} ({fit['n']} configurations)")
    for _, r in c.iterrows():
        cell, lab, n = r["cell"], r["label"], int(r["n_runs"])
        out[f"accuracy.{cell}"] = entry(r["acc"], "fraction", path, f"{lab}: baseline test accuracy, mean over {n} runs",
                                        std=r["acc_std"], se_over="seeds")
        out[f"accuracy_change.{cell}"] = entry(r["delta_pp"], "percentage points", path,
                                               f"{lab}: test accuracy minus the baseline configuration's")
        out[f"val_accuracy.{cell}"] = entry(r["val_acc"], "fraction", path,
                                            f"{lab}: accuracy on the held-out part of its shifted training set",
                                            std=r["val_acc_std"])
        for col, desc in (("kl_y_target", "KL_y(pi || uniform) of the target prior"),
                          ("kl_y_empirical", "KL_y of the realised class counts, mean over runs"),
                          ("kl_exact", "exact KL(p_train || p_test)"),
                          ("kl_monte_carlo", "Monte Carlo KL(p_train || p_test) from the flow's own log densities"),
                          ("posterior_shift", "oracle's posterior shift E[KL(p(y|x) || p(y|x'))] on the test set"),
                          ("oracle_acc_noisy", "oracle's accuracy (argmax p(y|x')) on the noised test set")):
            if np.isfinite(r[col]):
                spread = {"std": r["kl_y_empirical_std"]} if col == "kl_y_empirical" else {}
                if f"{col}_se" in r and np.isfinite(r[f"{col}_se"]):
                    spread = {"se": r[f"{col}_se"], "se_over": "samples"}
                key = "oracle_accuracy_noisy" if col == "oracle_acc_noisy" else col
                out[f"{key}.{cell}"] = entry(r[col], "fraction" if key.startswith("oracle_acc") else "nats", path,
                                             f"{lab}: {desc}", **spread)
    return out
