"""The column dictionary of a run's data CSVs: per file, what one row is and, per column, its
unit and meaning. docs/outputs.md is generated from it (`dictionary_markdown`) and a test holds
it to the columns the code writes (`oracle.classifiers.evaluate.ID_COLUMNS`, `metrics_row`,
`oracle.report.timings.TIMING_COLUMNS`, ...), so the docs cannot drift from the files.

A column ``<name>_se`` that is not listed is the Monte Carlo standard error of ``<name>``, in
its unit (`describe`)."""

from __future__ import annotations

from typing import NamedTuple


class CsvColumns(NamedTuple):
    """One CSV of a run: `path` (relative to results/<run>), what one `row` is, and its
    `columns` {name: (unit, meaning)} in the order the file has them."""

    path: str
    row: str
    columns: dict[str, tuple[str, str]]


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

#: The CSVs every run with a scaling experiment writes (a smoke run's), in the order docs/outputs.md lists them.
CSV_COLUMNS: tuple[CsvColumns, ...] = (
    CsvColumns("<kind>/<experiment>/data/runs.csv",
               "one evaluation of one classifier on one evaluation set (scaling, labels and shift kinds; shift adds "
               "shift_type)", {**_ID, **_METRICS, **_TRAINING}),
    CsvColumns("<kind>/<experiment>/data/reliability.csv",
               "one confidence bin of one evaluation of one classifier",
               {**_ID, "bin": ("integer", "bin index, 0 = lowest confidence"),
                "count": ("samples", "test rows in the bin"),
                "confidence": ("fraction", "mean max q(y|x) in the bin (empty when count is 0)"),
                "accuracy": ("fraction", "accuracy against the labels in the bin"),
                "true_probability": ("fraction", "mean p(argmax q|x) in the bin")}),
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
    CsvColumns("claims.csv", "one finding of the paper judged on this run's numbers",
               {"id": ("text", "the finding's name"), "finding": ("text", "the paper's sentence"),
                "paper": ("text", "the paper's value"), "this run": ("text", "this run's value"),
                "uncertainty": ("text", "the interval the rule compared"),
                "rule": ("text", "when the finding counts as supported or contradicted"),
                "verdict": ("text", "supported, contradicted, unresolved, not posed or not run"),
                "counted": ("text", "yes, or why the verdict is shown but left out of the counts (a check of the "
                                    "world, an arm another finding counts)"),
                "numbers": ("text", "numbers.json keys used, space-separated"),
                "checks": ("JSON", "each check's interval and outcome, a JSON list")}),
    CsvColumns("timings.csv", "one rule of the workflow, over all its jobs",
               {"rule": ("text", "Snakemake rule (or total)"), "jobs": ("jobs", "jobs of the rule"),
                "job_s": ("s", "wall seconds of its jobs, summed"), "max_job_s": ("s", "longest job"),
                "max_rss_mb": ("MB", "largest resident set of one job (empty when not measured)")}),
)


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


def dictionary_markdown() -> str:
    """The column dictionary as Markdown: per CSV a heading, what a row is, a column table."""
    out = []
    for c in CSV_COLUMNS:
        out += [f"### `{c.path}`", "", f"One row: {c.row}.", "", "| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{name}` | {unit} | {meaning.replace('|', chr(92) + '|')} |" for name, (unit, meaning) in c.columns.items()]
        out.append("")
    return "\n".join(out)
