"""Experiment kind ``labels`` (paper section 4.2, appendix D, Figure 7): hard against soft labels.

One architecture trained on the same images of one world with two kinds of target: *hard*,
one class per image (by default the argmax of the world's posterior, the paper's "one-hot
argmax"), and *soft*, the exact posterior vector p_T(y|x) itself. Both arms of a seed train
on the same rows (the seed's nested subset), so the soft-minus-hard gain is paired by seed; both
are scored on the same test rows, so it is paired per test row too.
Every classifier is scored on the world's test set against its labels and against the truth
(`oracle.experiments._calibration.report`).

Cells are ``hard-N<n>`` and ``soft-N<n>``. Data: ``runs`` (one row per classifier),
``curves`` (per-epoch test accuracy and epistemic KL on classifiers.curve_size test rows,
from the training histories), ``reliability`` (per-bin calibration data) and ``pairs``
(`oracle.experiments._pairs`: per N and seed, soft minus hard correctness paired per test row). Accuracies are
fractions in data and numbers, percentages in tables and figures; gains are percentage points.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import _calibration, _training, entry_schema, reporting_half, with_defaults
from oracle.report.columns import ID, PAIRS, RELIABILITY, RUNS, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name

KIND = "labels"
DATA = ("runs", "curves", "reliability", "pairs")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "runs": RUNS,
    "curves": CsvColumns(
        "labels/<experiment>/data/curves.csv",
        "one training epoch of one classifier",
        {"arch": ID["arch"], "cell": ID["cell"], "seed": ID["seed"], "N": ID["N"],
         "labels": ID["labels"], "epoch": ("epochs", "epoch number, 1 = first"),
         "train_loss": ("nats", "mean training loss of the epoch per sample: cross-entropy against the labels "
                                "trained on (hard y, or soft p(y|x))"),
         "curve_acc": ("fraction", "accuracy against the labels on the curve_size rows of the oracle test set "
                                   "after the epoch"),
         "curve_epistemic": ("nats", "E[KL(p || q)] on the same rows after the epoch")}),
    "reliability": RELIABILITY,
    "pairs": PAIRS,
}
MODES = ("hard", "soft")
COLORS = {"soft": "#1f77b4", "hard": "#d62728"}  # the paper's blue and red
ARTIFACTS = artifacts_by_name(
    Artifact("label_comparison", "table",
             "Hard against soft labels per training-set size N, mean and std over seeds: test accuracy "
             "against the world's labels (%), epistemic error E[KL(p || q)] (nats), ECE against the labels "
             "and the true ECE against the exact posterior (10 equal-width bins, fractions), the "
             "overconfidence against the truth (mean confidence - mean p(argmax q|x), mean over seeds) and "
             "how many of the cell's classifiers converged by the stopping rule."),
    Artifact("soft_vs_hard", "figure",
             "Exact soft labels against hard labels. Top: test accuracy (%) during training at three "
             "sizes N, mean ± std over seeds, on curve_size rows of the oracle test set. Bottom left: "
             "final test accuracy (%) against N with the Bayes-optimal accuracy. Bottom right: accuracy "
             "gain of soft over hard labels (percentage points), mean ± std over seeds of the per-seed "
             "(same training images) difference."),
    Artifact("reliability", "figure",
             _calibration.RELIABILITY_CAPTION + " Hard and soft labels at the smallest and largest N."),
    Artifact("calibration_agreement", "figure", _calibration.AGREEMENT_CAPTION),
)

_CELL = re.compile(r"(hard|soft)-N(\d+)")


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with defaults filled in: ``arch`` (one architecture) becomes ``archs``;
    ``hard_label`` defaults to ``posterior_argmax`` (its schema); ``curve_sizes`` (the three sizes of the
    figure's top row) default to the smallest, a middle and the largest N and must be sizes
    of the experiment."""
    key = f"experiments.{name}"
    entry = with_defaults(entry, SCHEMA)
    entry["archs"] = [entry.pop("arch")]
    entry["labels"] = "hard"  # the hard arm's checks (hard_label: source at T != 1)
    spec = _training.check_classifier_entry(name, entry, config)
    spec["labels"] = "both"
    sizes = spec["sizes"]
    if len(sizes) < 2:
        raise ConfigError(f"config key '{key}.sizes': give at least two sizes (got {sizes}); the figure plots "
                          "accuracy and gain against N")
    curve_sizes = spec.get("curve_sizes") or [sizes[0], sizes[len(sizes) // 2], sizes[-1]]
    for n in curve_sizes:
        if n not in sizes:
            raise ConfigError(f"config key '{key}.curve_sizes': N={n} is not one of the experiment's sizes {sizes}")
    spec["curve_sizes"] = sorted(set(curve_sizes))
    return spec


def cell_name(mode: str, n: int) -> str:
    """``hard-N<n>`` or ``soft-N<n>``."""
    return f"{mode}-N{int(n)}"


def parse_cell(cell: str) -> tuple[str, int]:
    """Inverse of `cell_name`; ConfigError for another name."""
    m = _CELL.fullmatch(cell)
    if not m:
        raise ConfigError(f"labels: cell {cell!r} is not hard-N<size> or soft-N<size>")
    return m.group(1), int(m.group(2))


def classifier_runs(spec: Mapping) -> list[dict]:
    """One classifier per (N, labels, seed) of the experiment's one architecture."""
    return [{"arch": spec["archs"][0], "cell": cell_name(mode, n), "seed": int(s)}
            for n in spec["sizes"] for mode in MODES for s in spec["seeds"]]


def training_spec(spec: Mapping, cell: str) -> dict:
    """Cell ``<mode>-N<n>``: the seed's first n rows of the world's training pool, with hard
    (``hard_label``) or soft (the exact posterior) targets."""
    mode, n = parse_cell(cell)
    return _training.training_spec({**spec, "labels": mode}, n)


def curve_cells(spec: Mapping) -> list[str]:
    """The cells of Figure 7's training curves: both labels at each of ``curve_sizes``."""
    return [cell_name(mode, n) for n in spec["curve_sizes"] for mode in MODES]


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every classifier is scored on the test set of the world it trained on."""
    return [spec["world"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """Its classifiers' metrics files, predictions and training histories, and its world's
    samples and the shards behind them (the posterior at the test rows)."""
    return {"metrics": paths.experiment_metrics(name), "histories": paths.experiment_histories(name),
            "predictions": paths.experiment_predictions(name), "samples": [paths.world_samples(spec["world"])],
            "shards": paths.world_shards(spec["world"])}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
