"""The column dictionary of a run's data CSVs: per file, what one row is and, per column, its
unit and meaning. docs/outputs.md is generated from it (`dictionary_markdown`) and a test holds
it to the columns the code writes (`oracle.classifiers.evaluate.ID_COLUMNS`, `metrics_row`,
`oracle.report.timings.TIMING_COLUMNS`, ...), so the docs cannot drift from the files.

A column ``<name>_se`` that is not listed is the Monte Carlo standard error of ``<name>``, in
its unit (`describe`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple


class CsvColumns(NamedTuple):
    """One CSV of a run: `path` (relative to results/<run>), what one `row` is, and its
    `columns` {name: (unit, meaning)} in the order the file has them. A path starting with
    ``<kind>/`` is shared by the experiment kinds `kinds`."""

    path: str
    row: str
    columns: dict[str, tuple[str, str]]
    kinds: tuple[str, ...] = ()


_ID = {
    "experiment": ("text", "experiment name (config key experiments.<name>)"),
    "arch": ("text", "classifier architecture (config key classifiers.archs.<name>)"),
    "cell": ("text", "the experiment's configuration the classifier belongs to (its training world and labels)"),
    "seed": ("integer", "training seed (training-set permutation and initialisation)"),
    "evalset": ("text", "evaluation set: a world's test split, or a noisy copy of it (<world>/noise<sigma>)"),
    "N": ("samples", "training-set size"),
    "labels": ("text", "label kind trained on: hard (y ~ p(y|x)) or soft (p(y|x) itself)"),
    "hard_label": ("text", "which hard label: label (the world's y ~ p(y|x)), posterior_argmax or source"),
}

_METRICS = {
    "acc": ("fraction", "top-1 accuracy against the test labels"),
    "acc_posterior": ("fraction", "top-1 agreement with argmax p(y|x)"),
    "aleatoric": ("nats", "E[H(p(y|x))] over the test rows, the aleatoric floor"),
    "bayes_accuracy": ("fraction", "E[max_y p(y|x)], the Bayes classifier's accuracy"),
    "bayes_gap": ("fraction", "Bayes accuracy minus accuracy, per row paired"),
    "brier": ("1", "multi-class Brier score against the labels"),
    "brier_expected": ("1", "Brier score in expectation over y ~ p(y|x)"),
    "calibration_pointwise": ("fraction", "E|max q - p(argmax q|x)|, the true calibration error without bins"),
    "ece": ("fraction", "top-label expected calibration error against the labels (n_bins equal-width bins)"),
    "ece_posterior": ("fraction", "the same bins with correctness replaced by p(argmax q|x) (exact calibration error)"),
    "epistemic": ("nats", "E[KL(p(.|x) || q(.|x))], the epistemic part of the loss"),
    "n": ("samples", "test rows the metrics are averaged over"),
    "n_bins": ("bins", "confidence bins of the ECEs"),
    "nll": ("nats", "E[-log q(y|x)] at the labels (test cross-entropy)"),
    "nll_regret": ("nats", "E[log p(y|x) - log q(y|x)] at the labels; SE over the labels given x"),
    "num_classes": ("classes", "K"),
    "oracle_nll": ("nats", "E[-log p(y|x)] at the labels, the Bayes classifier's cross-entropy"),
    "oracle_nll_minus_floor": ("nats", "E[-log p(y|x) - H(p(.|x))], 0 in expectation when labels are drawn from p"),
    "overconfidence": ("fraction", "mean confidence minus accuracy on the labels"),
    "overconfidence_truth": ("fraction", "mean confidence minus mean p(argmax q|x)"),
    "total": ("nats", "E[-sum_y p log q], total cross-entropy = aleatoric + epistemic"),
}

#: The metric columns of runs.csv (`oracle.classifiers.evaluate.metrics_row`), with their SEs.
METRIC_COLUMNS = tuple(_METRICS) + tuple(f"{m}_se" for m in _METRICS)

_TRAINING = {
    "epochs": ("epochs", "the training budget"),
    "train_seconds": ("s", "wall time of the training job"),
    "converged": ("bool", "the stopping rule ended training, or the monitored loss fell by at most its tolerance over the last window"),
    "stopped_by": ("text", "patience (the stopping rule) or budget"),
    "steps": ("optimizer steps", "steps taken"),
    "kept_steps": ("optimizer steps", "steps of the checkpoint kept"),
    "kept_epoch": ("epochs", "epoch of the checkpoint kept"),
    "loss_change": ("fraction", "relative change of the monitored loss's best over the last window against its best before (negative: still falling; empty: too few evaluations)"),
    "source": ("path", "the metrics file the row was read from"),
}

#: What an evaluation set of the calibration kind is (`oracle.experiments.calibration.report.set_info`).
_SET = {
    "shift": ("text", "clean, noise or variant"),
    "sigma": ("1 (pixel scale [-1, 1])", "noise sigma (0 for the clean set, NaN for a variant)"),
    "tau": ("1", "base temperature of the set's world (NaN for a noisy set)"),
    "prior_shifted": ("bool", "a variant whose class prior differs from the models' world's"),
    "parameter": ("text", "the set's shift as text"),
    "labels": ("text", "where the set's labels come from"),
}
#: The calibration kind's metrics (`oracle.experiments.calibration.report.METRICS`); the truth ones are NaN on a noisy set.
_CALIBRATION_METRICS = ("acc", "ece", "ece_posterior", "calibration_pointwise", "brier", "overconfidence",
                        "overconfidence_truth")

#: The data CSVs a run writes (each experiment kind's `DATA`, the claims and the timings), in the order
#: docs/outputs.md lists them.
CSV_COLUMNS: tuple[CsvColumns, ...] = (
    CsvColumns("<kind>/<experiment>/data/runs.csv",
               "one evaluation of one classifier on one evaluation set", {**_ID, **_METRICS, **_TRAINING},
               ("scaling", "labels")),
    CsvColumns("<kind>/<experiment>/data/reliability.csv",
               "one confidence bin of one evaluation of one classifier",
               {**_ID, "bin": ("integer", "bin index, 0 = lowest confidence"),
                "count": ("samples", "test rows in the bin"),
                "confidence": ("fraction", "mean max q(y|x) in the bin (empty when count is 0)"),
                "accuracy": ("fraction", "accuracy against the labels in the bin"),
                "true_probability": ("fraction", "mean p(argmax q|x) in the bin")},
               ("scaling", "labels", "calibration")),
    CsvColumns("scaling/<experiment>/data/fits.csv",
               "one power-law fit value ~ coef N^-alpha: per (arch, seed) (kind seed), mean ± std over seeds "
               "(kind arch) or of the seed-mean curve (kind curve)",
               {"kind": ("text", "seed, arch or curve (see row)"),
                "value": ("text", "the runs.csv column fitted (epistemic, ece, ece_posterior, ...)"),
                "arch": _ID["arch"], "seed": ("integer", "training seed (kind seed only)"),
                "alpha": ("1", "power-law exponent"), "alpha_se": ("1", "SE of alpha from the fit"),
                "coef": ("unit of value", "prefactor at N = 1"), "coef_se": ("unit of value", "SE of coef"),
                "r2": ("1", "R^2 of the log-log line"), "n_points": ("sizes", "training sizes N fitted"),
                "curvature": ("1", "coefficient of (ln N)^2 of a quadratic log-log fit, 0 on a power law"),
                "alpha_std": ("1", "std of alpha over seeds (kind arch)"),
                "curvature_std": ("1", "std of curvature over seeds (kind arch)"),
                "n_seeds": ("seeds", "seeds averaged (kind arch)"),
                "weighted": ("bool", "least squares weighted by the values' SE"),
                "note": ("text", "why the fit is empty (fewer than two N, a value <= 0)")}),
    CsvColumns("<kind>/<experiment>/data/pairs.csv",
               "one difference of a per-test-row value between two classifiers of the same arch and seed on the same "
               "test rows (scaling: one N minus the next; labels: soft minus hard at one N; shift: one configuration "
               "minus a later one)",
               {"arch": _ID["arch"], "seed": _ID["seed"],
                "value": ("text", "the per-row value compared: acc (correct, 0/1) or epistemic (KL(p || q), nats)"),
                "a": ("text", "cell of the first classifier"), "b": ("text", "cell of the second classifier"),
                "diff": ("unit of value", "mean over the test rows of value(a) - value(b)"),
                "diff_se": ("unit of value", "SE of diff over the test rows, paired per row"),
                "n_rows": ("samples", "test rows paired")},
               ("scaling", "labels", "shift")),
    CsvColumns("labels/<experiment>/data/curves.csv", "one training epoch of one classifier",
               {"arch": _ID["arch"], "cell": _ID["cell"], "seed": _ID["seed"], "N": _ID["N"],
                "labels": _ID["labels"], "epoch": ("epochs", "epoch number, 1 = first"),
                "train_loss": ("nats", "mean training loss of the epoch per sample: cross-entropy against the labels "
                                       "trained on (hard y, or soft p(y|x))"),
                "curve_acc": ("fraction", "accuracy against the labels on the curve_size rows of the oracle test set "
                                          "after the epoch"),
                "curve_epistemic": ("nats", "E[KL(p || q)] on the same rows after the epoch")}),
    CsvColumns("shift/<experiment>/data/runs.csv",
               "one evaluation of one classifier on the baseline test set (runs.csv's columns with the metrics the "
               "metrics file holds, shift_type and the training set's shift)",
               {**{k: v for k, v in _ID.items() if k in ("experiment", "arch", "cell")},
                "shift_type": ("text", "baseline, prior, noise, prior+noise, variant or variant+noise: how the "
                                       "configuration's training set differs from the baseline's"),
                **{k: v for k, v in _ID.items() if k not in ("experiment", "arch", "cell")}, **_METRICS, **_TRAINING,
                "val_acc": ("fraction", "accuracy on the held-out part of the shifted training set, last epoch"),
                "counts": ("JSON", "realised class counts of the training set (empty when not recorded)"),
                "kl_y_empirical": ("nats", "KL_y of the realised class frequencies against the baseline world's "
                                           "class prior P0 (uniform unless the world sets one)"),
                "smallest_class_rows": ("samples", "rows of the smallest class the baseline world draws, in the "
                                                   "training set's N rows before the validation split: the "
                                                   "realised counts, or for a configuration on the pool's first N "
                                                   "rows, their labels counted by collect"),
                "unique_rows": ("samples", "distinct sample rows in the training set (resampling draws with "
                                           "replacement)"),
                "resampled_classes": ("JSON", "classes drawn with replacement, a JSON list"),
                "acc_adjusted": ("fraction", "logit-adjusted accuracy against the test labels: argmax of log q(y|x) "
                                             "- log pi_train(y) + log pi_world(y), pi_train the configuration's "
                                             "training prior, pi_world the test world's"),
                "acc_adjusted_se": ("fraction", "its SE over the test rows")}),
    CsvColumns("shift/<experiment>/data/configurations.csv",
               "one shift configuration (config order), over its classifiers (every arch and seed)",
               {"cell": ("text", "configuration name (config key configurations.<name>)"),
                "label": ("text", "its display label (default: its name)"),
                "shift_type": ("text", "as in runs.csv"),
                "world": ("text", "the world its training set is drawn from"),
                "prior": ("JSON", "its class prior pi (null: the world's own)"),
                "noise_std": ("1 (pixel scale [-1, 1])", "sigma of the Gaussian noise added to the training "
                                                         "images, x' = clip(x + eps, -1, 1)"),
                "n_runs": ("classifiers", "classifiers averaged"),
                "kl_y_target": ("nats", "KL_y(pi || P0) of the configured prior, P0 the baseline world's (NaN without one)"),
                "kl_y_empirical": ("nats", "mean of runs.csv kl_y_empirical"),
                "kl_y_empirical_std": ("nats", "its std over the classifiers"),
                "kl_exact": ("nats", "exact KL(p_train(x, y) || p_test(x, y)) where tractable (no noise, label "
                                     "temperature 1); NaN otherwise"),
                "kl_monte_carlo": ("nats", "Monte Carlo check of the variant world's KL from the flow's log densities"),
                "kl_monte_carlo_se": ("nats", "its SE"),
                "kl_monte_carlo_z": ("1", "(Monte Carlo - closed form) / SE"),
                "acc": ("fraction", "mean test accuracy on the baseline test set"),
                "acc_std": ("fraction", "its std over the classifiers"),
                "acc_se_rows": ("fraction", "mean over the classifiers of acc's SE over the test rows"),
                "delta_pp": ("pp", "100 x (acc - the baseline configuration's mean acc)"),
                "acc_adjusted": ("fraction", "mean of runs.csv acc_adjusted (logit-adjusted accuracy)"),
                "acc_adjusted_std": ("fraction", "its std over the classifiers"),
                "acc_adjusted_se_rows": ("fraction", "mean over the classifiers of its SE over the test rows"),
                "delta_adjusted_pp": ("pp", "100 x (acc_adjusted - the baseline configuration's mean acc_adjusted)"),
                "bayes_cost_pp": ("pp", "exact Bayes cost of the training prior on the baseline test rows: 100 x "
                                        "mean over the rows of max_y p(y|x) - p(yhat|x), yhat = argmax_y p(y|x) "
                                        "pi_train(y) / pi_world(y) (the world's Bayes rule under the training "
                                        "prior), in expectation over the rows' labels"),
                "bayes_cost_se_pp": ("pp", "its SE over the test rows (as a sample of the world)"),
                "smallest_class_rows_min": ("samples", "smallest runs.csv smallest_class_rows over the classifiers"),
                "smallest_class_rows_max": ("samples", "largest runs.csv smallest_class_rows over the classifiers"),
                "val_acc": ("fraction", "mean of runs.csv val_acc"), "val_acc_std": ("fraction", "its std"),
                "bayes_accuracy": ("fraction", "mean Bayes accuracy E[max_y p(y|x)] of the test rows"),
                "posterior_shift": ("nats", "noise only: the oracle's E[KL(p(y|x) || p(y|x'))] on the baseline test "
                                            "set at this sigma"),
                "posterior_shift_se": ("nats", "its SE"),
                "oracle_acc_noisy": ("fraction", "noise only: the oracle's accuracy on x'"),
                "oracle_acc_noisy_se": ("fraction", "its SE")}),
    CsvColumns("calibration/<experiment>/data/runs.csv",
               "one borrowed model (arch, cell, seed) on one evaluation set (the models' clean test set, its noisy "
               "copies, world variants)",
               {**{k: _ID[k] for k in ("arch", "cell", "N", "seed", "evalset")}, "n": _METRICS["n"], **_SET,
                **{k: _METRICS[k] for k in _CALIBRATION_METRICS}, "source": _TRAINING["source"]}),
    CsvColumns("calibration/<experiment>/data/sets.csv", "one evaluation set, over every model",
               {"evalset": _ID["evalset"], **_SET, "n_models": ("models", "models averaged"),
                **{k: (_METRICS[k][0], "mean over models of runs.csv " + k) for k in _CALIBRATION_METRICS},
                **{f"{k}_se": (_METRICS[k][0], f"SE of {k} over models (std / sqrt(n_models))")
                   for k in _CALIBRATION_METRICS},
                "ece_diff": ("fraction", "mean over models of ece - ece_posterior (label ECE minus true ECE)"),
                "ece_diff_se": ("fraction", "its SE over models"), "ece_diff_z": ("1", "ece_diff / ece_diff_se"),
                "ece_rank_correlation": ("1", "Spearman rho of ece and ece_posterior over models (NaN with fewer "
                                              "than 3 models or constant values)")}),
    CsvColumns("difficulty/<experiment>/data/curve.csv",
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
    CsvColumns("difficulty/<experiment>/data/learner.csv",
               "the learner (one arch at one N) of one seed on its own world's test set",
               {"world": ("text", "world name it trained and is tested on"),
                "base_temperature": ("1", "its base temperature tau"), "arch": _ID["arch"], "N": _ID["N"],
                "seed": _ID["seed"], "n_test": ("samples", "test rows"), "num_classes": _METRICS["num_classes"],
                "test_error": ("fraction", "1 - accuracy against the world's labels"),
                "test_error_se": ("fraction", "its SE over the test rows"),
                "bayes_error": ("fraction", "E[1 - max_y p(y|x)] of the same rows"),
                "bayes_error_se": ("fraction", "its SE"),
                "gap": ("fraction", "test_error - bayes_error, paired per row (runs.csv bayes_gap)"),
                "gap_se": ("fraction", "its SE over the test rows"),
                "excess_error_truth": ("fraction", "E[max_y p(y|x) - p(yhat|x)]: excess error against the truth, "
                                                   "free of label noise"),
                "converged": _TRAINING["converged"], "stopped_by": _TRAINING["stopped_by"],
                "source": _TRAINING["source"]}),
    CsvColumns("estimators/<experiment>/data/estimates.csv",
               "one method's estimate for one borrowed model on one evaluation set",
               {**{k: _ID[k] for k in ("arch", "cell", "seed", "evalset")},
                "shift": ("text", "clean, noise or variant"),
                "parameter": ("text", "the set's shift as text (sigma, tau, prior)"),
                "method": ("text", "estimator: mano, mano_official, atc_mc, atc_ne, confscore, entropy or nuclear"),
                "estimate": ("fraction or score", "the method's output: a predicted accuracy (atc_mc, atc_ne, "
                                                  "confscore) or a unitless score (the others)"),
                "accuracy": ("fraction", "the model's true accuracy on the set against its labels"),
                "bayes_accuracy": ("fraction", "E[max_y p(y|x)] of the set (clean set and variants; NaN on noise)"),
                "bayes_accuracy_se": ("fraction", "its SE"), "n": ("samples", "rows of the set")}),
    CsvColumns("estimators/<experiment>/data/scores.csv",
               "one method for one model against one target, over the shifted sets",
               {**{k: _ID[k] for k in ("arch", "cell", "seed")}, "method": ("text", "as in estimates.csv"),
                "target": ("text", "accuracy (over every shifted set) or bayes_accuracy (over the world variants)"),
                "r2": ("1", "R^2 of a linear fit of the target on the estimate"),
                "spearman": ("1", "Spearman rho (signed) of estimate and target"),
                "mae": ("fraction", "mean |estimate - target| (NaN for a method that gives a score)"),
                "n": ("sets", "sets scored")}),
    CsvColumns("estimators/<experiment>/data/sets.csv", "one evaluation set (clean first), over the models",
               {"evalset": _ID["evalset"], "shift": ("text", "clean, noise or variant"),
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
    CsvColumns("active/<experiment>/data/rounds.csv", "one round of one active-learning run (arch, strategy, seed)",
               {"experiment": _ID["experiment"], "arch": _ID["arch"],
                "strategy": ("text", "acquisition strategy: random, max_entropy, max_epistemic or bald"),
                "seed": _ID["seed"], "round": ("integer", "round, 0 = the initial set"),
                "labelled": ("samples", "labels the round's model trained on"),
                "epochs": _TRAINING["epochs"], "steps": _TRAINING["steps"], "kept_steps": _TRAINING["kept_steps"],
                "converged": _TRAINING["converged"], "stopped_by": _TRAINING["stopped_by"],
                "train_seconds": ("s", "training wall time (sum of its epochs)"),
                "train_loss": ("nats", "last epoch's mean training loss per sample"),
                "test_size": ("samples", "oracle test rows"),
                "acc": _METRICS["acc"], "epistemic": _METRICS["epistemic"], "total": _METRICS["total"],
                "aleatoric": _METRICS["aleatoric"], "bayes_accuracy": _METRICS["bayes_accuracy"],
                "ece": _METRICS["ece"],
                "pool_remaining": ("samples", "unlabelled pool left before this round's acquisition"),
                "pool_epistemic": ("nats", "mean exact KL(p || q) over that pool"),
                "pool_aleatoric": ("nats", "mean exact H(p) over that pool"),
                "selected_epistemic": ("nats", "mean exact KL(p || q) of the rows acquired"),
                "selected_aleatoric": ("nats", "mean exact H(p) of the rows acquired"),
                "n_selected": ("samples", "rows acquired this round (0 in the last)"),
                "source": ("path", "the rounds.json read")}),
    CsvColumns("active/<experiment>/data/correlations.csv",
               "one acquisition score against one exact target at one round of one run",
               {"experiment": _ID["experiment"], "arch": _ID["arch"], "strategy": ("text", "as in rounds.csv"),
                "seed": _ID["seed"], "round": ("integer", "as in rounds.csv"),
                "labelled": ("samples", "as in rounds.csv"),
                "score": ("text", "the acquisition score"),
                "target": ("text", "exact_epistemic (KL(p || q)) or exact_aleatoric (H(p))"),
                "spearman": ("1", "Spearman rho of score and target over the unlabelled pool (NaN where undefined)"),
                "source": ("path", "the rounds.json read")}),
    CsvColumns("claims.csv", "one finding of the paper judged on this run's numbers",
               {"id": ("text", "the finding's name"), "finding": ("text", "the paper's sentence"),
                "paper": ("text", "the paper's value"), "this run": ("text", "this run's value"),
                "uncertainty": ("text", "the interval the rule compared"),
                "rule": ("text", "when the finding counts as supported or contradicted"),
                "verdict": ("text", "supported, contradicted, unresolved, not posed or not run"),
                "counted": ("text", "yes, or why the verdict is shown but left out of the counts (a check of the "
                                    "world, an arm another finding counts)"),
                "numbers": ("text", "numbers.json keys used, space-separated"),
                "checks": ("JSON", "each check's interval (value, lo, hi, se), reference and the paper's value, "
                                   "a JSON list"),
                "margin": ("SE", "how far the end of the interval nearest its reference lies from it, in that "
                                 "interval's own SEs (empty without an interval); under 1: a verdict close to "
                                 "flipping"),
                "paper verdict": ("text", "the same rule applied to the paper's printed numbers "
                                          "(oracle/report/paper_numbers.py), or 'not printed'")}),
    CsvColumns("timings.csv", "one rule of the workflow, over all its jobs",
               {"rule": ("text", "Snakemake rule (or total)"), "jobs": ("jobs", "jobs of the rule"),
                "job_s": ("s", "wall seconds of its jobs, summed"), "max_job_s": ("s", "longest job"),
                "max_rss_mb": ("MB", "largest resident set of one job (empty when not measured)")}),
)


#: What the table CSVs hold, said once for all of them (their columns are display headers).
TABLE_NOTE = (
    "A table CSV is the paper table as data: one row per row of the table, its columns the table's display "
    "headers, with the unit in the header where the value has one (`Accuracy (%)`, `Epistemic KL (nats)`, "
    "`Gap (%)`; where a header has no unit, the caption below says what the value is). The headers are display "
    "text and follow the table's layout: for analysis read the data CSVs above (the validation's: "
    "`validation/metrics.json`), which hold the numbers under stable names in data units (fractions, not "
    "percent). Floats are written at full precision (`repr`); a cell the table shows as `mean ± SE` or `a/b` is "
    "text. Load with `pd.read_csv(path)`; an empty cell is NaN (no value, e.g. the std of one seed).")


def describe(path: str, column: str) -> tuple[str, str] | None:
    """(unit, meaning) of `column` of the CSV whose dictionary path is `path` (a ``<name>_se``
    not listed: the SE of ``<name>``); None when the dictionary does not know it."""
    entry = next((c for c in CSV_COLUMNS if c.path == path), None)
    if entry is None:
        return None
    if column in entry.columns:
        return entry.columns[column]
    if column.endswith("_se") and column[:-3] in entry.columns:
        unit, _ = entry.columns[column[:-3]]
        return unit, f"Monte Carlo standard error of {column[:-3]}"
    return None


def data_entry(kind: str, data: str) -> CsvColumns | None:
    """The entry of data file `data` of experiment kind `kind`: its own
    (``<kind name>/<experiment>/data/<data>.csv``) or a shared ``<kind>/...`` one listing the kind."""
    own, shared = f"{kind}/<experiment>/data/{data}.csv", f"<kind>/<experiment>/data/{data}.csv"
    return next((c for c in CSV_COLUMNS if c.path == own or (c.path == shared and kind in c.kinds)), None)


def column_problems(path: str, columns: Sequence[str], unwritten_ok: Collection[str] = ()) -> list[str]:
    """What keeps the entry `path` from describing exactly `columns` (the columns a file gets
    from the code that writes it): the written columns it lacks, the listed ones not written
    (but those of `unwritten_ok`: columns the inputs at hand lack, checked elsewhere), and a
    listed column without unit or meaning. Empty when they agree."""
    entry = next((c for c in CSV_COLUMNS if c.path == path), None)
    if entry is None:
        return [f"{path}: not in the dictionary"]
    out = [f"{path}: column {col!r} is written but not described" for col in columns if describe(path, col) is None]
    out += [f"{path}: column {col!r} is described but not written" for col in entry.columns
            if col not in columns and col not in unwritten_ok]
    out += [f"{path}: column {col!r} has no unit or meaning" for col, (u, m) in entry.columns.items() if not (u and m)]
    return out


def data_problems(kind: str, written: Mapping[str, Sequence[str]],
                  unwritten_ok: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """`column_problems` of each data file of experiment kind `kind`, `written` {data name:
    the columns its collect wrote}, `unwritten_ok` {data name: columns its inputs lacked}; a
    data file without an entry is named with its columns."""
    out = []
    for data, columns in written.items():
        entry = data_entry(kind, data)
        out += (column_problems(entry.path, columns, (unwritten_ok or {}).get(data, ())) if entry is not None
                else [f"{kind}/<experiment>/data/{data}.csv: not in the dictionary (columns {list(columns)})"])
    return out


def _cell(text: str) -> str:
    return text.replace("|", chr(92) + "|")


def dictionary_markdown(tables: Sequence[tuple[str, str]] = ()) -> str:
    """The column dictionary as Markdown: per CSV a heading, what a row is, a column table;
    then the table CSVs `tables` ((path, caption) each, `oracle.experiments.table_csvs`)."""
    out = []
    for c in CSV_COLUMNS:
        kinds = f" Written by the kinds {', '.join(c.kinds)}." if c.kinds else ""
        out += [f"### `{c.path}`", "", f"One row: {c.row}.{kinds}", "", "| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{name}` | {unit} | {_cell(meaning)} |" for name, (unit, meaning) in c.columns.items()]
        out.append("")
    if tables:
        out += ["### Table CSVs (`<kind>/<experiment>/tables/<table>.csv`, `validation/tables/<table>.csv`)", "",
                TABLE_NOTE, "", "| table CSV | what it shows (the table's caption) |", "|---|---|"]
        out += [f"| `{path}` | {_cell(caption)} |" for path, caption in tables]
        out.append("")
    return "\n".join(out)
