"""The column dictionary of a run's data CSVs: per file, what one row is and, per column, its
unit and meaning. This module holds the entries several kinds share (`SHARED`: runs,
reliability, pairs), the run-level files (`RUN_LEVEL`: claims, timings) and the column
meanings the kinds reuse (`ID`, `METRICS`, `TRAINING`); each experiment kind's own files are
described in its package (its ``COLUMNS``), gathered through the registry by
`oracle.experiments.columns`. docs/outputs.md is generated from them (`dictionary_markdown`)
and tests hold them to the columns the code writes (`oracle.classifiers.evaluate.ID_COLUMNS`,
`metrics_row`, `oracle.report.timings.TIMING_COLUMNS`, each kind's collect), so the docs
cannot drift from the files.

A column ``<name>_se`` that is not listed is the Monte Carlo standard error of ``<name>``, in
its unit (`describe`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple


class CsvColumns(NamedTuple):
    """One CSV of a run: `path` (relative to results/<run>), what one `row` is, and its
    `columns` {name: (unit, meaning)} in the order the file has them. A path starting with
    ``<kind>/`` is an entry several experiment kinds share (`SHARED`)."""

    path: str
    row: str
    columns: dict[str, tuple[str, str]]


#: The identity columns of a classifier evaluation (`oracle.classifiers.evaluate.ID_COLUMNS`).
ID = {
    "experiment": ("text", "experiment name (config key experiments.<name>)"),
    "arch": ("text", "classifier architecture (config key classifiers.archs.<name>)"),
    "cell": ("text", "the experiment's configuration the classifier belongs to (its training world and labels)"),
    "seed": ("integer", "training seed (training-set permutation and initialisation)"),
    "evalset": ("text", "evaluation set: a world's test split, or a noisy copy of it (<world>/noise<sigma>)"),
    "N": ("samples", "training-set size"),
    "labels": ("text", "label kind trained on: hard (y ~ p(y|x)) or soft (p(y|x) itself)"),
    "hard_label": ("text", "which hard label: label (the world's y ~ p(y|x)), posterior_argmax or source"),
}

#: The metrics of an evaluation (`oracle.classifiers.evaluate.metrics_row`).
METRICS = {
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
METRIC_COLUMNS = tuple(METRICS) + tuple(f"{m}_se" for m in METRICS)

#: What a classifier's training records beside its metrics.
TRAINING = {
    "epochs": ("epochs", "the training budget"),
    "train_seconds": ("s", "wall time of the training job"),
    "converged": ("bool", "the stopping rule ended training (or the monitored loss fell by at most its tolerance over the last window) and the kept weights were annealed (kept_lr at most 0.1)"),
    "annealed": ("bool", "the learning rate at the kept weights was at most 0.1 of the peak"),
    "kept_lr": ("fraction", "learning rate at the kept weights as a fraction of the peak (0 after the final decay)"),
    "stopped_by": ("text", "patience (the stopping rule) or budget"),
    "steps": ("optimizer steps", "steps taken"),
    "kept_steps": ("optimizer steps", "steps of the checkpoint kept"),
    "kept_epoch": ("epochs", "epoch of the checkpoint kept"),
    "loss_change": ("fraction", "relative change of the monitored loss's best over the last window against its best before (negative: still falling; empty: too few evaluations)"),
    "source": ("path", "the metrics file the row was read from"),
}

#: Per cell, over its seeds (scaling and labels collect: `oracle.experiments._pairs.with_seed_mean_se`):
#: what the two-way SE of a cell's mean over seeds and shared test rows needs beside each seed's own SE.
SE_MEAN_COLUMNS = {
    f"{m}_se_mean": (unit, f"SE over the test rows of the per-row {m} averaged over the seeds of the row's (arch, "
                           "cell); the same on each of its rows")
    for m, unit in (("acc", "fraction"), ("epistemic", "nats"), ("bayes_gap", "fraction"))}

#: The data files several experiment kinds write: each kind that writes one names it in its
#: ``COLUMNS`` (`oracle.experiments.columns` gathers them).
RUNS = CsvColumns("<kind>/<experiment>/data/runs.csv",
                  "one evaluation of one classifier on one evaluation set",
                  {**ID, **METRICS, **TRAINING, **SE_MEAN_COLUMNS})

RELIABILITY = CsvColumns("<kind>/<experiment>/data/reliability.csv",
                         "one confidence bin of one evaluation of one classifier",
                         {**ID, "bin": ("integer", "bin index, 0 = lowest confidence"),
                          "count": ("samples", "test rows in the bin"),
                          "confidence": ("fraction", "mean max q(y|x) in the bin (empty when count is 0)"),
                          "accuracy": ("fraction", "accuracy against the labels in the bin"),
                          "true_probability": ("fraction", "mean p(argmax q|x) in the bin")})

PAIRS = CsvColumns("<kind>/<experiment>/data/pairs.csv",
                   "one difference of a per-test-row value between two classifiers of the same arch and seed on the same "
                   "test rows (scaling: one N minus the next; labels: soft minus hard at one N; shift: one configuration "
                   "minus a later one)",
                   {"arch": ID["arch"], "seed": ID["seed"],
                    "value": ("text", "the per-row value compared: acc (correct, 0/1), epistemic (KL(p || q), nats) or "
                                      "bayes_gap (max_y p(y|x) - correct)"),
                    "a": ("text", "cell of the first classifier"), "b": ("text", "cell of the second classifier"),
                    "diff": ("unit of value", "mean over the test rows of value(a) - value(b)"),
                    "diff_se": ("unit of value", "SE of diff over the test rows, paired per row"),
                    "n_rows": ("samples", "test rows paired"),
                    "diff_se_mean": ("unit of value", "SE over the test rows of the per-row difference averaged over "
                                                      "the seeds of the row's (arch, value, a, b); the same on each of "
                                                      "its rows (the two-way SE of the mean over seeds reads it)"),
                    "diff_se_mean_all": ("unit of value", "the same over every (arch, seed) of the row's (value, a, b)")})

#: {data name: entry} of the shared entries, in the order docs/outputs.md lists them.
SHARED = {"runs": RUNS, "reliability": RELIABILITY, "pairs": PAIRS}

#: The run-level data CSVs (not an experiment's).
CLAIMS = CsvColumns("claims.csv", "one finding of the paper judged on this run's numbers",
                    {"id": ("text", "the finding's name"), "finding": ("text", "the paper's sentence"),
                     "paper": ("text", "the paper's value"),
                     "this run": ("text", "this run's value (it begins 'judged on <experiment>' where the config's "
                                          "claims.judged_on names the experiment)"),
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
                                               "(oracle/report/paper_numbers.py), or 'not printed'"),
                     "to decide": ("text", "unresolved rows: per open check, the seeds (at the run's test rows) or test "
                                           "rows (at its seeds) whose interval would clear the threshold, from the "
                                           "two-way variance components (oracle.report.power)")})

TIMINGS = CsvColumns("timings.csv", "one rule of the workflow, over all its jobs",
                     {"rule": ("text", "Snakemake rule (or total)"), "jobs": ("jobs", "jobs of the rule"),
                      "job_s": ("s", "wall seconds of its jobs, summed"), "max_job_s": ("s", "longest job"),
                      "max_rss_mb": ("MB", "largest resident set of one job (empty when not measured)")})
RUN_LEVEL = (CLAIMS, TIMINGS)


#: What the table CSVs hold, said once for all of them (their columns are display headers).
TABLE_NOTE = (
    "A table CSV is the paper table as data: one row per row of the table, its columns the table's display "
    "headers, with the unit in the header where the value has one (`Accuracy (%)`, `Epistemic KL (nats)`, "
    "`Gap (%)`; where a header has no unit, the caption below says what the value is). The headers are display "
    "text and follow the table's layout: for analysis read the data CSVs above (the validation's: "
    "`validation/metrics.json`), which hold the numbers under stable names in data units (fractions, not "
    "percent). Floats are written at full precision (`repr`); a cell the table shows as `mean ± SE` or `a/b` is "
    "text. Load with `pd.read_csv(path)`; an empty cell is NaN (no value, e.g. the std of one seed).")


def describe(entry: CsvColumns, column: str) -> tuple[str, str] | None:
    """(unit, meaning) of `column` of the CSV `entry` (a ``<name>_se`` not listed: the SE of
    ``<name>``); None when the entry does not know it."""
    if column in entry.columns:
        return entry.columns[column]
    if column.endswith("_se") and column[:-3] in entry.columns:
        unit, _ = entry.columns[column[:-3]]
        return unit, f"Monte Carlo standard error of {column[:-3]}"
    return None


def column_problems(entry: CsvColumns, columns: Sequence[str], unwritten_ok: Collection[str] = ()) -> list[str]:
    """What keeps `entry` from describing exactly `columns` (the columns a file gets from the
    code that writes it): the written columns it lacks, the listed ones not written (but those
    of `unwritten_ok`: columns the inputs at hand lack, checked elsewhere), and a listed column
    without unit or meaning. Empty when they agree."""
    path = entry.path
    out = [f"{path}: column {col!r} is written but not described" for col in columns if describe(entry, col) is None]
    out += [f"{path}: column {col!r} is described but not written" for col in entry.columns
            if col not in columns and col not in unwritten_ok]
    out += [f"{path}: column {col!r} has no unit or meaning" for col, (u, m) in entry.columns.items() if not (u and m)]
    return out


def _cell(text: str) -> str:
    return text.replace("|", chr(92) + "|")


def dictionary_markdown(entries: Sequence[tuple[CsvColumns, Sequence[str]]],
                        tables: Sequence[tuple[str, str]] = ()) -> str:
    """The column dictionary as Markdown: per CSV of `entries` ((entry, the kinds sharing it;
    none for a kind's own or a run-level file) each, `oracle.experiments.columns.csv_columns`)
    a heading, what a row is, a column table; then the table CSVs `tables` ((path, caption)
    each, `oracle.experiments.table_csvs`)."""
    out = []
    for c, shared_by in entries:
        kinds = f" Written by the kinds {', '.join(shared_by)}." if shared_by else ""
        out += [f"### `{c.path}`", "", f"One row: {c.row}.{kinds}", "", "| column | unit | meaning |", "|---|---|---|"]
        out += [f"| `{name}` | {unit} | {_cell(meaning)} |" for name, (unit, meaning) in c.columns.items()]
        out.append("")
    if tables:
        out += ["### Table CSVs (`<kind>/<experiment>/tables/<table>.csv`, `validation/tables/<table>.csv`)", "",
                TABLE_NOTE, "", "| table CSV | what it shows (the table's caption) |", "|---|---|"]
        out += [f"| `{path}` | {_cell(caption)} |" for path, caption in tables]
        out.append("")
    return "\n".join(out)
