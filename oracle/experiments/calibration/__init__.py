"""Experiment kind ``calibration`` (the calibration-under-shift seed): how the calibration of
classifiers of several capacities (architecture, N) changes with the magnitude of a test-time
shift, measured as a benchmark would (against labels) and as only the oracle can (against the
exact posterior).

The models are those of another experiment (``models``, of kind scaling, filtered by
``archs``, ``sizes``, ``seeds``; `oracle.experiments.estimators.borrow_models`), predicted on
their world's clean test set (noise sigma 0, tau of the world) and on shifted sets: noisy
copies of it (``noise``: sigma > 0, `oracle.noisy_test_sets`) and the test sets of world
variants (``worlds``: base temperature tau, class prior). Per model and set the metrics files
hold (`oracle.classifiers.evaluate.evaluate_predictions`, 10 equal-width bins): ECE against
the labels, the true ECE (correctness replaced by p(yhat|x)), the pointwise true calibration
error E|max q - p(yhat|x)|, the Brier score, and the overconfidence (mean confidence minus
accuracy) against labels and truth.

What the truth is differs by shift: a world variant's labels are drawn from its posterior
(y ~ p_T(y|x), DESIGN rule 8), so there the exact posterior is the truth and label ECE - true
ECE is the labels' sampling noise in the bins. A noisy set keeps the clean rows' labels y ~
p(y|x): given the noisy input x' they are valid draws from the noisy world's posterior
E[p(y|x) | x'], which is not the flow's p(y|x') (x' is not a sample of the flow), so on a noisy
set the truth-based metrics are left out and only the label-based ones are reported.

Data: ``runs`` (one row per model and set), ``sets`` (one row per set: means over models with
SE over models), ``reliability`` (per-bin data of the reliability model: ``reliability_arch``
at the largest selected N, every seed and set). Fractions throughout (probabilities).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import entry_schema, reporting_half
from oracle.experiments.estimators import borrow_models
from oracle.report.columns import ID, METRICS, RELIABILITY, TRAINING, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name

KIND = "calibration"
DATA = ("runs", "sets", "reliability")
#: What an evaluation set of the calibration kind is (`oracle.experiments.calibration.report.set_info`).
SET_COLUMNS = {
    "shift": ("text", "clean, noise or variant"),
    "sigma": ("1 (pixel scale [-1, 1])", "noise sigma (0 for the clean set, NaN for a variant)"),
    "tau": ("1", "base temperature of the set's world (NaN for a noisy set)"),
    "prior_shifted": ("bool", "a variant whose class prior differs from the models' world's"),
    "parameter": ("text", "the set's shift as text"),
    "labels": ("text", "where the set's labels come from"),
}
#: The calibration kind's metrics (its report's ``METRICS``); the truth ones are NaN on a noisy set.
CALIBRATION_METRICS = ("acc", "ece", "ece_posterior", "calibration_pointwise", "brier", "overconfidence",
                        "overconfidence_truth")

#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "runs": CsvColumns(
        "calibration/<experiment>/data/runs.csv",
        "one borrowed model (arch, cell, seed) on one evaluation set (the models' clean test set, its noisy "
        "copies, world variants)",
        {**{k: ID[k] for k in ("arch", "cell", "N", "seed", "evalset")}, "n": METRICS["n"], **SET_COLUMNS,
         **{k: METRICS[k] for k in CALIBRATION_METRICS}, "source": TRAINING["source"]}),
    "sets": CsvColumns(
        "calibration/<experiment>/data/sets.csv",
        "one evaluation set, over every model",
        {"evalset": ID["evalset"], **SET_COLUMNS, "n_models": ("models", "models averaged"),
         **{k: (METRICS[k][0], "mean over models of runs.csv " + k) for k in CALIBRATION_METRICS},
         **{f"{k}_se": (METRICS[k][0], f"SE of {k} over models (std / sqrt(n_models))")
            for k in CALIBRATION_METRICS},
         "ece_diff": ("fraction", "mean over models of ece - ece_posterior (label ECE minus true ECE)"),
         "ece_diff_se": ("fraction", "its SE over models"), "ece_diff_z": ("1", "ece_diff / ece_diff_se"),
         "ece_rank_correlation": ("1", "Spearman rho of ece and ece_posterior over models (NaN with fewer "
                                       "than 3 models or constant values)")}),
    "reliability": RELIABILITY,
}
ARTIFACTS = artifacts_by_name(
    Artifact("calibration_under_shift", "table",
             "Calibration under test-time shift per architecture and training-set size N: accuracy (%), ECE "
             "against the labels and the true ECE against the exact posterior (10 equal-width bins), the "
             "pointwise true calibration error E|max q - p(yhat|x)|, Brier score, and overconfidence (mean "
             "confidence minus accuracy) against labels and truth; mean ± std over seeds. Sets: the clean test "
             "set (sigma 0), its noisy copies (sigma), world variants (tau, prior). On a noisy set the truth "
             "columns are empty: its labels are the clean rows' draws, valid given x', but the flow's p(y|x') at "
             "the noisy input is not their posterior, so there is no truth to compare with."),
    Artifact("ece_labels_vs_truth_under_shift", "table",
             "Does the ECE a benchmark computes from labels track the true miscalibration under shift? Per "
             "shifted set: label ECE, true ECE, their difference with its SE over models and z = difference / "
             "SE, the rank correlation of the two over models, and where the labels come from (world variants: "
             "drawn from the variant's posterior). Noisy sets are left out: the flow's p(y|x') at a noisy input "
             "is not the posterior of its labels."),
    Artifact("calibration_vs_shift", "figure",
             "Calibration against shift magnitude, one line per architecture and N (mean ± std over seeds): top "
             "row against the noise sigma (0 = clean test set), bottom row against the base temperature tau of "
             "world variants (the models' world at its own tau); columns: ECE against labels (solid) and true "
             "ECE (dashed), Brier score, overconfidence against labels (solid) and truth (dashed), and label ECE "
             "minus true ECE, mean ± SE over models (black). The noise row has no truth lines and no fourth panel: "
             "the flow's p(y|x') at a noisy input is not the posterior of the set's labels."),
    Artifact("reliability_under_shift", "figure",
             "Reliability diagrams of one model (the reliability architecture at the largest N, pooled over "
             "seeds) across shift magnitudes, 10 equal-width bins: bars, the empirical frequency of correct "
             "predictions against the set's labels; points, the mean true probability p(yhat|x) in the bin; "
             "dashed, perfect calibration; the number of predictions in each bin under its bar, a bin of "
             "fewer than 10 predictions faded (hatched bar, hollow point): its frequency is mostly noise."),
)


def check(name: str, entry: dict, config: Mapping) -> dict:
    """The selection and sets of `oracle.experiments.estimators.borrow_models` (at least two
    shifted sets); ``reliability_arch`` (default the first selected architecture) names the
    model of the reliability diagrams, at the largest selected N."""
    entry = borrow_models(name, entry, config)
    key = f"experiments.{name}"
    if len(entry["shifted_sets"]) < 2:
        raise ConfigError(f"config key '{key}': {len(entry['shifted_sets'])} shifted sets (noise + worlds); a "
                          "calibration curve needs at least 2")
    arch = entry.get("reliability_arch") or entry["archs"][0]
    if arch not in entry["archs"]:
        raise ConfigError(f"config key '{key}.reliability_arch': {arch!r} is not among the selected archs "
                          f"({', '.join(entry['archs'])})")
    entry["reliability_arch"] = arch
    return entry


def evaluation_sets(spec: Mapping) -> list[str]:
    """The models' clean test set (sigma 0) and every shifted set."""
    return [spec["world"], *spec["shifted_sets"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """The metrics files of the models it evaluates, on every set."""
    return {"metrics": paths.experiment_metrics(name)}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
