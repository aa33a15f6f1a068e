"""Evaluation sets: a world's test set, named by the world, or a noisy copy of it.

Light: standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from oracle.errors import ConfigError

#: An evaluation set is a world's test set (named by the world) or a noisy copy of it
#: (``<world>-noise<sigma>``, `oracle.noisy_samples`), which reads the world's splits.
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
