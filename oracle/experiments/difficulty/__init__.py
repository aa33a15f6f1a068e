"""Experiment kind ``difficulty`` (the Bayes-error-of-flows seed, Theisen et al. 2021, Sec. 3.2):
how hard a world is, against its base temperature tau.

Each tau is a world variant of the config (``worlds:``), sampled and evaluated exactly like the
base world; its constants (``samples/<world>/constants.json``, `oracle.measures.world_constants`)
are Monte Carlo means over all its samples with standard errors: the Bayes error
E[1 - max_y p(y|x)], the aleatoric floor E[H(p(y|x))] (nats) and I(X;Y) (bits). A world with a
closed form (a two-class Gaussian world: Phi(-||mu_1 - mu_2|| / (2 std tau))) has it beside the
estimate, with z = (estimate - closed form) / SE.

With a ``learner`` (the seed's Figure 3: a model's test error beside the exact Bayes error at
each tau), one architecture is trained at one N on each world of the curve (its cell is the
world's name; hard labels y ~ p_T(y|x), DESIGN rule 8) and scored on that world's test set. The gap is test error minus the Bayes error
E[1 - max_y p(y|x)] of the same test rows, per seed, then mean ± SE over seeds; beside it, the
excess error against the truth E[max_y p(y|x) - p(yhat|x)] (>= 0 for every classifier, no
label noise). Without a learner no classifier is trained.

Data: ``curve``, one row per world in the order of the entry's ``worlds``; ``learner``, one row
per (world, seed) of the learner (empty without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.classifiers.specs import arch_spec
from oracle.errors import ConfigError
from oracle.experiments import _training, entry_schema, reporting_half
from oracle.report.columns import ID, METRICS, TRAINING, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.world_specs import world_specs

KIND = "difficulty"
DATA = ("curve", "learner")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "curve": CsvColumns(
        "difficulty/<experiment>/data/curve.csv",
        "one world variant (spec order), Monte Carlo over all its samples",
        {"world": ("text", "world name"), "base_temperature": ("1", "its base temperature tau"),
         "label_temperature": ("1", "its label temperature"),
         "prior": ("JSON", "its class prior (null: uniform)"),
         "n": ("samples", "samples averaged"),
         "bayes_error": ("fraction", "E[1 - max_y p(y|x)]"), "bayes_error_se": ("fraction", "its SE"),
         "aleatoric": ("nats", "E[H(p(y|x))]"), "aleatoric_se": ("nats", "its SE"),
         "mutual_information_bits": ("bits", "I(X;Y) = H(Y) - E[H(p(y|x))]"),
         "mutual_information_se": ("bits", "its SE"),
         "normalized_mutual_information": ("fraction", "I(X;Y) / H(Y)"),
         "bayes_error_closed_form": ("fraction", "the closed-form Bayes error where the world has one (NaN "
                                                 "otherwise)"),
         "closed_form_z": ("1", "(bayes_error - closed form) / SE"),
         "closed_form_method": ("text", "how the closed form is computed (empty without one)"),
         "source": ("path", "the world constants file read")}),
    "learner": CsvColumns(
        "difficulty/<experiment>/data/learner.csv",
        "the learner (one arch at one N) of one seed on its own world's test set",
        {"world": ("text", "world name it trained and is tested on"),
         "base_temperature": ("1", "its base temperature tau"), "arch": ID["arch"], "N": ID["N"],
         "seed": ID["seed"], "n_test": ("samples", "test rows"), "num_classes": METRICS["num_classes"],
         "test_error": ("fraction", "1 - accuracy against the world's labels"),
         "test_error_se": ("fraction", "its SE over the test rows"),
         "bayes_error": ("fraction", "E[1 - max_y p(y|x)] of the same rows"),
         "bayes_error_se": ("fraction", "its SE"),
         "gap": ("fraction", "test_error - bayes_error, paired per row (runs.csv bayes_gap)"),
         "gap_se": ("fraction", "its SE over the test rows"),
         "excess_error_truth": ("fraction", "E[max_y p(y|x) - p(yhat|x)]: excess error against the truth, "
                                            "free of label noise"),
         "converged": TRAINING["converged"], "stopped_by": TRAINING["stopped_by"], "kept_lr": TRAINING["kept_lr"],
         "source": TRAINING["source"]}),
}
ARTIFACTS = artifacts_by_name(
    Artifact("difficulty_vs_tau", "table",
             "How hard the oracle world is against its base temperature tau: Bayes error (%), aleatoric "
             "floor E[H(p(y|x))] (nats) and I(X;Y) (bits) of each world variant, Monte Carlo over all its "
             "samples ± SE; the closed-form Bayes error where the world has one, with z = (estimate - "
             "closed form) / SE."),
    Artifact("difficulty_curve", "figure",
             "Bayes error (%), aleatoric floor (nats) and I(X;Y) (bits) against the base temperature tau "
             "(each point a world variant sampled at that tau, ± SE over its samples); closed-form Bayes "
             "error where the world has one (open markers)."),
    Artifact("learner_vs_bayes", "table",
             "A learner against the Bayes error across difficulty (Theisen et al., Figure 3): one architecture "
             "trained at one N on each world variant, its test error (%) on that world's test set beside the "
             "exact Bayes error (%) of the same rows, the gap (pp) and the excess error against the truth "
             "E[max_y p(y|x) - p(yhat|x)] (pp, free of label noise), mean ± SE over seeds (std over seeds "
             "beside it)."),
    Artifact("learner_vs_bayes_curve", "figure",
             "(a) Test error of one architecture trained at one N on each world variant (mean ± SE over seeds, "
             "each seed faint) beside the exact Bayes error of the same test rows, against the base temperature "
             "tau; (b) the gap (test error - Bayes error, pp) and the excess error against the truth, mean ± SE."),
)


def check(name: str, entry: dict, config: Mapping) -> dict:
    """``worlds``: names of worlds of the config (at least two, no repeats)."""
    key = f"experiments.{name}"
    specs = world_specs(config)
    worlds = list(entry.get("worlds") or [])
    if len(worlds) < 2 or len(set(worlds)) != len(worlds):
        raise ConfigError(f"config key '{key}.worlds': expected at least two distinct world names, got {worlds}")
    for w in worlds:
        if w not in specs:
            raise ConfigError(f"config key '{key}.worlds': no world named {w!r} (worlds: {', '.join(specs)})")
    entry["worlds"] = worlds
    entry["base_temperatures"] = {w: float(specs[w]["base_temperature"]) for w in worlds}
    learner = entry.get("learner")
    entry["learner"] = None
    if learner:
        entry["training"] = _training.training_settings(entry, config)
        entry["learner"] = _check_learner(key, dict(learner), worlds, specs, config, entry)
        entry["archs"] = [entry["learner"]["arch"]]
        entry["arch_labels"] = {entry["learner"]["arch"]: arch_spec(config, entry["learner"]["arch"])["label"]}
    return entry


def _check_learner(key: str, learner: dict, worlds: list[str], specs: Mapping, config: Mapping, entry: Mapping) -> dict:
    """``learner``: ``arch`` (a name of classifiers.archs), ``size`` (with the stopping rule's
    validation rows, at most every world's training pool), ``seeds``."""
    arch = learner.get("arch")
    if arch not in config["classifiers"]["archs"]:
        raise ConfigError(f"config key '{key}.learner.arch': {arch!r} is not in classifiers.archs "
                          f"({', '.join(config['classifiers']['archs'])})")
    size = int(learner["size"])
    for w in worlds:
        _training.check_pool_fits(f"{key}.learner.size", size, entry, w, specs[w])
    return {"arch": arch, "size": size, "seeds": [int(s) for s in learner["seeds"]]}


def classifier_runs(spec: Mapping) -> list[dict]:
    """With a learner, one classifier per (world, seed), its cell the world's name; else none
    (the difficulty of a world needs no classifier)."""
    learner = spec.get("learner")
    if not learner:
        return []
    return [{"arch": learner["arch"], "cell": w, "seed": s} for w in spec["worlds"] for s in learner["seeds"]]


def training_spec(spec: Mapping, cell: str) -> dict:
    """Cell ``<world>``: the learner's N rows of that world, hard labels y ~ p_T(y|x)."""
    if not spec.get("learner"):
        raise ConfigError(f"experiment kind difficulty trains no classifiers without a learner (asked for cell {cell!r})")
    if cell not in spec["worlds"]:
        raise ConfigError(f"difficulty experiment: no world {cell!r} among its worlds ({', '.join(spec['worlds'])})")
    return {"world": cell, "n": spec["learner"]["size"], "labels": "hard", "hard_label": "label",
            "training": dict(spec["training"])}


def evaluation_sets(spec: Mapping) -> list[str]:
    """With a learner, every world's test set; else none."""
    return list(spec["worlds"]) if spec.get("learner") else []


def run_evaluation_sets(spec: Mapping, run: Mapping) -> list[str]:
    """A learner model is predicted on its own world's test set only (its cell)."""
    return [run["cell"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """The constants of each of its worlds; with a learner, its models' metrics."""
    out = {"constants": paths.world_constants(spec["worlds"])}
    if spec.get("learner"):
        out["metrics"] = paths.experiment_metrics(name)
    return out


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
