"""Evaluation sets: a world's test set, named by the world, or a noisy copy of it
(``<world>-noise<sigma>``). The names are the library's (`oracle.world_specs`), re-exported
here for the rules.
"""

from oracle.world_specs import NOISE_TAG, noisy_set_name, parse_evalset, sigma_text  # noqa: F401
