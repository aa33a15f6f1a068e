"""What a config says about its worlds: the kind of world, every world variant with the base
world's defaults and its seed, the Gaussian world's spec, and the names of the evaluation sets
(a world's test set or a noisy copy of it).

Light: standard library only (the workflow reads it at DAG-build time); every function takes
the plain config dict and returns plain values.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

from oracle.errors import ConfigError

#: Values of `oracle.world`; an absent key means the first (the flow of the paper).
WORLD_KINDS = ("flow", "gaussian")

BASE_WORLD = "base"
#: World parameters a variant inherits from the base world when it does not set them.
_WORLD_PARAMETERS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "test_size")


def world_kind(config: Mapping) -> str:
    """`oracle.world` of a config: "flow" (trained or imported TarFlow) or "gaussian" (the
    analytic world of DESIGN rule 7). Absent means "flow"."""
    kind = config["oracle"].get("world") or WORLD_KINDS[0]
    if kind not in WORLD_KINDS:
        raise ConfigError(f"config key 'oracle.world': {kind!r} is not one of {', '.join(WORLD_KINDS)}")
    return kind


def derived_seed(seed: int, name: str) -> int:
    """A 31-bit seed that is a function of the run's seed and a name (a world variant)."""
    digest = hashlib.sha256(f"oracle.world-seed/v1:{int(seed)}:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


def world_specs(config: Mapping) -> dict[str, dict]:
    """Every world of the run with its defaults filled in, base first:
    {name: {prior (list or None), label_temperature, base_temperature, n_total, n_shards,
    test_size, seed}}. A variant inherits the base world's parameters it does not set; its seed
    defaults to `derived_seed(seed, name)` so its samples are independent of the base world's."""
    worlds = config["worlds"]
    base = worlds[BASE_WORLD]
    defaults = {"n_total": config["samples"]["n_total"], "n_shards": config["samples"]["n_shards"],
                "test_size": config["splits"]["test_size"]}
    out = {}
    for name in [BASE_WORLD, *[w for w in worlds if w != BASE_WORLD]]:
        entry = worlds[name] or {}
        spec = {k: entry.get(k, base.get(k, defaults.get(k))) for k in _WORLD_PARAMETERS}
        spec["seed"] = int(entry.get("seed", config["seed"] if name == BASE_WORLD else derived_seed(config["seed"], name)))
        out[name] = spec
    return out


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


#: An evaluation set is a world's test set (named by the world) or a noisy copy of it
#: (``<world>-noise<sigma>``, `oracle.noisy_test_sets`), which reads the world's splits.
NOISE_TAG = "-noise"


def sigma_text(sigma: float) -> str:
    """The one spelling of a noise std in names and paths (``0.1``, ``0.05``, ``1e-05``)."""
    return f"{float(sigma):g}"


def noisy_set_name(world: str, sigma: float) -> str:
    """The evaluation set of `world`'s test set with clipped Gaussian noise of std `sigma`:
    ``<world>-noise<sigma>`` (`sigma_text`: equal sigmas share one file)."""
    return f"{world}{NOISE_TAG}{sigma_text(sigma)}"


def parse_evalset(name: str, worlds: Iterable[str]) -> tuple[str, float | None]:
    """(world, sigma) of an evaluation set name: sigma None for a world's own test set.
    ConfigError when `name` names neither a world nor a noisy set of one."""
    worlds = list(worlds)
    if name in worlds:
        return name, None
    world, tag, sigma = name.rpartition(NOISE_TAG)
    if tag and world in worlds:
        try:
            value = float(sigma)
        except ValueError:
            value = math.nan
        if value > 0 and noisy_set_name(world, value) == name:
            return world, value
    raise ConfigError(f"evaluation set {name!r} is neither a world ({', '.join(worlds)}) nor "
                      f"<world>{NOISE_TAG}<sigma> of one")
