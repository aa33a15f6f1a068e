"""Classifier architectures: what a trained classifier is built from (the entries and their
display labels are `oracle.classifiers.specs`, re-exported here).

Light: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.classifiers.specs import ARCH_LABELS, arch_label, arch_spec  # noqa: F401


def arch_build_spec(config: Mapping, arch: str) -> dict:
    """What a classifier of architecture `arch` is built from: its `arch_spec` without the
    display label (a rule's params: a label changes tables and figures, not the models)."""
    return {k: v for k, v in arch_spec(config, arch).items() if k != "label"}
