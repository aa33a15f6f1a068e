"""What a config says about its classifiers: an architecture's spec (`arch_spec`, with the
paper's display name) and the epochs a training run takes (`training_epochs`: the one rule for
the training jobs, the active-learning rounds and the GPU-cost projection).

Light: standard library only (the workflow reads it at DAG-build time).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from oracle.errors import ConfigError

#: Keys of a training spec's ``training`` block (classifiers.training, overridable per experiment):
#: the one list of a classifier's training hyperparameters.
TRAINING_KEYS = ("epochs", "min_steps", "batch_size", "lr", "weight_decay", "val_size", "patience", "eval_steps",
                 "tolerance", "decay_fraction")

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


def effective_epochs(n_train: int, epochs: int, batch_size: int, min_steps: int) -> int:
    """Epochs for a classifier on `n_train` samples: at least `epochs`, and enough for `min_steps`.

    Small N would otherwise take only a handful of optimizer steps (N=50, batch 64: one per
    epoch). Steps per epoch count the last partial batch.
    """
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return max(int(epochs), math.ceil(min_steps / steps_per_epoch))


def validation_rows(n: int, val_fraction: float | None) -> int:
    """Rows of a training set of `n` rows that `oracle.classifiers.train.train_classifier`
    holds out for validation: ``round(val_fraction * n)`` (0 without a validation split)."""
    return int(round(float(val_fraction or 0.0) * int(n)))


def training_epochs(training: Mapping, n: int, val_fraction: float | None = 0.0) -> int:
    """Epochs of a classifier trained with hyperparameters `training` (``epochs``,
    ``batch_size``, ``min_steps``: classifiers.training and its overrides) on a training set of
    `n` rows: `effective_epochs` of the rows it fits on, `n` less its `validation_rows`."""
    n_fit = int(n) - validation_rows(n, val_fraction)
    return effective_epochs(n_fit, training["epochs"], training["batch_size"], training["min_steps"])


def validation_size(spec: Mapping) -> int:
    """Validation rows of a training spec's classifiers: ``training.val_size``, or none where the
    spec holds out a validation split of its own training set (``val_fraction``, shift)."""
    return 0 if float(spec.get("val_fraction") or 0.0) > 0 else int(spec["training"].get("val_size") or 0)
