"""Experiment kind ``difficulty`` (the Bayes-error-of-flows seed, Theisen et al. 2021, Sec. 3.2):
how hard a world is, against its base temperature tau.

Each tau is a world variant of the config (``worlds:``), sampled and evaluated exactly like the
base world; its constants (``samples/<world>/constants.json``, `oracle.measures.world_constants`)
are Monte Carlo means over all its samples with standard errors: the Bayes error
E[1 - max_y p(y|x)], the aleatoric floor E[H(p(y|x))] (nats) and I(X;Y) (bits). A world with a
closed form (a two-class Gaussian world: Phi(-||mu_1 - mu_2|| / (2 std tau))) has it beside the
estimate, with z = (estimate - closed form) / SE. No classifier is trained.

Data: ``curve``, one row per world in the order of the entry's ``worlds``.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.errors import ConfigError
from oracle.experiments import CollectPaths, entry_schema, reporting_half
from oracle.report.paper import Artifact, artifacts_by_name
from oracle.world_specs import world_specs

KIND = "difficulty"
DATA = ("curve",)
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
    return entry


def classifier_runs(spec: Mapping) -> list[dict]:
    """None: the difficulty of a world needs no classifier."""
    return []


def training_spec(spec: Mapping, cell: str) -> dict:
    raise ConfigError(f"experiment kind difficulty trains no classifiers (asked for cell {cell!r})")


def evaluation_sets(spec: Mapping) -> list[str]:
    """None: worlds are evaluated by their own constants, not through classifiers."""
    return []


def collect_inputs(name: str, spec: Mapping, paths: CollectPaths) -> dict[str, list[str]]:
    """The constants of each of its worlds."""
    return {"constants": paths.constants(spec["worlds"])}


SCHEMA = entry_schema(__file__)
__getattr__ = reporting_half(__name__)
