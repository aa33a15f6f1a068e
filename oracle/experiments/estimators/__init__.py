"""Experiment kind ``estimators`` (the MaNo seed): label-free accuracy estimators scored against
the true accuracy, and against the Bayes-optimal accuracy where the shift is exact.

The models are those of another experiment (``models``, of kind scaling, optionally filtered by
``archs``, ``sizes``, ``seeds``): trained on its world, predicted here on shifted test sets:

* ``noise``: the world's test set with clipped Gaussian noise of each sigma
  (`oracle.noisy_test_sets`); its labels are those of the clean rows, so the true accuracy is
  exact, but there is no Bayes accuracy (x' is not a draw from a world); the oracle's own
  posterior shift and accuracy on x' are reported instead;
* ``worlds``: world variants (base temperature tau, class prior pi): their own test sets,
  with the exact KL from the models' world and the variant's exact Bayes accuracy
  E[max_y p(y|x)] on the same rows.

Estimators (`oracle.measures.accuracy_estimators`: MaNo by the paper's equations and MaNo (official), as
its public code computes it; ATC-MC, ATC-NE, ConfScore, Entropy, Nuclear)
see only the model's outputs. ATC's thresholds are fitted on the models' own world's clean test
set, the in-distribution labelled split (the models never trained on it); that set is not
among the scored ones. Per model, each method is scored over the shifted sets by R^2 and
Spearman's rho against the true accuracy and, where it predicts an accuracy, by the mean
absolute error; and over the exact variants against their Bayes accuracy (how much of the
estimate follows the irreducible part of the drop). Scores are then averaged over models.

Data: ``estimates`` (model x set x method), ``scores`` (model x method x target), ``sets``
(one row per evaluation set). Accuracies are fractions in data, percent in tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import entry_schema, reporting_half
from oracle.experiments._training import size_cell
from oracle.report.columns import ID, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.world_specs import noisy_set_name
from oracle.world_specs import world_specs

KIND = "estimators"
DATA = ("estimates", "scores", "sets")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "estimates": CsvColumns(
        "estimators/<experiment>/data/estimates.csv",
        "one method's estimate for one borrowed model on one evaluation set",
        {**{k: ID[k] for k in ("arch", "cell", "seed", "evalset")},
         "shift": ("text", "clean, noise or variant"),
         "parameter": ("text", "the set's shift as text (sigma, tau, prior)"),
         "method": ("text", "estimator: mano, mano_official, atc_mc, atc_ne, confscore, entropy or nuclear"),
         "estimate": ("fraction or score", "the method's output: a predicted accuracy (atc_mc, atc_ne, "
                                           "confscore) or a unitless score (the others)"),
         "accuracy": ("fraction", "the model's true accuracy on the set against its labels"),
         "bayes_accuracy": ("fraction", "E[max_y p(y|x)] of the set (clean set and variants; NaN on noise)"),
         "bayes_accuracy_se": ("fraction", "its SE"), "n": ("samples", "rows of the set")}),
    "scores": CsvColumns(
        "estimators/<experiment>/data/scores.csv",
        "one method for one model against one target, over the shifted sets",
        {**{k: ID[k] for k in ("arch", "cell", "seed")}, "method": ("text", "as in estimates.csv"),
         "target": ("text", "accuracy (over every shifted set) or bayes_accuracy (over the world variants)"),
         "r2": ("1", "R^2 of a linear fit of the target on the estimate"),
         "spearman": ("1", "Spearman rho (signed) of estimate and target"),
         "mae": ("fraction", "mean |estimate - target| (NaN for a method that gives a score)"),
         "n": ("sets", "sets scored")}),
    "sets": CsvColumns(
        "estimators/<experiment>/data/sets.csv",
        "one evaluation set (clean first), over the models",
        {"evalset": ID["evalset"], "shift": ("text", "clean, noise or variant"),
         "parameter": ("text", "the set's shift as text"), "n": ("samples", "rows of the set"),
         "kl_exact": ("nats", "exact KL of the variant world from the models' world (0 for the clean set, "
                              "NaN for noise)"),
         "kl_monte_carlo": ("nats", "its Monte Carlo check"), "kl_monte_carlo_se": ("nats", "its SE"),
         "posterior_shift": ("nats", "noise only: the oracle's E[KL(p(y|x) || p(y|x'))]"),
         "posterior_shift_se": ("nats", "its SE"),
         "oracle_acc_noisy": ("fraction", "noise only: the oracle's accuracy on x'"),
         "accuracy": ("fraction", "mean model accuracy on the set"),
         "accuracy_std": ("fraction", "its std over models"), "n_models": ("models", "models averaged"),
         "bayes_accuracy": ("fraction", "mean E[max_y p(y|x)] (NaN on noise)"),
         "drop_pp": ("pp", "100 x (clean accuracy - accuracy)"),
         "bayes_drop_pp": ("pp", "100 x (clean Bayes accuracy - bayes_accuracy)"),
         "irreducible_share": ("1", "bayes_drop_pp / drop_pp, variants only")}),
}
ARTIFACTS = artifacts_by_name(
    Artifact("estimator_scores", "table",
             "Label-free accuracy estimators on shifted oracle test sets: R^2 of a linear fit and Spearman's "
             "rho (signed) of each estimate against the true accuracy over the shifted sets, and the mean "
             "absolute error (pp) of methods that predict an accuracy; R^2 and rho against the exact Bayes "
             "accuracy over the world variants. Mean ± std over models."),
    Artifact("shifted_sets", "table",
             "The shifted test sets: kind and parameter, exact KL from the models' world (nats, with its "
             "Monte Carlo check ± SE), the oracle's posterior shift E[KL(p(y|x) || p(y|x'))] (nats) and its "
             "accuracy on x' (%) for noise, the models' accuracy (%, mean ± std over models), the Bayes "
             "accuracy (%) of exact variants, and the share of the accuracy drop that is irreducible "
             "(Bayes drop / model drop)."),
    Artifact("estimates_vs_accuracy", "figure",
             "Each estimator's estimate against the true accuracy (%) of every model on every shifted set "
             "(colour: shift kind; open circle: the clean in-distribution set, not scored); dashed: "
             "estimate = accuracy for methods that predict an accuracy. Titles: R^2 and rho, mean over models."),
)


def check(name: str, entry: dict, config: Mapping) -> dict:
    """``models`` names an experiment of kind scaling; ``archs``/``sizes``/``seeds`` (null: all
    of it) select its classifiers; ``noise`` (sigmas > 0) and ``worlds`` (variants other than
    the models' world) make at least three shifted sets."""
    entry = borrow_models(name, entry, config)
    if len(entry["shifted_sets"]) < 3:
        raise ConfigError(f"config key 'experiments.{name}': {len(entry['shifted_sets'])} shifted sets (noise + "
                          "worlds); R^2 and Spearman's rho need at least 3")
    return entry


def borrow_models(name: str, entry: dict, config: Mapping) -> dict:
    """The entry of a kind that evaluates another experiment's classifiers on shifted test
    sets (estimators, calibration), checked and completed: ``models`` (an experiment of kind
    scaling), ``archs``/``sizes``/``seeds`` (null: all of it), ``noise`` (sigmas > 0) and
    ``worlds`` (variants other than the models' world); adds ``world``, ``noise_sets``
    ({set name: sigma}), ``shifted_sets``, ``borrowed_runs``, ``world_parameters`` and
    ``arch_labels``."""
    key = f"experiments.{name}"
    source_name = entry.get("models")
    exps = config.get("experiments") or {}
    if source_name not in exps or exps[source_name]["kind"] != "scaling":
        known = [n for n, e in exps.items() if e["kind"] == "scaling"]
        raise ConfigError(f"config key '{key}.models': {source_name!r} is not an experiment of kind scaling "
                          f"({', '.join(known) or 'none'})")
    from oracle.experiments import kind_module  # the registry imports this package: not at module level

    source = kind_module("scaling").check(source_name, dict(exps[source_name]), config)
    for opt, have in (("archs", source["archs"]), ("sizes", source["sizes"]), ("seeds", source["seeds"])):
        chosen = entry.get(opt) or list(have)
        bad = [v for v in chosen if v not in have]
        if bad:
            raise ConfigError(f"config key '{key}.{opt}': {bad} not among the {opt} of experiment {source_name!r} ({have})")
        entry[opt] = list(chosen)
    world = source["world"]
    worlds = world_specs(config)
    for w in entry.get("worlds") or []:
        if w not in worlds or w == world:
            raise ConfigError(f"config key '{key}.worlds': {w!r} is not a world variant other than the models' "
                              f"world {world!r} (worlds: {', '.join(worlds)})")
    entry["worlds"] = list(entry.get("worlds") or [])
    entry["noise"] = [float(s) for s in entry.get("noise") or []]
    entry["world"] = world
    entry["noise_sets"] = {noisy_set_name(world, s): s for s in entry["noise"]}
    entry["shifted_sets"] = [*entry["noise_sets"], *entry["worlds"]]
    entry["borrowed_runs"] = [{"experiment": source_name, "arch": a, "cell": size_cell(n), "seed": int(s)}
                     for a in entry["archs"] for n in entry["sizes"] for s in entry["seeds"]]
    entry["world_parameters"] = {w: {"prior": worlds[w]["prior"], "base_temperature": worlds[w]["base_temperature"]}
                                 for w in [world, *entry["worlds"]]}
    entry["arch_labels"] = source["arch_labels"]
    return entry


def evaluation_sets(spec: Mapping) -> list[str]:
    """The models' clean test set (ATC's in-distribution split) and every shifted set."""
    return [spec["world"], *spec["shifted_sets"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """Predictions (logits) and metrics of the models it evaluates on every set, the exact-KL
    checks of its variants, its noisy sets' constants."""
    return {"predictions": paths.experiment_predictions(name), "metrics": paths.experiment_metrics(name),
            "divergences": paths.divergences(spec["worlds"], spec["world"]),
            "noise": paths.noisy_constants(spec["world"], spec["noise"])}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
