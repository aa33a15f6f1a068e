"""The config keys each rule's artifacts depend on (``params: config_keys=[...]`` in rules/).

Provenance records keep the run config at these keys and ``oracle.workflow.audit`` compares
them with the current config, so a key listed here that does not matter makes the audit cry
wolf, and a key missing here lets a changed setting go unnoticed. Key syntax: dotted names,
``[name]`` for a name holding dots (`oracle.workflow.provenance.parse_config_key`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from oracle.workflow.plan import BASE_WORLD, experiment_spec


def quoted(*parts: str) -> str:
    """A config key from its parts: ``quoted("classifiers", "archs", "vit.b16")`` ->
    ``classifiers.archs[vit.b16]``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if "." in p else (f".{p}" if out else p)
    return out


def world_keys(config: Mapping, world: str, params: Iterable[str]) -> list[str]:
    """The keys that decide the world parameters `params` (prior, label_temperature,
    base_temperature, n_total, n_shards, test_size, seed) of `world`: its own entry where it
    sets them, else the base world's, else the global defaults (samples.*, splits.*, seed)."""
    fallback = {"n_total": "samples.n_total", "n_shards": "samples.n_shards", "test_size": "splits.test_size",
                "seed": "seed"}
    keys = []
    for p in params:
        own = config["worlds"].get(world) or {}
        base = config["worlds"][BASE_WORLD] or {}
        if p in own:
            keys.append(quoted("worlds", world, p))
        elif p != "seed" and p in base:
            keys.append(quoted("worlds", BASE_WORLD, p))
        else:
            keys.append(fallback[p])
    return list(dict.fromkeys(keys))


#: The world parameters that decide a world's samples (its shards, merged file, constants).
SAMPLE_PARAMS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "seed")


def samples_keys(config: Mapping, world: str) -> list[str]:
    """A world's shards: its parameters and how they are drawn (batch size fixes the random
    stream, see `oracle.sample_shards`)."""
    return world_keys(config, world, SAMPLE_PARAMS) + ["samples.batch_size", "samples.class_batch", "samples.precision",
                                                       "samples.precision_tolerance", "samples.precision_rows"]


def splits_keys(config: Mapping, world: str) -> list[str]:
    """A world's splits: its test size and seed, and the training seeds of the experiments
    that train on it (one permutation of the pool each)."""
    keys = world_keys(config, world, ("test_size", "seed"))
    for name, entry in (config.get("experiments") or {}).items():
        trains_here = entry.get("world") == world or any(
            (c or {}).get("world") == world for c in (entry.get("configurations") or {}).values())
        if trains_here and "seeds" in entry:
            keys.append(quoted("experiments", name, "seeds"))
    return keys


def arch_keys(config: Mapping, arch: str) -> list[str]:
    """What a trained classifier depends on in its architecture's entry (not its display label)."""
    return [quoted("classifiers", "archs", arch, k) for k in config["classifiers"]["archs"][arch] if k != "label"]


def classifier_keys(config: Mapping, experiment: str, arch: str, cell: str | None = None) -> list[str]:
    """One classifier: its experiment's world and labels, its training hyperparameters (the
    experiment's overrides, else classifiers.training), its architecture, and curve_size and
    curve_points (the training history scores that many test rows after so many epochs); for a kind whose cells are
    configured one by one (shift), the training size, validation split and its cell's entry."""
    spec = experiment_spec(config, experiment)
    entry = config["experiments"][experiment]
    keys = [quoted("experiments", experiment, k) for k in ("world", "labels", "hard_label", "size", "val_fraction")
            if k in entry]
    if cell is not None and cell in (entry.get("configurations") or {}):
        keys.append(quoted("experiments", experiment, "configurations", cell))
    overrides = entry.get("training") or {}
    for k in spec["training"]:
        keys.append(quoted("experiments", experiment, "training", k) if k in overrides
                    else quoted("classifiers", "training", k))
    return keys + arch_keys(config, arch) + ["classifiers.curve_size", "classifiers.curve_points"]


def experiment_keys(config: Mapping, experiment: str) -> list[str]:
    """An experiment's data, tables, figures and numbers: its whole entry and every
    architecture it shows (labels and order)."""
    spec = experiment_spec(config, experiment)
    return [quoted("experiments", experiment)] + [quoted("classifiers", "archs", a) for a in spec.get("archs", [])]


def noisy_set_keys(config: Mapping, world: str) -> list[str]:
    """A noisy test set of a world: the noise stream derives from the world's seed; the
    likelihood passes run in samples.batch_size rows of samples.class_batch classes."""
    return world_keys(config, world, ("seed",)) + ["samples.batch_size", "samples.class_batch"]


def divergence_keys(config: Mapping, reference: str) -> list[str]:
    """The KL of a world from `reference`: the reference's prior and base temperature (the
    world's own are in its samples, an input)."""
    return world_keys(config, reference, ("prior", "base_temperature"))


def world_constants_keys(config: Mapping) -> list[str]:
    """A world's constants: a function of its samples and of the world file (both inputs);
    oracle.world decides whether the closed form is computed."""
    return ["oracle.world"] if "world" in config["oracle"] else []


#: Keys of an `active` entry that decide its runs (target_accuracy only changes its numbers).
ACTIVE_RUN_KEYS = ("world", "labels", "hard_label", "strategies", "initial_size", "rounds", "batch", "pool_size",
                   "mc_samples", "drop_rate")


def active_keys(config: Mapping, experiment: str, arch: str) -> list[str]:
    """One active-learning run (arch, strategy, seed) of an `active` experiment: the entry's
    keys that decide its rounds (every strategy is scored on the pool, so the strategy list
    counts), its training hyperparameters (the experiment's overrides, else
    classifiers.training) and its architecture."""
    spec = experiment_spec(config, experiment)
    entry = config["experiments"][experiment]
    keys = [quoted("experiments", experiment, k) for k in ACTIVE_RUN_KEYS if k in entry]
    overrides = entry.get("training") or {}
    for k in spec["training"]:
        keys.append(quoted("experiments", experiment, "training", k) if k in overrides
                    else quoted("classifiers", "training", k))
    return keys + arch_keys(config, arch)
