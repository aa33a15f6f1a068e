"""Fake inputs in the layouts the paper presets document: raw data (AFHQ-style JPEG class
folders, Downsampled-ImageNet npz batches, an ImageNet class-folder tree) and randomly
initialised local weight files (TF-FID Inception, torchvision ResNet-50, every relative
``classifiers.archs.<arch>.pretrained`` file). Test support only: the images are noise and
the weights random, so nothing trained or measured on them means anything; the code paths
that read them are the real ones.

Used by tests/test_preset_data.py, tests/test_rehearsal.py, scripts/ci/place_pretrained.py
and scripts/ci/rehearse.py (which calls `place_inputs` for a whole preset).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

#: Downsampled ImageNet labels run 1..1000 (oracle.io.real_data maps them to 0..999).
IMAGENET_CLASSES = 1000


def image_folder(root: Path, split_dirs: Mapping[str, str], classes: list[str], side: int, ext: str,
                 per_split: Mapping[str, int] | None = None, seed: int = 0) -> None:
    """Class folders ``root/<split dir>/<class>/<class>_<i>.<ext>`` of random RGB images a few
    pixels larger than `side` (so the loader resizes and crops). `per_split` gives the images per
    class of each split name (default 3)."""
    rng = np.random.default_rng(seed)
    from PIL import Image

    for split, folder in split_dirs.items():
        for c in classes:
            (root / folder / c).mkdir(parents=True, exist_ok=True)
            for i in range((per_split or {}).get(split, 3)):
                Image.fromarray(rng.integers(0, 256, (side + 7, side + 3, 3), dtype=np.uint8)).save(
                    root / folder / c / f"{c}_{i}.{ext}")


def imagenet_downsampled(root: Path, side: int, sizes: Mapping[str, int] | None = None, seed: int = 0) -> None:
    """Downsampled-ImageNet files as distributed: ``train_data_batch_*.npz`` and ``val_data.npz``
    with ``data`` uint8 [n, 3*side*side] and ``labels`` in 1..1000. The first rows of each file
    cycle through classes so that small files still hold many classes."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    sizes = sizes or {"train_data_batch_1.npz": 12, "train_data_batch_2.npz": 8, "val_data.npz": 6}
    start = 0
    for name, n in sizes.items():
        labels = (start + np.arange(n)) % IMAGENET_CLASSES + 1
        start += n
        np.savez(root / name, data=rng.integers(0, 256, (n, 3 * side * side), dtype=np.uint8), labels=labels)


def imagenet_class_names(k: int) -> list[str]:
    """`k` WordNet-style folder names (n01440764, ...), as in the ILSVRC-2012 tree."""
    return [f"n{1440764 + i:08d}" for i in range(k)]


#: preset -> writer of its raw data under a root, in the layout the preset documents (small:
#: a few images per class). tests/test_preset_data.py checks every data-reading preset has one.
FAKES = {
    "afhq256": lambda root, **kw: image_folder(root, {"train": "train", "test": "test"}, ["cat", "dog", "wild"],
                                               260, "jpg", **kw),
    "imagenet64": lambda root, **kw: imagenet_downsampled(root, 64, **kw),
    "imagenet128": lambda root, classes=2, **kw: image_folder(root, {"train": "train", "test": "val"},
                                                              imagenet_class_names(classes), 140, "JPEG", **kw),
}


# ----------------------------------------------------------------------------- weights


def random_fid_inception(path: Path, seed: int = 0) -> None:
    """Random weights in the TF-FID Inception file layout (pt_inception-2015-12-05: torchvision
    Inception3 names, fc 1008 x 2048, no AuxLogits) that `oracle.validation.pretrained_nets.
    load_inception` reads with torchmetrics' FID network. BatchNorm statistics come from one
    training-mode pass over random images so the features stay finite and spread out."""
    import torch
    import torchvision

    torch.manual_seed(seed)
    net = torchvision.models.Inception3(num_classes=1008, aux_logits=False, init_weights=True)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.momentum = None  # running stats = the plain average of the calibration pass
    net.train()
    with torch.no_grad():
        net(torch.rand(4, 3, 299, 299) * 2 - 1)
    _save({k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}, path)


def random_resnet50(path: Path, seed: int = 0) -> None:
    """A randomly initialised torchvision ResNet-50 state dict (validation.resnet_weights)."""
    import torch
    import torchvision

    torch.manual_seed(seed)
    _save(torchvision.models.resnet50(weights=None).state_dict(), path)


def random_timm(model: str, path: Path, seed: int = 0) -> None:
    """A randomly initialised timm state dict of `model` (classifiers.archs.*.pretrained)."""
    import timm
    import torch

    torch.manual_seed(seed)
    _save(timm.create_model(model, pretrained=False).state_dict(), path)


def _save(state_dict: dict, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state_dict, tmp)
    tmp.replace(path)


def pretrained_files(cfg: Mapping) -> dict[str, str]:
    """Relative ``classifiers.archs.<arch>.pretrained`` file -> the timm model it holds."""
    out = {}
    for name, arch in ((cfg.get("classifiers") or {}).get("archs") or {}).items():
        pre = (arch or {}).get("pretrained")
        if isinstance(pre, str) and not Path(pre).is_absolute():
            out[pre] = arch.get("model", name)
    return out


def place_pretrained(cfg: Mapping, workdir: Path) -> list[Path]:
    """Random timm weights at every relative pretrained file of `cfg` under `workdir` (kept if
    present); the files written."""
    written = []
    for rel, model in pretrained_files(cfg).items():
        dest = Path(workdir) / rel
        if not dest.exists():
            random_timm(model, dest)
            written.append(dest)
    return written


def place_inputs(preset: str, cfg: Mapping, workdir: Path, data_kwargs: Mapping | None = None) -> list[Path]:
    """Everything a preset reads from outside results/, under `workdir` at the relative paths
    `cfg` names: its raw data (`FAKES[preset]`, unless data.root exists), validation weights
    and pretrained classifier weights (each unless present). Returns what it wrote."""
    workdir = Path(workdir)
    written = []
    root = workdir / cfg["data"]["root"]
    if not root.exists():
        FAKES[preset](root, **(data_kwargs or {}))
        written.append(root)
    val = cfg.get("validation") or {}
    for key, make in (("inception_weights", random_fid_inception), ("resnet_weights", random_resnet50)):
        if val.get("enabled") and val.get(key) and not (workdir / val[key]).exists():
            make(workdir / val[key])
            written.append(workdir / val[key])
    return written + place_pretrained(cfg, workdir)
