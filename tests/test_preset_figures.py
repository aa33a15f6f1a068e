"""Every figure at every preset's shapes (issue 46 item 7): each experiment kind's figures drawn,
on synthetic numbers, at the shapes of every experiment of the embedded default and of every
preset (their resolved specs: `oracle.workflow.plan.experiments.experiment_specs`): the scaling
kind's for the architectures (their printed labels), sizes N and seeds of each experiment, the
active kind's for its architectures, strategies and rounds, the labels kind's for its sizes and
curve sizes, the shift kind's for its configurations (shift type, prior, noise, world), the
estimators' and calibration's for their shifted sets and borrowed models, the difficulty kind's for
its worlds' temperatures, closed form and learner. Each figure must print (`save_figure` is
strict in the tests: fit, fonts, no colliding texts) and its caption name only the panels it
draws. A preset's run can no longer stop on a figure the tests never drew at its shapes.

A shape is what changes a figure's layout; experiments of the same shape are drawn once, under
the first "<config>: <experiment>" that has it."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from oracle.experiments import active, calibration, difficulty, estimators, labels, scaling, shift
from oracle.measures.accuracy_estimators import METHODS
from oracle.measures.divergences import counts_kl
from oracle.report.figures import caption_panel_problems, pdf_facts
from oracle.world_specs import known_num_classes, world_kind
from oracle.workflow.plan.config import SCHEMA_FILE, fill_defaults, load_yaml, validate_config
from oracle.workflow.plan.experiments import experiment_specs

REPO = Path(__file__).resolve().parents[1]
CONFIGS = [REPO / "config.yaml", *sorted((REPO / "presets").glob("*.yaml"))]


def resolved_experiments() -> list[tuple[str, dict, dict]]:
    """("<config file>: <experiment>", the config with its defaults, the experiment's resolved spec)
    of every experiment of every config, in config order."""
    out = []
    for path in CONFIGS:
        cfg = load_yaml(path)
        validate_config(cfg, SCHEMA_FILE)
        fill_defaults(cfg, SCHEMA_FILE)
        out += [(f"{path.name}: {name}", cfg, spec) for name, spec in experiment_specs(cfg).items()]
    return out


EXPERIMENTS = resolved_experiments()


def shapes(kind: str, shape: Callable[[dict, dict], Hashable]) -> dict[str, tuple[dict, dict]]:
    """{"<config>: <experiment>": (config, spec)} of the first experiment of `kind` of each
    distinct `shape(config, spec)`."""
    seen, out = set(), {}
    for name, cfg, spec in EXPERIMENTS:
        if spec["kind"] == kind and (key := shape(cfg, spec)) not in seen:
            seen.add(key)
            out[name] = (cfg, spec)
    return out


def draw_every_figure(kind: ModuleType, data: Mapping[str, pd.DataFrame], spec: Mapping, tmp_path: Path) -> list[str]:
    """Each figure artifact of `kind` drawn from `data`: it prints (strict `save_figure` raises
    otherwise) and its caption names only the panels it draws. Returns the figures' names."""
    figures = [n for n, a in kind.ARTIFACTS.items() if a.type == "figure"]
    for name in figures:
        out = kind.figure(name, data, spec, tmp_path / name)  # raises on a figure that does not print
        panels = pdf_facts(out["pdf"].read_bytes())["panels"]
        assert not caption_panel_problems(kind.ARTIFACTS[name].caption, panels), (name, panels)
    return figures


def seeds_of(spec: Mapping) -> list[int]:
    """The seeds drawn: up to two (one seed, no spread over seeds, is a layout of its own; more seeds
    add points to the same axes only)."""
    return list(spec["seeds"])[:2]


def classifier_row(arch: str, cell: str, n: int, seed: int, epi: float, acc: float) -> dict:
    """One runs.csv row of a classifier (`oracle.report.columns.RUNS`' metrics) with epistemic
    KL `epi` (nats) and accuracy `acc`; the calibration errors grow with `epi`."""
    return {"arch": arch, "cell": cell, "N": n, "seed": seed, "evalset": "base", "labels": "hard",
            "hard_label": "label", "n": 500, "acc": acc, "acc_se": 0.004, "bayes_accuracy": 0.998,
            "bayes_accuracy_se": 0.001, "aleatoric": 0.012, "aleatoric_se": 0.001, "epistemic": epi,
            "epistemic_se": 0.1 * epi, "total": 0.012 + epi, "total_se": 0.1 * epi, "ece": 0.02 + 0.5 * epi,
            "ece_posterior": 0.01 + 0.4 * epi, "calibration_pointwise": 0.03 + 0.5 * epi, "nll": 0.02 + epi,
            "brier": 0.05 + 0.3 * epi, "overconfidence": 0.01 + 0.2 * epi, "overconfidence_truth": 0.2 * epi}


def reliability_rows(experiment: str, arch: str, cell: str, n: int, seed: int, evalset: str = "base",
                     **extra) -> list[dict]:
    """Ten reliability bins (`oracle.report.columns.RELIABILITY`) of one classifier, slightly overconfident."""
    conf = np.linspace(0.05, 0.95, 10)
    return [{"experiment": experiment, "arch": arch, "cell": cell, "seed": seed, "evalset": evalset, "N": n,
             "bin": b, "count": 50, "confidence": conf[b], "accuracy": conf[b] * 0.95,
             "true_probability": conf[b] * 0.97, **extra} for b in range(10)]


# --------------------------------------------------------------------------- scaling
def scaling_frames(spec: Mapping) -> dict[str, pd.DataFrame]:
    """Runs and reliability bins: epistemic KL 0.4 N^-alpha per (arch, seed), and the power-law fits."""
    rng = np.random.default_rng(0)
    rows, bins = [], []
    for i, arch in enumerate(spec["archs"]):
        for seed in seeds_of(spec):
            alpha = 0.1 + 0.05 * i + 0.01 * seed
            for n in spec["sizes"]:
                acc = min(0.99, 0.9 + 0.01 * np.log10(n) + rng.normal(0, 0.002))
                rows.append({"experiment": "scaling", **classifier_row(arch, f"N{n}", n, seed, 0.4 * n ** -alpha, acc)})
                bins += reliability_rows("scaling", arch, f"N{n}", n, seed)
    runs = pd.DataFrame(rows)
    return {"runs": runs, "fits": scaling.all_fits(runs), "reliability": pd.DataFrame(bins)}


SCALING = shapes("scaling", lambda cfg, s: (tuple(s["arch_labels"][a] for a in s["archs"]), tuple(s["sizes"]),
                                            len(seeds_of(s))))


@pytest.mark.parametrize("cfg, spec", list(SCALING.values()), ids=list(SCALING))
def test_every_scaling_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    drawn = draw_every_figure(scaling, scaling_frames(spec), spec, tmp_path)
    assert "calibration_vs_n" in drawn and "epistemic_curves" in drawn


# --------------------------------------------------------------------------- active
def active_frames(spec: Mapping) -> dict[str, pd.DataFrame]:
    """Rounds (accuracy rising, epistemic KL falling with the labelled set) and the proxies'
    Spearman correlations with the exact epistemic and aleatoric parts, two seeds."""
    rng = np.random.default_rng(1)
    sizes = [spec["initial_size"] + r * spec["batch"] for r in range(spec["rounds"] + 1)]
    rounds, corr = [], []
    for arch in spec["archs"]:
        for j, strategy in enumerate(spec["strategies"]):
            for seed in range(2):
                for r, n in enumerate(sizes):
                    rounds.append({"arch": arch, "strategy": strategy, "seed": seed, "round": r, "labelled": n,
                                   "acc": 0.6 + 0.3 * r / len(sizes) + 0.01 * j + rng.normal(0, 0.005),
                                   "epistemic": 0.5 / (1 + r) + 0.01 * j})
                    if strategy == "random":
                        continue
                    corr += [{"arch": arch, "strategy": strategy, "seed": seed, "round": r, "labelled": n,
                              "score": strategy, "target": target, "spearman": rho + rng.normal(0, 0.02)}
                             for target, rho in (("exact_epistemic", 0.6), ("exact_aleatoric", 0.2))]
    return {"rounds": pd.DataFrame(rounds), "correlations": pd.DataFrame(corr)}


ACTIVE = shapes("active", lambda cfg, s: (tuple(s["arch_labels"][a] for a in s["archs"]), tuple(s["strategies"]),
                                          s["initial_size"], s["batch"], s["rounds"]))


@pytest.mark.parametrize("cfg, spec", list(ACTIVE.values()), ids=list(ACTIVE))
def test_every_active_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "acquisition_panels" in draw_every_figure(active, active_frames(spec), spec, tmp_path)


# --------------------------------------------------------------------------- labels
def labels_frames(spec: Mapping) -> dict[str, pd.DataFrame]:
    """Hard and soft arms of the one architecture at every N: soft a little more accurate and
    better calibrated; per-epoch accuracy curves at every N (the figure reads the curve sizes')."""
    rng = np.random.default_rng(2)
    arch, epochs = spec["archs"][0], np.arange(1, 11)
    rows, bins, curves = [], [], []
    for mode, better in (("hard", 0.0), ("soft", 0.004)):
        for seed in seeds_of(spec):
            for n in spec["sizes"]:
                cell = labels.cell_name(mode, n)
                acc = min(0.99, 0.85 + 0.02 * np.log10(n) + better + rng.normal(0, 0.002))
                rows.append({**classifier_row(arch, cell, n, seed, 0.5 * n ** -0.2 * (1 - 10 * better), acc),
                             "experiment": "labels", "labels": mode})
                bins += reliability_rows("labels", arch, cell, n, seed, labels=mode)
                curves += [{"arch": arch, "cell": cell, "seed": seed, "N": n, "labels": mode, "epoch": e,
                            "train_loss": 1 / e, "curve_acc": acc * (1 - 0.5 / e), "curve_epistemic": 0.5 / e}
                           for e in epochs]
    return {"runs": pd.DataFrame(rows), "curves": pd.DataFrame(curves), "reliability": pd.DataFrame(bins)}


LABELS = shapes("labels", lambda cfg, s: (tuple(s["sizes"]), tuple(s["curve_sizes"]), len(seeds_of(s))))


@pytest.mark.parametrize("cfg, spec", list(LABELS.values()), ids=list(LABELS))
def test_every_labels_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "soft_vs_hard" in draw_every_figure(labels, labels_frames(spec), spec, tmp_path)


# --------------------------------------------------------------------------- shift
def shift_frames(cfg: Mapping, spec: Mapping) -> dict[str, pd.DataFrame]:
    """Configurations (`oracle.experiments.shift.report.configuration_frame`, as collect makes
    them) of classifiers whose accuracy drops with the KL_y of their realised class counts and
    with the noise; world variants at an exact KL, noise levels with the oracle's own numbers."""
    from oracle.experiments.shift.report import configuration_frame

    rng = np.random.default_rng(3)
    k = next((len(p) for p in [*(c["prior"] for c in spec["configurations"].values()),
                               *spec["world_priors"].values()] if p), known_num_classes(cfg) or 10)
    base = spec["world_priors"][spec["world"]]
    rows = []
    for arch in spec["archs"]:
        for cell, c in spec["configurations"].items():
            for seed in seeds_of(spec):
                counts = rng.multinomial(spec["size"], c["prior"]) if c["prior"] else None
                kl_y = counts_kl(counts, base) if counts is not None else np.nan
                variant = 0.02 if c["world"] != spec["world"] else 0.0
                acc = 0.9 - 0.1 * np.nan_to_num(kl_y) - 0.3 * c["noise_std"] - variant + rng.normal(0, 0.003)
                rows.append({"arch": arch, "cell": cell, "seed": seed, "num_classes": k, "kl_y_empirical": kl_y,
                             "acc": acc, "acc_se": 0.005, "acc_adjusted": acc + 0.01, "acc_adjusted_se": 0.005,
                             "smallest_class_rows": counts.min() if counts is not None else spec["size"] // k,
                             "val_acc": acc + 0.02, "bayes_accuracy": 0.97})
    divergences = {w: {"closed_form": {"tau": 0.2}, "monte_carlo": {"mean": 0.21, "se": 0.01}, "z": 1.0}
                   for w in shift.variant_worlds(spec)}
    noise = {round(s, 12): {"posterior_shift": {"mean": s, "se": 0.01}, "oracle_accuracy_noisy": {
        "mean": 0.97 - s, "se": 0.005}} for s in shift.noise_levels(spec)}
    costs = {cell: {"mean": 0.001, "se": 0.0005} for cell in spec["configurations"]}
    return {"configurations": configuration_frame(spec, pd.DataFrame(rows), divergences, noise, costs)}


def _configurations(spec: Mapping) -> tuple:
    """What shift's figure draws of each configuration: its shift type, prior, noise and world."""
    return tuple((shift.shift_type(spec, cell), json.dumps(c["prior"]), c["noise_std"], c["world"])
                 for cell, c in spec["configurations"].items())


SHIFT = shapes("shift", lambda cfg, s: (_configurations(s), len(seeds_of(s))))


@pytest.mark.parametrize("cfg, spec", list(SHIFT.values()), ids=list(SHIFT))
def test_every_shift_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "shift_panels" in draw_every_figure(shift, shift_frames(cfg, spec), spec, tmp_path)


# --------------------------------------------------------------------------- estimators
def estimators_frames(spec: Mapping) -> dict[str, pd.DataFrame]:
    """Estimates of every method for every borrowed model on every set (the clean set first):
    the accuracy falls over the shifted sets, the methods that predict an accuracy track it, the
    scores follow it on their own scale; the scores over the sets (`score_frame`, as collect)."""
    from oracle.experiments.estimators.report import _set_info, score_frame

    rng = np.random.default_rng(4)
    rows = []
    for run in [r for r in spec["borrowed_runs"] if r["seed"] in seeds_of(spec)]:
        for j, evalset in enumerate(estimators.evaluation_sets(spec)):
            kind, param = _set_info(spec, evalset)
            acc = 0.9 - 0.05 * j + rng.normal(0, 0.005)
            for i, (method, (_, predicts)) in enumerate(METHODS.items()):
                estimate = acc + rng.normal(0, 0.01) if predicts else 2.0 * acc - 0.5 + 0.1 * i + rng.normal(0, 0.02)
                rows.append({**{k: run[k] for k in ("arch", "cell", "seed")}, "evalset": evalset, "shift": kind,
                             "parameter": param, "method": method, "estimate": estimate, "accuracy": acc,
                             "bayes_accuracy": np.nan if kind == "noise" else 0.97 - 0.01 * j,
                             "bayes_accuracy_se": 0.002, "n": 500})
    estimates = pd.DataFrame(rows)
    return {"estimates": estimates, "scores": score_frame(estimates)}


def _sets(spec: Mapping) -> tuple:
    """What a borrowing kind draws of each evaluation set: its kind and parameter."""
    from oracle.experiments.calibration.report import set_info

    return tuple(tuple(set_info(spec, e).values()) for e in calibration.evaluation_sets(spec))


ESTIMATORS = shapes("estimators", lambda cfg, s: (_sets(s), len(s["archs"]) * len(s["sizes"]), len(seeds_of(s))))


@pytest.mark.parametrize("cfg, spec", list(ESTIMATORS.values()), ids=list(ESTIMATORS))
def test_every_estimators_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "estimates_vs_accuracy" in draw_every_figure(estimators, estimators_frames(spec), spec, tmp_path)


# --------------------------------------------------------------------------- calibration
def calibration_frames(spec: Mapping) -> dict[str, pd.DataFrame]:
    """Every borrowed model on every set (`set_info`): calibration worse with the shift, better
    with N; no truth on noisy sets (as collect); the sets over the models (`set_frame`); the
    reliability bins of the reliability model at the largest N."""
    from oracle.experiments.calibration.report import METRICS, TRUTH_METRICS, set_frame, set_info

    n_max = max(spec["sizes"])
    rows, bins = [], []
    for run in [r for r in spec["borrowed_runs"] if r["seed"] in seeds_of(spec)]:
        n = int(run["cell"].removeprefix("N"))
        for j, evalset in enumerate(calibration.evaluation_sets(spec)):
            info = set_info(spec, evalset)
            epi = 0.5 * n ** -0.3 * (1 + 0.3 * j) * (1 + 0.2 * spec["archs"].index(run["arch"]) + 0.02 * run["seed"])
            row = {**classifier_row(run["arch"], run["cell"], n, run["seed"], epi, 0.9 - 0.03 * j), **info,
                   "evalset": evalset, "source": "metrics.json"}
            rows.append({**row, **({m: np.nan for m in TRUTH_METRICS} if info["shift"] == "noise" else {})})
            if run["arch"] == spec["reliability_arch"] and n == n_max:
                bins += reliability_rows("calibration", run["arch"], run["cell"], n, run["seed"], evalset)
    runs = pd.DataFrame(rows)[["arch", "cell", "N", "seed", "evalset", "n", *set_info(spec, spec["world"]),
                               *METRICS, "source"]]
    return {"runs": runs, "sets": set_frame(spec, runs), "reliability": pd.DataFrame(bins)}


CALIBRATION = shapes("calibration", lambda cfg, s: (_sets(s), tuple(s["arch_labels"][a] for a in s["archs"]),
                                                    tuple(s["sizes"]), len(seeds_of(s)), s["reliability_arch"]))


@pytest.mark.parametrize("cfg, spec", list(CALIBRATION.values()), ids=list(CALIBRATION))
def test_every_calibration_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "calibration_vs_shift" in draw_every_figure(calibration, calibration_frames(spec), spec, tmp_path)


# --------------------------------------------------------------------------- difficulty
def difficulty_frames(cfg: Mapping, spec: Mapping) -> dict[str, pd.DataFrame]:
    """The worlds' constants rising with tau (a closed form beside the Bayes error in a Gaussian
    world) and, with a learner, its test error above the Bayes error of each world per seed."""
    from oracle.experiments.difficulty.report import LEARNER_COLUMNS

    taus = spec["base_temperatures"]
    closed = world_kind(cfg) == "gaussian"
    curve = pd.DataFrame([{"world": w, "base_temperature": t, "label_temperature": 1.0, "prior": "null", "n": 10000,
                           "bayes_error": 0.1 * t, "bayes_error_se": 0.003, "aleatoric": 0.2 * t, "aleatoric_se": 0.004,
                           "mutual_information_bits": 1.5 / t, "mutual_information_se": 0.01,
                           "normalized_mutual_information": 0.5 / t,
                           "bayes_error_closed_form": 0.1 * t + 0.001 if closed else np.nan,
                           "closed_form_z": 0.3 if closed else np.nan, "closed_form_method": "closed_form" * closed,
                           "source": f"{w}/constants.json"} for w, t in taus.items()])
    learner = spec["learner"]
    rows = [{"world": w, "base_temperature": t, "arch": learner["arch"], "N": learner["size"], "seed": s,
             "n_test": 500, "num_classes": 10, "test_error": 0.1 * t + 0.03 + 0.005 * s, "test_error_se": 0.01,
             "bayes_error": 0.1 * t, "bayes_error_se": 0.003, "gap": 0.03 + 0.005 * s, "gap_se": 0.005,
             "excess_error_truth": 0.02 + 0.004 * s, "converged": True, "stopped_by": "patience", "kept_lr": 1e-3,
             "source": f"{w}/metrics.json"} for w, t in taus.items() for s in learner["seeds"][:2]] if learner else []
    return {"curve": curve, "learner": pd.DataFrame(rows, columns=list(LEARNER_COLUMNS))}


DIFFICULTY = shapes("difficulty", lambda cfg, s: (
    tuple(s["base_temperatures"].values()), world_kind(cfg),
    (s["arch_labels"][s["learner"]["arch"]], s["learner"]["size"], len(s["learner"]["seeds"][:2]))
    if s["learner"] else None))


@pytest.mark.parametrize("cfg, spec", list(DIFFICULTY.values()), ids=list(DIFFICULTY))
def test_every_difficulty_figure_prints_at_the_presets_shapes(cfg, spec, tmp_path):
    assert "learner_vs_bayes_curve" in draw_every_figure(difficulty, difficulty_frames(cfg, spec), spec, tmp_path)
