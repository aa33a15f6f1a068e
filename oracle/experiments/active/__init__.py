"""Experiment kind ``active`` (paper section 4.4, Figures 8 and 9): pool-based active learning
with the exact epistemic uncertainty of every pool sample known.

One run per (arch, strategy, seed) (`oracle.classifiers.active_learning`): a seeded initial labelled set,
R rounds of ``batch`` labels from a pool disjoint from the world's test set, the model
retrained from scratch every round. Strategies: ``random``, ``max_entropy`` (H(q)),
``max_epistemic`` (the exact KL(p || q), the oracle's upper bound) and ``bald`` (MC dropout,
the realistic proxy). Beyond the paper, every round measures over the pool the Spearman rank
correlation of each strategy's score with the exact epistemic KL(p || q) and the exact
aleatoric entropy H(p): how far each proxy confounds the two.

Data: ``rounds`` (one row per run and round) and ``correlations`` (one row per run, round,
score and exact part). Accuracies are fractions in data and numbers, percentages in tables
and figures; KL and entropies in nats; labels count the initial set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.experiments import _training, entry_schema, reporting_half, with_defaults
from oracle.report.columns import ID, METRICS, TRAINING, CsvColumns
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.world_specs import world_spec

KIND = "active"
DATA = ("rounds", "correlations")
#: Its data files' columns (`DATA`), unit and meaning each: docs/outputs.md's column dictionary
#: (`oracle.experiments.columns`); its tests hold them to what its collect writes.
COLUMNS = {
    "rounds": CsvColumns(
        "active/<experiment>/data/rounds.csv",
        "one round of one active-learning run (arch, strategy, seed)",
        {"experiment": ID["experiment"], "arch": ID["arch"],
         "strategy": ("text", "acquisition strategy: random, max_entropy, max_epistemic or bald"),
         "seed": ID["seed"], "round": ("integer", "round, 0 = the initial set"),
         "labelled": ("samples", "labels the round's model trained on"),
         "epochs": TRAINING["epochs"], "steps": TRAINING["steps"], "kept_steps": TRAINING["kept_steps"],
         "converged": TRAINING["converged"], "stopped_by": TRAINING["stopped_by"], "kept_lr": TRAINING["kept_lr"],
         "train_seconds": ("s", "training wall time (sum of its epochs)"),
         "train_loss": ("nats", "last epoch's mean training loss per sample"),
         "test_size": ("samples", "oracle test rows"),
         "acc": METRICS["acc"], "epistemic": METRICS["epistemic"], "total": METRICS["total"],
         "aleatoric": METRICS["aleatoric"], "bayes_accuracy": METRICS["bayes_accuracy"],
         "ece": METRICS["ece"],
         "pool_remaining": ("samples", "unlabelled pool left before this round's acquisition"),
         "pool_epistemic": ("nats", "mean exact KL(p || q) over that pool"),
         "pool_aleatoric": ("nats", "mean exact H(p) over that pool"),
         "selected_epistemic": ("nats", "mean exact KL(p || q) of the rows acquired"),
         "selected_aleatoric": ("nats", "mean exact H(p) of the rows acquired"),
         "n_selected": ("samples", "rows acquired this round (0 in the last)"),
         "source": ("path", "the rounds.json read")}),
    "correlations": CsvColumns(
        "active/<experiment>/data/correlations.csv",
        "one acquisition score against one exact target at one round of one run",
        {"experiment": ID["experiment"], "arch": ID["arch"], "strategy": ("text", "as in rounds.csv"),
         "seed": ID["seed"], "round": ("integer", "as in rounds.csv"),
         "labelled": ("samples", "as in rounds.csv"),
         "score": ("text", "the acquisition score"),
         "target": ("text", "exact_epistemic (KL(p || q)) or exact_aleatoric (H(p))"),
         "spearman": ("1", "Spearman rho of score and target over the unlabelled pool (NaN where undefined)"),
         "source": ("path", "the rounds.json read")}),
}
ARTIFACTS = artifacts_by_name(
    Artifact("rounds", "table",
             "Active learning round by round: per architecture, strategy and labels used (initial set "
             "included), test accuracy (%) and exact epistemic KL E[KL(p || q)] on the oracle test set "
             "(nats), mean and std over seeds, and the mean exact KL(p || q) and H(p) (nats) of the "
             "samples each round acquired."),
    Artifact("acquisition_panels", "figure",
             "Epistemic-based acquisition: (a) test accuracy (%) against labels, (b) exact epistemic KL "
             "(nats) on the oracle test set against labels, (c) final accuracy (%) per strategy at the last "
             "round's labels; mean ± std over seeds."),
    Artifact("proxy_correlations", "figure",
             "How close each acquisition score comes to the exact signal: Spearman rank correlation over "
             "the unlabelled pool of each score with (a) the exact epistemic KL(p || q) and (b) the exact "
             "aleatoric entropy H(p), against labels; mean ± std over every run (all strategies and seeds)."),
)

#: Acquisition strategies, in display order: ``random`` and every score of
#: `oracle.classifiers.active_learning.SCORES` (the rules' {strategy} wildcard matches these).
STRATEGIES = ("random", "max_entropy", "max_epistemic", "bald")
#: Display names and colours of the strategies (paper Figures 8 and 9: random grey, entropy blue,
#: exact epistemic orange).
STRATEGY_LABELS = {"random": "Random", "max_entropy": "Max Entropy", "max_epistemic": "Max Epistemic (exact)",
                   "bald": "BALD (MC dropout)"}
STRATEGY_COLORS = {"random": "#7f7f7f", "max_entropy": "#0072b2", "max_epistemic": "#d55e00", "bald": "#009e73"}
#: The exact parts each score is correlated with (columns ``target`` of correlations.csv).
TARGETS = ("exact_epistemic", "exact_aleatoric")
TARGET_LABELS = {"exact_epistemic": "exact epistemic KL(p || q)", "exact_aleatoric": "exact aleatoric H(p)"}
#: Keys of its entry that decide its runs (target_accuracy only changes its numbers); with its
#: training hyperparameters, the params of its runs (`oracle.workflow.plan.run_spec`).
RUN_ENTRY_KEYS = ("world", "labels", "hard_label", "strategies", "initial_size", "rounds", "batch", "pool_size",
                  "mc_samples", "drop_rate")


# --------------------------------------------------------------------------- config
def check(name: str, entry: dict, config: Mapping) -> dict:
    """The entry with its schema's defaults filled in: world, archs, labels/hard_label and training as for
    every classifier experiment (`_training.check_classifier_entry`); strategies known and
    unique; BALD needs drop_rate > 0; the initial set and the pool fit in the world's
    training pool, and the rounds in the pool."""
    key = f"experiments.{name}"
    spec = _training.check_classifier_entry(name, with_defaults(entry, SCHEMA), config)
    spec.pop("sizes")  # set by the shared check; an active experiment has no size grid
    unknown = [s for s in spec["strategies"] if s not in STRATEGIES]
    if unknown or not spec["strategies"] or len(set(spec["strategies"])) != len(spec["strategies"]):
        raise ConfigError(f"config key '{key}.strategies': expected distinct names of {', '.join(STRATEGIES)}, "
                          f"got {spec['strategies']}")
    if "bald" in spec["strategies"] and not 0.0 < float(spec["drop_rate"]) < 1.0:
        raise ConfigError(f"config key '{key}.drop_rate': bald scores with MC dropout and needs a rate in (0, 1), "
                          f"got {spec['drop_rate']}")
    if int(spec["initial_size"]) < 2:
        raise ConfigError(f"config key '{key}.initial_size': a classifier needs at least 2 labelled samples")

    world = world_spec(config, spec["world"])
    pool = world["n_total"] - world["test_size"]
    _training.check_pool_fits(f"{key}.pool_size", spec["initial_size"] + spec["pool_size"], spec, spec["world"], world)
    if spec["rounds"] * spec["batch"] > spec["pool_size"]:
        raise ConfigError(f"config key '{key}.batch': {spec['rounds']} rounds of {spec['batch']} labels exceed the "
                          f"pool of {spec['pool_size']}")
    if spec["target_accuracy"] is not None and not 0.0 < float(spec["target_accuracy"]) < 1.0:
        raise ConfigError(f"config key '{key}.target_accuracy': expected a fraction in (0, 1) or null")
    spec["labels_per_round"] = [spec["initial_size"] + r * spec["batch"] for r in range(spec["rounds"] + 1)]
    return spec


def evaluation_sets(spec: Mapping) -> list[str]:
    """Every round's model is scored on the test set of the experiment's world."""
    return [spec["world"]]


def split_needs(spec: Mapping) -> dict[str, dict]:
    """The world's splits must hold a permutation for every seed; the largest training set is
    the last round's labelled set."""
    return {spec["world"]: {"seeds": [int(s) for s in spec["seeds"]], "max_n": int(spec["labels_per_round"][-1])}}


def runs(spec: Mapping) -> list[dict]:
    """One run {arch, strategy, seed} per (arch, strategy, seed), in a stable order."""
    return [{"arch": a, "strategy": s, "seed": int(seed)}
            for a in spec["archs"] for s in spec["strategies"] for seed in spec["seeds"]]


def collect_inputs(name: str, spec: Mapping, paths: Any) -> dict[str, list[str]]:
    """rounds.json of every run (arch, strategy, seed)."""
    return {"rounds": paths.active_rounds(name, runs(spec))}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
