"""Experiment kind ``scaling`` (paper section 4.1, Tables 1-2, Figures 2, 5, 6).

Classifiers per (arch, N, seed) on one world, each evaluated on the world's fixed test set;
their cross-entropy decomposed exactly into the aleatoric floor E[H(p)] and the epistemic
gap E[KL(p || q)] (nats). Power laws KL ~ c N^-alpha are fitted per (arch, seed) and alpha is
reported as mean ± std over seeds, as the paper does; the ECE gets its own power law beside
it (the paper: the rates differ), and calibration is measured against the labels and against
the truth (`oracle.experiments._calibration.report`).

Data: ``runs`` (one row per classifier: `oracle.classifiers.evaluate.read_metrics_frame`),
``fits`` (`power_law_fits` of the epistemic KL, the ECE against labels and the true ECE),
``reliability`` (per-bin calibration data), ``pairs`` (`oracle.experiments._pairs`: per
(arch, seed) the epistemic KL at each N minus at the next, paired per test row) and ``contrasts``
(two archs' KL ratio at each N, paired per seed and test row). Accuracies are fractions in data
and numbers, percentages in tables and figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import _calibration, _training, entry_schema, reporting_half, with_defaults
from oracle.report.columns import ID, PAIRS, RELIABILITY, RUNS, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name

KIND = "scaling"
DATA = ("runs", "fits", "reliability", "pairs", "contrasts")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "runs": RUNS,
    "fits": CsvColumns(
        "scaling/<experiment>/data/fits.csv",
        "one power-law fit value ~ coef N^-alpha: per (arch, seed) (kind seed), mean ± std over seeds "
        "(kind arch) or of the seed-mean curve (kind curve)",
        {"kind": ("text", "seed, arch or curve (see row)"),
         "value": ("text", "the runs.csv column fitted (epistemic, ece, ece_posterior, ...)"),
         "arch": ID["arch"], "seed": ("integer", "training seed (kind seed only)"),
         "alpha": ("1", "power-law exponent"), "alpha_se": ("1", "SE of alpha from the fit"),
         "coef": ("unit of value", "prefactor at N = 1"), "coef_se": ("unit of value", "SE of coef"),
         "r2": ("1", "R^2 of the log-log line"), "n_points": ("sizes", "training sizes N fitted"),
         "curvature": ("1", "coefficient of (ln N)^2 of a quadratic log-log fit, 0 on a power law"),
         "alpha_std": ("1", "std of alpha over seeds (kind arch)"),
         "curvature_std": ("1", "std of curvature over seeds (kind arch)"),
         "n_seeds": ("seeds", "seeds averaged (kind arch)"),
         "weighted": ("bool", "least squares weighted by the values' SE"),
         "note": ("text", "why the fit is empty (fewer than two N, a value <= 0)")}),
    "reliability": RELIABILITY,
    "pairs": PAIRS,
    "contrasts": CsvColumns(
        "scaling/<experiment>/data/contrasts.csv",
        "two architectures trained at the same N: the log ratio of their mean per-row value over their "
        "common seeds and the shared test rows, paired per seed and row",
        {"value": ("text", "the per-row value (epistemic: KL(p || q), nats)"), "N": ID["N"],
         "a": ID["arch"], "b": ("text", "the second architecture"), "cell": ID["cell"],
         "log_ratio": ("1", "ln(mean of a / mean of b)"),
         "se": ("1", "its two-way (seed x test row) SE: of the per-row values a / A - b / B (delta method)"),
         "df": ("1", "Satterthwaite degrees of freedom of that SE"),
         "n_seeds": ("seeds", "common seeds of a and b"), "n_rows": ("samples", "shared test rows"),
         "var_seeds": ("1", "variance component per seed (two-way ANOVA)"),
         "var_rows": ("1", "variance component per test row"),
         "var_interaction": ("1", "seed x row interaction variance")}),
}
#: The values with power-law fits in ``fits``: epistemic KL (nats), ECE against the labels and
#: the true ECE against the exact posterior (fractions).
FIT_VALUES = ("epistemic", "ece", "ece_posterior")
ARTIFACTS = artifacts_by_name(
    Artifact("accuracy_vs_bayes", "table",
             "Classifiers against the Bayes-optimal bound on oracle data: test accuracy against the "
             "world's labels (mean and std over seeds) at the largest N, error, and gap to the "
             "Bayes-optimal accuracy E[max_y p(y|x)] of the oracle test set (percent)."),
    Artifact("epistemic_vs_n", "table",
             "Epistemic error E[KL(p || q)] (nats) against training-set size N per architecture, "
             "mean over seeds."),
    Artifact("learners", "table",
             "How each cell's classifiers trained (README \"How the learners are trained\"): how many "
             "converged by the stopping rule and how many it stopped before their budget, the optimizer "
             "steps of the weights kept, and, means over seeds, the epistemic KL (nats), the "
             "overconfidence against the truth (mean confidence - mean p(argmax q|x); negative: "
             "under-confident) and the true ECE against the exact posterior (10 equal-width bins)."),
    Artifact("scaling_panels", "figure",
             "Loss decomposition against N (samples): (a) total "
             "cross-entropy (nats) with the aleatoric floor E[H(p)] of the test rows (dotted; the worlds "
             "table gives the floor over all the world's samples), (b) epistemic KL (nats) with power-law "
             "fits to the seed means (dashed; unweighted least squares in log-log space, which is less "
             "noisy than weighting by seed standard errors from a few seeds) and, in its legend, the "
             "exponent alpha per architecture, mean ± std over per-seed fits, (c) test accuracy (%) "
             "against the Bayes-optimal accuracy, (d) the total loss stacked: the aleatoric floor (grey) "
             "and each architecture's floor + epistemic KL (nats, linear y)."),
    Artifact("epistemic_curves", "figure",
             "Epistemic KL (nats) against N (samples), one panel per architecture: every seed "
             "(faint), mean ± std over seeds, the power-law fit to the seed mean (dashed, unweighted "
             "least squares in log-log space) and alpha, mean ± std of the per-seed fits, in the panel's "
             "upper right corner."),
    Artifact("calibration_vs_n", "figure",
             "Calibration against N (samples): (a) ECE against the world's labels (solid) and the true ECE "
             "against the exact posterior (dashed), 10 equal-width bins, mean ± std over seeds, log-log; "
             "(b) the power-law exponent of the ECE beside that of the epistemic KL per architecture, "
             "mean ± std over per-seed fits (ECE ~ N^-alpha_ECE, KL ~ N^-alpha_KL)."),
    Artifact("reliability", "figure",
             _calibration.RELIABILITY_CAPTION + " One row per architecture: the smallest and largest N."),
    Artifact("calibration_agreement", "figure", _calibration.AGREEMENT_CAPTION),
)


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with its schema's defaults filled in (see `_training.check_classifier_entry`); the table
    options must name sizes and architectures of the experiment."""
    spec = _training.check_classifier_entry(name, with_defaults(entry, SCHEMA), config)
    key = f"experiments.{name}"
    for opt in ("table_size", "table_archs", "table_sizes"):
        spec.setdefault(opt, None)
    if spec["table_size"] is not None and spec["table_size"] not in spec["sizes"]:
        raise ConfigError(f"config key '{key}.table_size': N={spec['table_size']} is not one of the "
                          f"experiment's sizes {spec['sizes']}")
    for a in spec["table_archs"] or []:
        if a not in spec["archs"]:
            raise ConfigError(f"config key '{key}.table_archs': {a!r} is not an architecture of the "
                              f"experiment ({', '.join(spec['archs'])})")
    for n in spec["table_sizes"] or []:
        if n not in spec["sizes"]:
            raise ConfigError(f"config key '{key}.table_sizes': N={n} is not one of the experiment's "
                              f"sizes {spec['sizes']}")
    return spec


def classifier_runs(spec: Mapping) -> list[dict]:
    """One classifier per (arch, N, seed)."""
    return _training.size_runs(spec)


def training_spec(spec: Mapping, cell: str) -> dict:
    """Cell ``N<n>``: the seed's first n rows of the world's training pool."""
    return _training.training_spec(spec, _training.cell_size(cell))


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every classifier is scored on the test set of the world it trained on."""
    return [spec["world"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """Its classifiers' metrics and predictions files on every evaluation set, and its world's
    samples and the shards behind them (the posterior at the test rows, which pairs the KLs per row)."""
    return {"metrics": paths.experiment_metrics(name), "predictions": paths.experiment_predictions(name),
            "samples": [paths.world_samples(spec["world"])],
            "shards": paths.world_shards(spec["world"])}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
