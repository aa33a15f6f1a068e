"""Experiment kind ``shift`` (paper section 4.3, appendix F, Tables 6-9, Figure 3): training-time
distribution shift, every model scored on the one baseline test set.

A *configuration* (the cell of its classifiers) sets how the training set of N rows differs
from the baseline world (`oracle.classifiers.shifted`):

* ``prior``: label-prior shift: class counts ~ Multinomial(N, pi), rows per class from the
  seed's permutation of the pool, with replacement when short (null: no resampling, the
  seed's first N rows of the pool);
* ``noise_std``: covariate shift x' = clip(x + eps, -1, 1), eps ~ N(0, sigma^2), after
  selection, before the classifier's normalization;
* ``world``: train on a world variant (base temperature tau, prior) instead of the baseline
  world: a shift whose KL is exact (`oracle.measures.divergences`).

Every model trains with a validation split (``val_fraction``, the paper's 80/20) and is
scored on the baseline world's test set. Divergences, in nats, of training from test data:

* ``kl_y_target`` = KL(pi || P0) and ``kl_y_empirical`` from the realised class counts
  (the paper's Eq. 8; mean ± std over seeds), P0 the baseline world's class prior (uniform in
  the paper and here, unless the baseline world sets one: a world of 3 of the flow's classes);
* ``kl_exact`` = KL(p_train(x, y) || p_test(x, y)) where it is exact: label-prior resampling
  without noise (KL(pi || pi_world), p(x|y) unchanged) and world variants (KL(pi_v || pi_b) +
  D/2 (r^2 - 1 - ln r^2)), beside its Monte Carlo check from the flow's own log densities.
  Only at label temperature 1, where the label is the class a sample was drawn from; NaN
  otherwise and for noise, which has no tractable density;
* for noise: the oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] and the oracle's
  accuracy on x', on the baseline test set (`oracle.noisy_test_sets`), named as what they are.

What the training prior alone explains (`oracle.measures.prior_shift`), on the baseline's test
rows: the exact Bayes cost of the training prior pi_train (the world's Bayes rule under pi_train
against its own, in expectation over the labels), the smallest class's rows in the realised
counts, and each classifier's logit-adjusted accuracy (argmax of log q - log pi_train +
log pi_world, pi_train the configuration's prior, else its world's) beside the raw one.

Data: ``runs`` (one row per classifier) and ``configurations`` (one row per configuration,
aggregated over seeds). Accuracies are fractions in data, percent in tables and figures; drops
are in percentage points (pp).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import _training, entry_schema, reporting_half, with_defaults
from oracle.report.columns import ID, METRICS, PAIRS, TRAINING, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.world_specs import known_num_classes, world_specs

KIND = "shift"
DATA = ("runs", "configurations", "pairs")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "runs": CsvColumns(
        "shift/<experiment>/data/runs.csv",
        "one evaluation of one classifier on the baseline test set (runs.csv's columns with the metrics the "
        "metrics file holds, shift_type and the training set's shift)",
        {**{k: v for k, v in ID.items() if k in ("experiment", "arch", "cell")},
         "shift_type": ("text", "baseline, prior, noise, prior+noise, variant or variant+noise: how the "
                                "configuration's training set differs from the baseline's"),
         **{k: v for k, v in ID.items() if k not in ("experiment", "arch", "cell")}, **METRICS, **TRAINING,
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
    "configurations": CsvColumns(
        "shift/<experiment>/data/configurations.csv",
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
    "pairs": PAIRS,
}
ARTIFACTS = artifacts_by_name(
    Artifact("shift_configurations", "table",
             "Controlled shift configurations: class prior pi, noise sigma, training world; KL_y target "
             "(from pi) and empirical (from the realised class counts, mean ± std over seeds) against the "
             "baseline world's class prior (nats; the paper's uniform P0); the exact KL(p_train || p_test) (nats) where the shift has a tractable "
             "density, with its Monte Carlo check (± SE) for world variants; the smallest class's rows in the "
             "realised counts (range over seeds, of the N rows before the validation split) and the exact Bayes cost "
             "of the training prior on the baseline test rows (pp: the world's Bayes rule under that prior against "
             "its own, in expectation over the labels)."),
    Artifact("shift_accuracy", "table",
             "Training-time shift, every model scored on the same baseline test set: test accuracy (%), "
             "change from the baseline configuration (percentage points); the logit-adjusted accuracy (argmax of "
             "log q - log pi_train + log pi_world: the training prior taken back out) (%) and its change (pp); the "
             "exact Bayes cost of the training prior (pp, as in Table 7); test error (%) and validation accuracy on "
             "the held-out part of the shifted training set (%), mean ± std over seeds."),
    Artifact("shift_axes", "table",
             "The two shift axes side by side. Left: prior shift only (no noise): KL_y, test accuracy (%), "
             "change (pp). Right: noise only (baseline prior): sigma, test accuracy (%), change (pp), and the "
             "oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] (nats) and its accuracy on x' (%) on the "
             "baseline test set. The noise is added at training time only: the learner is scored on clean rows, "
             "so the oracle's accuracy on x' measures what the noise hides, not what the learner is tested on."),
    Artifact("shift_panels", "figure",
             "Accuracy under training-time shift, by shift type and size: (a) test accuracy (%) and (b) accuracy drop (pp) "
             "against KL (nats): KL_y for the paper's configurations, the exact KL for world variants; "
             "(c) prior shift only against KL_y; (d) noise only against sigma, with the oracle's accuracy "
             "on x'; (e) mean drop per shift type; (f) linear fits of the drop against KL_y (the paper's) "
             "and against the exact KL, with R^2."),
)

#: Shift types, in display order.
TYPES = ("baseline", "prior", "noise", "prior+noise", "variant", "variant+noise")


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with defaults filled in. Configurations: ``prior`` (K floats summing to 1, or
    null), ``noise_std`` (>= 0, default 0), ``world`` (default the experiment's), ``label``
    (default the name); ``baseline`` names one of them; ``size`` fits every training pool."""
    key = f"experiments.{name}"
    entry = with_defaults(entry, SCHEMA)
    entry.setdefault("labels", "hard")
    entry.setdefault("val_fraction", 0.0)
    spec = _training.check_classifier_entry(name, entry, config)
    spec["sizes"] = [int(entry["size"])]  # after the shared check: its error would name 'sizes', not 'size'
    worlds = world_specs(config)
    k = known_num_classes(config)
    confs = {}
    for cell, raw in (entry.get("configurations") or {}).items():
        c = dict(raw or {})
        c.setdefault("prior", None)
        c.setdefault("noise_std", 0.0)
        c.setdefault("world", spec["world"])
        c.setdefault("label", cell)
        ckey = f"{key}.configurations.{cell}"
        if c["world"] not in worlds:
            raise ConfigError(f"config key '{ckey}.world': no world named {c['world']!r} (worlds: {', '.join(worlds)})")
        w = worlds[c["world"]]
        pool = w["n_total"] - w["test_size"]
        if spec["size"] > pool:
            raise ConfigError(f"config key '{key}.size': N={spec['size']} exceeds the training pool of world "
                              f"{c['world']!r} ({pool} = n_total {w['n_total']} - test_size {w['test_size']})")
        if c["prior"] is not None:
            if abs(math.fsum(c["prior"]) - 1.0) > 1e-6:
                raise ConfigError(f"config key '{ckey}.prior': must sum to 1, sums to {math.fsum(c['prior'])!r}")
            if k is not None and len(c["prior"]) != k:
                raise ConfigError(f"config key '{ckey}.prior': has {len(c['prior'])} entries but the world has {k} classes")
            absent = [i for i, (p, q) in enumerate(zip(c["prior"], w["prior"] or [])) if p > 0 and q == 0]
            if absent:
                raise ConfigError(f"config key '{ckey}.prior': puts mass on class(es) {absent}, which world "
                                  f"{c['world']!r} never draws (its prior is 0 there)")
        c["noise_std"] = float(c["noise_std"])
        confs[cell] = c
    if not confs:
        raise ConfigError(f"config key '{key}.configurations': expected at least one configuration")
    spec["configurations"] = confs
    if spec.get("baseline") not in confs:
        raise ConfigError(f"config key '{key}.baseline': {spec.get('baseline')!r} is not a configuration "
                          f"({', '.join(confs)})")
    spec["label_temperatures"] = {c["world"]: float(worlds[c["world"]]["label_temperature"]) for c in confs.values()}
    spec["world_priors"] = {c["world"]: worlds[c["world"]]["prior"] for c in confs.values()}
    return spec


def classifier_runs(spec: Mapping) -> list[dict]:
    """One classifier per (arch, configuration, seed)."""
    return [{"arch": a, "cell": cell, "seed": int(s)} for a in spec["archs"] for cell in spec["configurations"]
            for s in spec["seeds"]]


def training_spec(spec: Mapping, cell: str) -> dict:
    """The training spec of a configuration: N rows of its world, its prior and noise, the
    validation split."""
    if cell not in spec["configurations"]:
        raise ConfigError(f"shift experiment: no configuration {cell!r} ({', '.join(spec['configurations'])})")
    c = spec["configurations"][cell]
    out = _training.training_spec(spec, spec["size"])
    out.update(world=c["world"], class_prior=c["prior"], noise_std=c["noise_std"], val_fraction=spec["val_fraction"])
    return out


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every model is scored on the baseline world's test set."""
    return [spec["world"]]


def variant_worlds(spec: Mapping) -> list[str]:
    """The training worlds other than the baseline (their exact KL from it is checked by Monte Carlo)."""
    return sorted({c["world"] for c in spec["configurations"].values()} - {spec["world"]})


def noise_levels(spec: Mapping) -> list[float]:
    """The noise stds of the configurations (the oracle's posterior shift is reported for each)."""
    return sorted({c["noise_std"] for c in spec["configurations"].values() if c["noise_std"] > 0})


def shift_type(spec: Mapping, cell: str) -> str:
    """One of `TYPES`."""
    c, base = spec["configurations"][cell], spec["configurations"][spec["baseline"]]
    if cell == spec["baseline"]:
        return "baseline"
    noisy = "+noise" if c["noise_std"] > 0 else ""
    if c["world"] != spec["world"]:
        return f"variant{noisy}"
    if c["prior"] == base["prior"] and noisy:
        return "noise"
    return f"prior{noisy}"


def pool_worlds(spec: Mapping) -> list[str]:
    """The worlds of the configurations that train on the pool's first N rows (``prior`` null):
    their training sets record no class counts, so collect reads their labels."""
    return sorted({c["world"] for c in spec["configurations"].values() if c["prior"] is None})


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """Metrics, predictions and histories of its classifiers, the baseline world's samples and shards (the
    posterior at the test rows, which pairs two configurations per row), the exact-KL checks of
    its variant training worlds, the oracle's posterior shift at its noise levels; the splits,
    samples and shards of the `pool_worlds` (one each, in that order)."""
    pool = pool_worlds(spec)
    return {"metrics": paths.experiment_metrics(name), "histories": paths.experiment_histories(name),
            "predictions": paths.experiment_predictions(name), "samples": [paths.world_samples(spec["world"])],
            "shards": paths.world_shards(spec["world"]),
            "divergences": paths.divergences(variant_worlds(spec), spec["world"]),
            "noise": paths.noisy_constants(spec["world"], noise_levels(spec)),
            "pool_splits": [paths.world_splits(w) for w in pool], "pool_samples": [paths.world_samples(w) for w in pool],
            "pool_shards": [s for w in pool for s in paths.world_shards(w)]}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
