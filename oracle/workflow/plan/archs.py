"""Classifier architectures: their entries in classifiers.archs with display labels, and the
config keys a trained classifier depends on.

Light: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.errors import ConfigError
from oracle.workflow.config_paths import quoted

ARCH_LABELS = {
    "resnet18": "ResNet-18",
    "resnet50": "ResNet-50",
    "vit_base_patch16_224": "ViT-Base",
    "vit_base_patch16_224.augreg_in21k": "ViT-Base",
    "convnext_tiny": "ConvNeXt",
    "convnext_base": "ConvNeXt-B",
    "swin_tiny_patch4_window7_224": "Swin",
    "swin_base_patch4_window7_224": "Swin-B",
    "mobilenetv3_large_100": "MobileNet",
    "mobilenetv3_small_100": "MobileNet-S",
}
"""Display names of timm architectures (paper spelling); unknown names are shown as given."""


def arch_label(arch: str) -> str:
    """The paper's name of a timm architecture, or ``arch`` itself."""
    return ARCH_LABELS.get(arch, arch)


def arch_spec(config: Mapping, name: str) -> dict:
    """The architecture called `name`: {model, label, input_size, pretrained}; the label
    defaults to the paper's name of the timm model (`arch_label`)."""
    archs = config["classifiers"]["archs"]
    if name not in archs:
        raise ConfigError(f"config key 'classifiers.archs': no architecture named {name!r} (known: {', '.join(archs)})")
    a = dict(archs[name])
    a.setdefault("model", name)
    a.setdefault("label", arch_label(a["model"]))
    return a


def arch_keys(config: Mapping, arch: str) -> list[str]:
    """What a trained classifier depends on in its architecture's entry (not its display label)."""
    return [quoted("classifiers", "archs", arch, k) for k in config["classifiers"]["archs"][arch] if k != "label"]
