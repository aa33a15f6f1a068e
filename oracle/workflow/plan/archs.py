"""Classifier architectures: the config keys a trained classifier depends on (the entries and
their display labels are `oracle.classifiers.specs`, re-exported here).

Light: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.classifiers.specs import ARCH_LABELS, arch_label, arch_spec  # noqa: F401
from oracle.workflow.plan.config_paths import quoted


def arch_keys(config: Mapping, arch: str) -> list[str]:
    """What a trained classifier depends on in its architecture's entry (not its display label)."""
    return [quoted("classifiers", "archs", arch, k) for k in config["classifiers"]["archs"][arch] if k != "label"]
