"""Experiment kind ``active`` (paper section 4.4, Figures 8 and 9): pool-based active learning
with the exact epistemic uncertainty of every pool sample known.

One run per (arch, strategy, seed) (`oracle.classifiers.active_learning`): a seeded initial labelled set,
R rounds of ``batch`` labels from a pool disjoint from the world's test set, the model
retrained from scratch every round. Strategies: ``random``, ``max_entropy`` (H(q)),
``max_epistemic`` (the exact KL(p || q), the oracle's upper bound) and ``bald`` (MC dropout,
the realistic proxy). Beyond the paper, every round measures over the pool the Spearman rank
correlation of each strategy's score with the exact epistemic KL(p || q) and the exact
aleatoric entropy H(p): how far each proxy confounds the two.

Data: ``rounds`` (one row per run and round) and ``correlations`` (one row per run, round,
score and exact part). Accuracies are fractions in data and numbers, percentages in tables
and figures; KL and entropies in nats; labels count the initial set.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from oracle.classifiers.active_learning import STRATEGIES
from oracle.errors import ConfigError, DataError
from oracle.experiments import _training
from oracle.report.paper import Artifact, artifacts_by_name

KIND = "active"
DATA = ("rounds", "correlations")
ARTIFACTS = artifacts_by_name(
    Artifact("rounds", "table",
             "Active learning round by round: per architecture, strategy and labels used (initial set "
             "included), test accuracy (%) and exact epistemic KL E[KL(p || q)] on the oracle test set "
             "(nats), mean and std over seeds, and the mean exact KL(p || q) and H(p) (nats) of the "
             "samples each round acquired."),
    Artifact("acquisition_panels", "figure",
             "Epistemic-based acquisition: (a) test accuracy (%) against labels, (b) exact epistemic KL "
             "(nats) on the oracle test set against labels, (c) final accuracy (%) per strategy; mean ± "
             "std over seeds."),
    Artifact("accuracy_vs_labels", "figure",
             "Test accuracy (%) against labels (initial set included) per acquisition strategy, mean ± "
             "std over seeds."),
    Artifact("proxy_correlations", "figure",
             "How close each acquisition score comes to the exact signal: Spearman rank correlation over "
             "the unlabelled pool of each score with (a) the exact epistemic KL(p || q) and (b) the exact "
             "aleatoric entropy H(p), against labels; mean ± std over every run (all strategies and seeds)."),
)

#: Display names and colours of the strategies (paper Figure 9: random grey, entropy blue,
#: exact epistemic orange).
STRATEGY_LABELS = {"random": "Random", "max_entropy": "Max Entropy", "max_epistemic": "Max Epistemic (exact)",
                   "bald": "BALD (MC dropout)"}
STRATEGY_COLORS = {"random": "#7f7f7f", "max_entropy": "#0072b2", "max_epistemic": "#d55e00", "bald": "#009e73"}
#: The exact parts each score is correlated with (columns ``target`` of correlations.csv).
TARGETS = ("exact_epistemic", "exact_aleatoric")
TARGET_LABELS = {"exact_epistemic": "exact epistemic KL(p || q)", "exact_aleatoric": "exact aleatoric H(p)"}
#: Defaults of the optional keys (also in config.schema.yaml).
DEFAULTS = {"hard_label": "label", "mc_samples": 20, "drop_rate": 0.25, "target_accuracy": None, "training": None}


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with defaults filled in: world, archs, labels/hard_label and training as for
    every classifier experiment (`_training.check_classifier_entry`); strategies known and
    unique; BALD needs drop_rate > 0; the initial set and the pool fit in the world's
    training pool, and the rounds in the pool."""
    key = f"experiments.{name}"
    for k, v in DEFAULTS.items():
        entry.setdefault(k, v)
    spec = _training.check_classifier_entry(name, entry, config)
    spec.pop("sizes")  # set by the shared check; an active experiment has no size grid
    unknown = [s for s in spec["strategies"] if s not in STRATEGIES]
    if unknown or not spec["strategies"] or len(set(spec["strategies"])) != len(spec["strategies"]):
        raise ConfigError(f"config key '{key}.strategies': expected distinct names of {', '.join(STRATEGIES)}, "
                          f"got {spec['strategies']}")
    if "bald" in spec["strategies"] and not 0.0 < float(spec["drop_rate"]) < 1.0:
        raise ConfigError(f"config key '{key}.drop_rate': bald scores with MC dropout and needs a rate in (0, 1), "
                          f"got {spec['drop_rate']}")
    if int(spec["initial_size"]) < 2:
        raise ConfigError(f"config key '{key}.initial_size': a classifier needs at least 2 labelled samples")
    from oracle.world_specs import world_spec

    world = world_spec(config, spec["world"])
    pool = world["n_total"] - world["test_size"]
    if spec["initial_size"] + spec["pool_size"] > pool:
        raise ConfigError(f"config key '{key}.pool_size': initial_size {spec['initial_size']} + pool_size "
                          f"{spec['pool_size']} exceed the training pool of world {spec['world']!r} ({pool} = n_total "
                          f"{world['n_total']} - test_size {world['test_size']})")
    if spec["rounds"] * spec["batch"] > spec["pool_size"]:
        raise ConfigError(f"config key '{key}.batch': {spec['rounds']} rounds of {spec['batch']} labels exceed the "
                          f"pool of {spec['pool_size']}")
    if spec["target_accuracy"] is not None and not 0.0 < float(spec["target_accuracy"]) < 1.0:
        raise ConfigError(f"config key '{key}.target_accuracy': expected a fraction in (0, 1) or null")
    spec["labels_per_round"] = [spec["initial_size"] + r * spec["batch"] for r in range(spec["rounds"] + 1)]
    return spec


def classifier_runs(spec: Mapping) -> list[dict]:
    """None: the active-learning rule trains its own models, one per round (rules/active.smk)."""
    return []


def training_spec(spec: Mapping, cell: str) -> dict:
    """Not defined: an active experiment has no classifier cells."""
    raise ConfigError(f"experiment kind 'active' has no classifier cells (asked for {cell!r})")


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every round's model is scored on the test set of the experiment's world."""
    return [spec["world"]]


def split_needs(spec: Mapping) -> dict[str, dict]:
    """The world's splits must hold a permutation for every seed; the largest training set is
    the last round's labelled set."""
    return {spec["world"]: {"seeds": [int(s) for s in spec["seeds"]], "max_n": int(spec["labels_per_round"][-1])}}


def runs(spec: Mapping) -> list[dict]:
    """One run {arch, strategy, seed} per (arch, strategy, seed), in a stable order."""
    return [{"arch": a, "strategy": s, "seed": int(seed)}
            for a in spec["archs"] for s in spec["strategies"] for seed in spec["seeds"]]


# --------------------------------------------------------------------------- data
ROUND_COLUMNS = ("labelled", "epochs", "train_seconds", "train_loss", "test_size", "acc", "acc_se", "epistemic",
                 "epistemic_se", "total", "total_se", "aleatoric", "aleatoric_se", "bayes_accuracy",
                 "bayes_accuracy_se", "ece", "pool_remaining", "pool_epistemic", "pool_aleatoric",
                 "selected_epistemic", "selected_aleatoric")


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, "pd.DataFrame"]:  # noqa: F821
    """``rounds`` and ``correlations`` from the runs' rounds.json files (``inputs["rounds"]``)."""
    import pandas as pd

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


def _curves(rounds: "pd.DataFrame", cols: Sequence[str]) -> "pd.DataFrame":  # noqa: F821
    """Mean, std and se over seeds of `cols` per (arch, strategy, labelled)."""
    from oracle.measures.power_laws import aggregate_over_seeds

    return aggregate_over_seeds(rounds, list(cols), ["arch", "strategy", "labelled"])


# --------------------------------------------------------------------------- tables
def table(name: str, data: Mapping[str, "pd.DataFrame"], spec: Mapping) -> tuple["pd.DataFrame", str]:  # noqa: F821
    """``rounds``: one row per (arch, strategy, labels), mean and std over seeds."""
    import pandas as pd

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
                             "Acquired H(p) (nats)": r["selected_aleatoric_mean"]})
    if not rows:
        raise DataError("active: no rounds for the experiment's archs and strategies")
    return pd.DataFrame(rows), ".4f"


# --------------------------------------------------------------------------- figures
def figure(name: str, data: Mapping[str, "pd.DataFrame"], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:  # noqa: F821
    """``acquisition_panels`` (paper Figure 8), ``accuracy_vs_labels`` (Figure 9) or
    ``proxy_correlations`` (beyond the paper)."""
    if name == "acquisition_panels":
        return acquisition_panels(data["rounds"], spec, stem)
    if name == "accuracy_vs_labels":
        return accuracy_vs_labels(data["rounds"], spec, stem)
    if name == "proxy_correlations":
        return proxy_correlations(data["correlations"], spec, stem)
    raise DataError(f"active: no figure named {name!r} (figures: {', '.join(a for a in ARTIFACTS if a != 'rounds')})")


def _curve(ax, agg, col: str, strategy: str, scale: float = 1.0) -> None:
    a = agg[agg["strategy"] == strategy].sort_values("labelled")
    ax.errorbar(a["labelled"], a[f"{col}_mean"] * scale, yerr=a[f"{col}_std"].fillna(0.0) * scale, marker="o", ms=3,
                capsize=2, lw=1.2, color=STRATEGY_COLORS[strategy], label=STRATEGY_LABELS[strategy])


def acquisition_panels(rounds: "pd.DataFrame", spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:  # noqa: F821
    """One row per architecture: (a) accuracy (%) vs labels, (b) exact epistemic KL (nats) vs
    labels, (c) final accuracy (%) per strategy as bars; mean ± std over seeds."""
    from matplotlib.figure import Figure

    from oracle.report.figures import save_figure, style

    agg = _curves(rounds, ["acc", "epistemic"])
    archs = [a for a in spec["archs"] if a in set(agg["arch"])]
    with style():
        fig = Figure(figsize=(11, 3.3 * len(archs)))
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
            row[2].bar(x, acc, yerr=err, capsize=3, color=[STRATEGY_COLORS[s] for s in strategies])
            # zoomed like the paper's panel (c), but every error bar stays inside
            lo, hi = float(np.nanmin(acc - err)), float(np.nanmax(acc + err))
            pad = max(1.0, 0.25 * (hi - lo))
            row[2].set_ylim(max(0.0, lo - pad), min(100.0, hi + pad))
            row[2].set_xticks(x, [STRATEGY_LABELS[s] for s in strategies], rotation=20, ha="right")
            label = spec["arch_labels"][arch]
            row[0].set(xlabel="labels (initial set included)", ylabel="test accuracy (%)", title=f"(a) {label}: accuracy")
            row[1].set(xlabel="labels (initial set included)", ylabel="epistemic KL(p || q) (nats)",
                       title="(b) exact epistemic KL on the test set")
            row[2].set(ylabel="final test accuracy (%)", title=f"(c) at {int(a['labelled'].max())} labels")
            row[0].legend(loc="best")
        fig.tight_layout()
        return save_figure(fig, stem)


def accuracy_vs_labels(rounds: "pd.DataFrame", spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:  # noqa: F821
    """Accuracy (%) vs labels per strategy, one panel per architecture, mean ± std over seeds."""
    from matplotlib.figure import Figure

    from oracle.report.figures import save_figure, style

    agg = _curves(rounds, ["acc"])
    archs = [a for a in spec["archs"] if a in set(agg["arch"])]
    with style():
        fig = Figure(figsize=(4.6 * len(archs), 3.4))
        axes = np.atleast_1d(fig.subplots(1, len(archs), squeeze=False)).ravel()
        for ax, arch in zip(axes, archs):
            a = agg[agg["arch"] == arch]
            for s in spec["strategies"]:
                if s in set(a["strategy"]):
                    _curve(ax, a, "acc", s, 100.0)
            ax.set(xlabel="labels (initial set included)", ylabel="test accuracy (%)", title=spec["arch_labels"][arch])
            ax.legend(loc="best")
        fig.tight_layout()
        return save_figure(fig, stem)


def proxy_correlations(corr: "pd.DataFrame", spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:  # noqa: F821
    """Spearman rho of each score with the exact KL(p || q) (left) and H(p) (right) against
    labels, one row per architecture; mean ± std over every run (strategies and seeds)."""
    from matplotlib.figure import Figure

    from oracle.report.figures import save_figure, style

    archs = [a for a in spec["archs"] if a in set(corr["arch"])]
    if not archs:
        raise DataError("active: no correlations (the experiment needs a strategy other than random)")
    with style():
        fig = Figure(figsize=(9, 3.3 * len(archs)))
        axes = np.atleast_2d(fig.subplots(len(archs), 2, squeeze=False))
        for row, arch in zip(axes, archs):
            for ax, target, tag in zip(row, TARGETS, "ab"):
                sub = corr[(corr["arch"] == arch) & (corr["target"] == target)]
                for score in [s for s in spec["strategies"] if s in set(sub["score"])]:
                    g = sub[sub["score"] == score].groupby("labelled")["spearman"].agg(["mean", "std"]).reset_index()
                    ax.errorbar(g["labelled"], g["mean"], yerr=g["std"].fillna(0.0), marker="o", ms=3, capsize=2,
                                lw=1.2, color=STRATEGY_COLORS[score], label=f"{STRATEGY_LABELS[score]} score")
                ax.axhline(0.0, color="k", lw=0.8)
                ax.set(ylim=(-1.05, 1.05), xlabel="labels when scored (initial set included)",
                       ylabel=f"Spearman ρ with {TARGET_LABELS[target]}",
                       title=f"({tag}) {spec['arch_labels'][arch]}: vs {TARGET_LABELS[target]}")
            row[0].legend(loc="best")
        fig.tight_layout()
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


def numbers(data: Mapping[str, "pd.DataFrame"], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:  # noqa: F821
    """The in-text numbers (`oracle.report.numbers.entry`; spreads are over seeds):

    * the budget: ``labels_initial``, ``labels_final``, ``batch``, ``rounds``, ``pool_size``,
      ``test_size``;
    * per arch and strategy: ``final_accuracy``, ``final_epistemic`` (last round),
      ``accuracy_gain`` (last round minus round 0, per seed);
    * with max_entropy and max_epistemic (the paper's comparison), per arch:
      ``gain_ratio`` = mean over seeds of gain(max_epistemic) / gain(max_entropy) (the paper's
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
    from oracle.report.numbers import entry

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
                per_seed = c[c["score"] == score].groupby("seed")["spearman"].mean()
                out[f"spearman_{tag}.{arch}.{score}"] = entry(unit="1", artifact=cpath, description=(
                    f"{label}: Spearman rho over the pool between the {STRATEGY_LABELS[score]} score and the "
                    f"{TARGET_LABELS[target]}, mean over every round and run"), **_spread(per_seed.tolist()))
    return out


def _paper_comparison(sub, gains: Mapping, spec: Mapping, arch: str, path: str) -> dict[str, dict]:
    """gain_ratio, gain_ratio_of_means, target_accuracy, labels_to_target, fewer_labels of one arch."""
    from oracle.report.numbers import entry

    label = spec["arch_labels"][arch]
    out: dict[str, dict] = {}
    ent, epi = gains["max_entropy"], gains["max_epistemic"]
    seeds = sorted(set(ent.index) & set(epi.index))
    bad = [s for s in seeds if ent[s] <= 0]
    ratios = [float(epi[s] / ent[s]) for s in seeds] if not bad else []
    why = f"; undefined: max entropy's gain is <= 0 at seed(s) {bad}" if bad else ""
    out[f"gain_ratio.{arch}"] = entry(unit="ratio", artifact=path, description=(
        f"{label}: accuracy gain of Max Epistemic over that of Max Entropy under the same budget "
        f"({spec['labels_per_round'][0]} -> {spec['labels_per_round'][-1]} labels), mean over seeds of the "
        f"per-seed ratio (paper: 1.6x){why}"), **_spread(ratios))
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
