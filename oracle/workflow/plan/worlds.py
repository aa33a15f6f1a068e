"""The worlds of a run, as the workflow needs them: the config keys each world's artifacts
depend on (its files: `oracle.workflow.plan.paths`). The worlds themselves (parameters with the base world's defaults,
seeds, kind, prior) are `oracle.world_specs`, re-exported here.

Light (the Snakefile imports it at DAG-build time): standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from oracle.world_specs import (BASE_WORLD, WORLD_KINDS, derived_seed, gaussian_spec, known_num_classes,  # noqa: F401
                                resolve_prior, resolve_worlds, world_kind, world_spec, world_specs)
from oracle.workflow.plan.config_paths import quoted


def world_keys(config: Mapping, world: str, params: Iterable[str]) -> list[str]:
    """The config keys that decide the parameters `params` (of `world_specs`: prior,
    label_temperature, base_temperature, n_total, n_shards, test_size, seed) of `world`: its own
    entry where it sets them, else the base world's, else the global defaults."""
    sources = resolve_worlds(config)[world][1]
    return list(dict.fromkeys(quoted(*sources[p]) for p in params))


#: The world parameters that decide a world's samples (its shards, merged file, constants).
SAMPLE_PARAMS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "seed")


def samples_keys(config: Mapping, world: str) -> list[str]:
    """A world's shards: its parameters and how they are drawn (batch size fixes the random
    stream, see `oracle.sample_shards`)."""
    return world_keys(config, world, SAMPLE_PARAMS) + ["samples.batch_size", "samples.class_batch", "samples.precision",
                                                       "samples.precision_tolerance", "samples.precision_rows"]


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
