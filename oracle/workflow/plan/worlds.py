"""The worlds of a run, as the workflow needs them: the config key each world parameter comes
from (its files: `oracle.workflow.plan.paths`). The worlds themselves (parameters with the base world's defaults,
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
