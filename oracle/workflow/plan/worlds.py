"""The worlds of a run: the world kind and file, each world's parameters (with the base
world's defaults and their seeds) and the config keys they come from, the class prior.

Light (the Snakefile imports it at DAG-build time): standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from oracle.errors import ConfigError
from oracle.workflow.config_paths import quoted

#: Values of `oracle.world`; an absent key means the first (the flow of the paper).
WORLD_KINDS = ("flow", "gaussian")

BASE_WORLD = "base"
#: World parameters a variant inherits from the base world when it does not set them.
_WORLD_PARAMETERS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "test_size")
#: The global default of a world parameter neither the world nor the base world sets.
_DEFAULT_KEYS = {"n_total": "samples.n_total", "n_shards": "samples.n_shards", "test_size": "splits.test_size"}


def world_kind(config: Mapping) -> str:
    """`oracle.world` of a config: "flow" (trained or imported TarFlow) or "gaussian" (the
    analytic world of DESIGN rule 7). Absent means "flow"."""
    kind = config["oracle"].get("world") or WORLD_KINDS[0]
    if kind not in WORLD_KINDS:
        raise ConfigError(f"config key 'oracle.world': {kind!r} is not one of {', '.join(WORLD_KINDS)}")
    return kind


def world_file(run_dir: str, config: Mapping) -> str:
    """The frozen model written by the oracle stage: `oracle/flow.pt` for a flow,
    `oracle/gaussian_world.pt` for a Gaussian world (both load with
    `oracle.worlds.world_from_checkpoint`)."""
    name = "gaussian_world.pt" if world_kind(config) == "gaussian" else "flow.pt"
    return f"{run_dir}/oracle/{name}"


def derived_seed(seed: int, name: str) -> int:
    """A 31-bit seed that is a function of the run's seed and a name (a world variant)."""
    digest = hashlib.sha256(f"oracle.world-seed/v1:{int(seed)}:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


def _resolve_worlds(config: Mapping) -> dict[str, tuple[dict, dict]]:
    """{world: (spec, {parameter: the config key its value comes from})}, base first: the one
    place that decides where a world's parameter comes from (its entry, the base world's, a
    global default), for its value (`world_specs`) and its provenance (`world_keys`)."""
    worlds = config["worlds"]
    base = worlds[BASE_WORLD]
    defaults = {"n_total": config["samples"]["n_total"], "n_shards": config["samples"]["n_shards"],
                "test_size": config["splits"]["test_size"]}
    out = {}
    for name in [BASE_WORLD, *[w for w in worlds if w != BASE_WORLD]]:
        entry = worlds[name] or {}
        spec, keys = {}, {}
        for k in _WORLD_PARAMETERS:
            if k in entry:
                spec[k], keys[k] = entry[k], quoted("worlds", name, k)
            elif k in base:
                spec[k], keys[k] = base[k], quoted("worlds", BASE_WORLD, k)
            else:
                spec[k], keys[k] = defaults.get(k), _DEFAULT_KEYS.get(k)
        spec["seed"] = int(entry.get("seed", config["seed"] if name == BASE_WORLD else derived_seed(config["seed"], name)))
        keys["seed"] = quoted("worlds", name, "seed") if "seed" in entry else "seed"
        out[name] = (spec, keys)
    return out


def world_specs(config: Mapping) -> dict[str, dict]:
    """Every world of the run with its defaults filled in, base first:
    {name: {prior (list or None), label_temperature, base_temperature, n_total, n_shards,
    test_size, seed}}. A variant inherits the base world's parameters it does not set; its seed
    defaults to `derived_seed(seed, name)` so its samples are independent of the base world's."""
    return {name: spec for name, (spec, _) in _resolve_worlds(config).items()}


def world_keys(config: Mapping, world: str, params: Iterable[str]) -> list[str]:
    """The config keys that decide the parameters `params` (of `world_specs`: prior,
    label_temperature, base_temperature, n_total, n_shards, test_size, seed) of `world`: its own
    entry where it sets them, else the base world's, else the global defaults."""
    keys = _resolve_worlds(config)[world][1]
    return list(dict.fromkeys(keys[p] for p in params))


def world_spec(config: Mapping, name: str) -> dict:
    """One world of `world_specs`; ConfigError naming the known worlds if there is none."""
    specs = world_specs(config)
    if name not in specs:
        raise ConfigError(f"config key 'worlds': no world named {name!r} (known: {', '.join(specs)})")
    return specs[name]


def gaussian_spec(config: Mapping) -> dict:
    """The `oracle.gaussian` section as the spec of `oracle.worlds.gaussian_world_from_spec`:
    {num_classes, channels, image_size, separation, std, seed}."""
    g = config["oracle"].get("gaussian")
    if g is None:
        raise ConfigError("config key 'oracle.gaussian': oracle.world=gaussian needs this section "
                          "(num_classes, channels, image_size, separation, std, seed)")
    return {"num_classes": int(g["num_classes"]), "channels": int(g["channels"]),
            "image_size": int(g["image_size"]), "separation": float(g["separation"]),
            "std": float(g["std"]), "seed": int(g["seed"])}


def known_num_classes(config: Mapping) -> int | None:
    """K when the config alone fixes it (a Gaussian world, or a `data.classes` list), else None
    (the data stage knows it, see `check_prior_length`)."""
    if world_kind(config) == "gaussian":
        return gaussian_spec(config)["num_classes"]
    classes = config["data"].get("classes")
    return len(classes) if classes else None


def resolve_prior(prior: list[float] | None, num_classes: int, key: str = "worlds.base.prior") -> list[float]:
    """The class prior as K floats: uniform for None; ConfigError naming `key` if its length is not K."""
    if prior is None:
        return [1.0 / num_classes] * num_classes
    if len(prior) != num_classes:
        raise ConfigError(f"config key {key!r}: has {len(prior)} entries but the world has {num_classes} classes")
    return [float(p) for p in prior]


#: The world parameters that decide a world's samples (its shards, merged file, constants).
SAMPLE_PARAMS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "seed")


def samples_keys(config: Mapping, world: str) -> list[str]:
    """A world's shards: its parameters and how they are drawn (batch size fixes the random
    stream, see `oracle.sampling`)."""
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
