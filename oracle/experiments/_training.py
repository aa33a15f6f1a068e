"""What the experiment kinds that train classifiers share: the checks of their entries and
the training spec of one cell (what its classifiers train on).

A *cell* names the training condition inside an experiment (``N1000`` for the classifiers of
training-set size 1000); a run is one (experiment, arch, cell, seed), and its model lives in
``classifiers/<world>/<arch>/<condition>/seed<seed>/``, named by what determines its weights
(`oracle.workflow.plan.model_of`), so experiments asking for the same model share it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from oracle.classifiers.specs import TRAINING_KEYS, arch_spec, validation_size
from oracle.errors import ConfigError
from oracle.world_specs import resolve_worlds

#: The training-curve settings of every classifier: {training-spec key: config key}.
CURVE_KEYS = {"curve_size": "classifiers.curve_size", "curve_points": "classifiers.curve_points"}

_CELL_N = re.compile(r"N(\d+)")


def _dotted(path: tuple[str, ...]) -> str:
    """A config path as a key (``("worlds", "tau1.2", "test_size")`` -> ``worlds[tau1.2].test_size``)."""
    return "".join(f"[{p}]" if "." in p else (f".{p}" if i else p) for i, p in enumerate(path))


def size_cell(n: int) -> str:
    """The cell of training-set size `n`: ``N<n>``."""
    return f"N{int(n)}"


def cell_size(cell: str) -> int:
    """Inverse of `size_cell`; ConfigError for another cell name."""
    m = _CELL_N.fullmatch(cell)
    if not m:
        raise ConfigError(f"classifier cell {cell!r}: expected N<size>")
    return int(m.group(1))


def check_classifier_entry(name: str, entry: dict, config: Mapping) -> dict:
    """Check the keys every classifier-training experiment shares and fill their defaults.

    world (must exist), archs (names of classifiers.archs), sizes (each at most the world's
    training pool), seeds, labels/hard_label (``source`` is refused when the world's label
    temperature is not 1, DESIGN rule 8), training (`training_settings`). The kind's schema
    defaults are filled in already (`oracle.experiments.with_defaults`).
    """
    key = f"experiments.{name}"
    resolved = resolve_worlds(config)
    worlds = {w: spec for w, (spec, _) in resolved.items()}
    if entry["world"] not in worlds:
        raise ConfigError(f"config key '{key}.world': no world named {entry['world']!r} "
                          f"(worlds: {', '.join(worlds)})")
    world = worlds[entry["world"]]
    known = config["classifiers"]["archs"]
    for a in entry["archs"]:
        if a not in known:
            raise ConfigError(f"config key '{key}.archs': {a!r} is not in classifiers.archs ({', '.join(known)})")
    pool = world["n_total"] - world["test_size"]
    if pool < 1:
        # name the key that sets the test size (splits.test_size, or the world's own), not the experiment
        sources = resolved[entry["world"]][1]
        raise ConfigError(f"config key '{_dotted(sources['test_size'])}': a test set of {world['test_size']} leaves "
                          f"world {entry['world']!r} ({world['n_total']} samples, {_dotted(sources['n_total'])}) no "
                          f"training pool for experiment {name!r}")
    entry["training"] = training_settings(entry, config)
    check_pool_fits(f"{key}.sizes", max(entry.get("sizes", []), default=0), entry, entry["world"], world)
    if entry["labels"] == "hard" and entry["hard_label"] == "source" and world["label_temperature"] != 1.0:
        raise ConfigError(
            f"config key '{key}.hard_label': 'source' trains on the class a sample was drawn from, which at "
            f"label temperature T={world['label_temperature']:g} is not a draw from the world's posterior "
            "p_T(y|x): the Bayes accuracy would not bound the classifier and its epistemic part would "
            "carry a spurious floor; use hard_label: label (y ~ p_T(y|x), DESIGN rule 8)")
    entry["sizes"] = sorted(entry.get("sizes", []))
    entry["arch_labels"] = {a: arch_spec(config, a)["label"] for a in entry["archs"]}
    return entry


def check_pool_fits(key: str, n: int, entry: Mapping, world_name: str, world: Mapping) -> None:
    """ConfigError (naming `key`) unless `n` training rows and the stopping rule's validation rows
    (``training.val_size``, the tail of each seed's pool order; none where the entry holds out
    its own ``val_fraction``) fit world `world_name`'s training pool."""
    pool = world["n_total"] - world["test_size"]
    val = validation_size(entry)
    if n + val > pool:
        held = f" + {val} validation rows (training.val_size)" if val else ""
        raise ConfigError(
            f"config key '{key}': N={n}{held} exceeds the training pool of world {world_name!r} "
            f"({pool} = n_total {world['n_total']} - test_size {world['test_size']}); raise the world's n_total")


def training_settings(entry: Mapping, config: Mapping) -> dict:
    """The training hyperparameters of an experiment's classifiers (`TRAINING_KEYS`): its
    entry's ``training`` overrides merged over classifiers.training."""
    training = {**config["classifiers"]["training"], **(entry.get("training") or {})}
    return {k: training[k] for k in TRAINING_KEYS}


def hard_label_of(spec: Mapping) -> str | None:
    """The hard label a model of `spec` trains on (``hard_label``), None when it trains on
    soft labels: the one rule for every kind and the active-learning rounds."""
    return spec["hard_label"] if spec["labels"] == "hard" else None


def training_spec(spec: Mapping, n: int) -> dict:
    """What a classifier of training-set size `n` of experiment `spec` trains on:
    {"world", "n", "labels", "hard_label", "training": {epochs, min_steps, batch_size, lr,
    weight_decay}}. The seed's nested subset of the world's training pool gives the rows."""
    return {"world": spec["world"], "n": int(n), "labels": spec["labels"],
            "hard_label": hard_label_of(spec),
            "training": dict(spec["training"])}


def size_runs(spec: Mapping) -> list[dict]:
    """One run {arch, cell, seed} per (arch, N, seed) of `spec`, in a stable order."""
    return [{"arch": a, "cell": size_cell(n), "seed": int(s)}
            for a in spec["archs"] for n in spec["sizes"] for s in spec["seeds"]]
