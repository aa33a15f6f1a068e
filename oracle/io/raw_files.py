"""Raw data on disk: the "not found" error naming the layout a data kind expects
(`oracle.io.data_sets`), and the raw files a ``data`` spec reads (what the data artifacts'
provenance records hash, so the audit chain of every number ends at the raw data)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oracle.errors import DataError
from oracle.io.data_sets import layout

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"})


def missing_data(path: Path | str, kind: str) -> DataError:
    """The one-line error of data `kind` not found at `path`, naming the expected layout."""
    return DataError(f"{kind} data not found at {path}: expected {layout(kind)}")


def raw_data_inputs(spec: Mapping) -> tuple[list[Path], dict[str, Any]]:
    """The raw files a ``data`` spec reads, to hash as the data artifacts' inputs, and their identity.

    Returns (paths, identity). Paths are the smallest set that holds the data the loader
    reads (the split folders of an image folder, the batch folder of CIFAR, ...), so that
    unrelated files under a shared root neither cost hashing time nor count as a change;
    paths that do not exist are skipped. ``digits`` is scikit-learn's bundled
    ``digits.csv.gz``; its identity names the scikit-learn version.
    """
    kind = spec.get("kind")
    identity: dict[str, Any] = {"kind": kind, "root": None if spec.get("root") is None else str(spec["root"])}
    if kind == "digits":
        import importlib.metadata
        import importlib.resources

        identity["source"] = "sklearn.datasets.load_digits"
        identity["scikit-learn"] = importlib.metadata.version("scikit-learn")
        bundled = Path(str(importlib.resources.files("sklearn.datasets") / "data" / "digits.csv.gz"))
        return ([bundled] if bundled.is_file() else []), identity
    if spec.get("root") is None:
        return [], identity
    root = Path(spec["root"])
    cands: list[Path]
    if kind == "image_folder":
        dirs = spec.get("split_dirs") or {}
        cands = [root / dirs["train"]] if "train" in dirs else [root / "train"]
        if "test" in dirs:
            cands.append(root / dirs["test"])
        else:
            cands.append(root / "test" if (root / "test").is_dir() else root / "val")
    elif kind in ("cifar10", "cifar100"):
        sub = root / ("cifar-10-batches-py" if kind == "cifar10" else "cifar-100-python")
        cands = [sub if sub.is_dir() else root]
    elif kind in ("mnist", "fashion_mnist"):
        sub = "MNIST" if kind == "mnist" else "FashionMNIST"
        cands = [next((c for c in (root / sub / "raw", root / "raw") if c.is_dir()), root)]
    elif kind == "svhn":
        cands = [root / "train_32x32.mat", root / "test_32x32.mat"]
    elif kind == "npz":
        cands = [root] if root.is_file() else [root / "train.npz", root / "test.npz"]
    elif kind == "imagenet_downsampled":
        cands = sorted(root.glob("train_data_batch_*.npz")) + [root / "val_data.npz"]
    else:
        cands = [root]
    return [p for p in dict.fromkeys(cands) if p.exists()], identity
