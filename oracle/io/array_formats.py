"""Readers of datasets stored as arrays, in the formats their distributors (and torchvision)
write: scikit-learn's digits, CIFAR-10/100, MNIST and Fashion-MNIST (idx), SVHN (.mat), npz,
and Downsampled ImageNet. Each returns ``(images uint8 [N, C, H, W], labels int64 [N],
class_names)``; a missing file raises the DataError of `oracle.io.raw_files.missing_data`.
"""

from __future__ import annotations

import gzip
import os
import pickle
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oracle.errors import ConfigError, DataError
from oracle.io.raw_files import missing_data
from oracle.io.subsets import take_split
from oracle.progress import track

FASHION_MNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot"]


# --------------------------------------------------------------------------- digits
def load_digits_dataset() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """scikit-learn's bundled 8x8 digits: uint8 [1797,1,8,8], int64 [1797], names "0".."9".

    Pixel values 0..16 map to round(v * 255 / 16) (half rounds up; only v=8 is a half).
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    images = np.floor(d.images * 255.0 / 16.0 + 0.5).astype(np.uint8)[:, None]
    labels = d.target.astype(np.int64)
    return images, labels, [str(int(k)) for k in d.target_names]


# --------------------------------------------------------------------------- CIFAR
def _unpickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f, encoding="bytes")
    except FileNotFoundError:
        raise
    except Exception as exc:  # pickle raises many types on garbage input
        raise DataError(f"cannot read CIFAR pickle {path}: {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(f"CIFAR pickle {path} holds a {type(obj).__name__}, expected a dict")
    # the files were pickled by Python 2: keys arrive as bytes
    return {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in obj.items()}


def _names(values: Sequence[Any]) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def _cifar_batch(path: Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    d = _unpickle(path)
    if "data" not in d or label_key not in d:
        raise DataError(f"CIFAR pickle {path} lacks keys b'data'/b'{label_key}' (has {sorted(d)})")
    data = np.asarray(d["data"], dtype=np.uint8)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataError(f"CIFAR pickle {path}: data has shape {list(data.shape)}, expected [N, 3072]")
    # rows are 1024 red, 1024 green, 1024 blue values, each plane row-major 32x32
    return data.reshape(-1, 3, 32, 32), np.asarray(d[label_key], dtype=np.int64)


def _find_dir(root: Path, candidates: Sequence[str], marker: str) -> Path | None:
    for c in candidates:
        d = root / c if c else root
        if (d / marker).exists():
            return d
    return None


def load_cifar10(root: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """CIFAR-10 from torchvision's ``cifar-10-batches-py``: uint8 [N,3,32,32] (train 50000, test 10000)."""
    root = Path(root)
    d = _find_dir(root, ["cifar-10-batches-py", ""], "batches.meta")
    if d is None:
        raise missing_data(root, "cifar10")
    files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"] if split == "test" else None
    if files is None:
        raise ConfigError(f"split={split!r}: cifar10 has splits 'train' and 'test'")
    parts = []
    for name in files:
        if not (d / name).is_file():
            raise missing_data(d / name, "cifar10")
        parts.append(_cifar_batch(d / name, "labels"))
    meta = _unpickle(d / "batches.meta")
    if "label_names" not in meta:
        raise DataError(f"{d / 'batches.meta'} lacks key b'label_names'")
    return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
            _names(meta["label_names"]))


def load_cifar100(root: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """CIFAR-100 from torchvision's ``cifar-100-python`` with the 100 fine labels."""
    root = Path(root)
    d = _find_dir(root, ["cifar-100-python", ""], "meta")
    if d is None:
        raise missing_data(root, "cifar100")
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}: cifar100 has splits 'train' and 'test'")
    if not (d / split).is_file():
        raise missing_data(d / split, "cifar100")
    images, labels = _cifar_batch(d / split, "fine_labels")
    meta = _unpickle(d / "meta")
    if "fine_label_names" not in meta:
        raise DataError(f"{d / 'meta'} lacks key b'fine_label_names'")
    return images, labels, _names(meta["fine_label_names"])


# --------------------------------------------------------------------------- MNIST (idx files)
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Parse an idx file (LeCun's MNIST format), gzip-compressed if the name ends in .gz.

    Header: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions, then each dimension as a big-endian
    uint32; data follow row-major, big-endian.
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read idx file {path}: {exc}") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataError(f"{path} is not an idx file: bad magic number {raw[:4].hex()}")
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise DataError(f"idx file {path} is truncated in its header")
    shape = struct.unpack(f">{ndim}I", raw[4: 4 + 4 * ndim])
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    body = raw[4 + 4 * ndim:]
    if len(body) != expected:
        raise DataError(f"idx file {path}: header shape {list(shape)} needs {expected} bytes, found {len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def _idx_file(folder: Path, stem: str) -> Path | None:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def load_mnist(root: str | os.PathLike, split: str, kind: str = "mnist"
               ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """MNIST (kind="mnist") or Fashion-MNIST (kind="fashion_mnist"): uint8 [N,1,28,28]."""
    root = Path(root)
    sub = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}[kind]
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise ConfigError(f"split={split!r}: {kind} has splits 'train' and 'test'")
    img_stem, lab_stem = f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"
    folder = None
    for cand in (root / sub / "raw", root / "raw", root):
        if _idx_file(cand, img_stem) is not None:
            folder = cand
            break
    if folder is None:
        raise missing_data(root, kind)
    img_path, lab_path = _idx_file(folder, img_stem), _idx_file(folder, lab_stem)
    if lab_path is None:
        raise missing_data(folder / lab_stem, kind)
    images, labels = read_idx(img_path), read_idx(lab_path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DataError(f"{img_path}: expected uint8 images [N, H, W], got {images.dtype} {list(images.shape)}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise DataError(f"{lab_path}: {len(labels)} labels for {len(images)} images in {img_path}")
    names = FASHION_MNIST_CLASSES if kind == "fashion_mnist" else [str(k) for k in range(10)]
    return np.ascontiguousarray(images[:, None]), labels.astype(np.int64), list(names)


# --------------------------------------------------------------------------- SVHN
def load_svhn(root: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """SVHN from torchvision's ``{split}_32x32.mat`` (X [32,32,3,N], y [N,1]; label 10 -> 0)."""
    import scipy.io

    root = Path(root)
    if split not in ("train", "test", "extra"):
        raise ConfigError(f"split={split!r}: svhn has splits 'train', 'test' and 'extra'")
    path = root / f"{split}_32x32.mat"
    if not path.is_file():
        raise missing_data(path, "svhn")
    try:
        mat = scipy.io.loadmat(path)
    except Exception as exc:
        raise DataError(f"cannot read SVHN file {path}: {exc}") from None
    if "X" not in mat or "y" not in mat:
        raise DataError(f"{path} lacks variables X and y")
    x, y = np.asarray(mat["X"]), np.asarray(mat["y"]).reshape(-1).astype(np.int64)
    if x.ndim != 4 or x.shape[2] != 3 or x.shape[3] != len(y):
        raise DataError(f"{path}: X has shape {list(x.shape)}, expected [H, W, 3, {len(y)}]")
    y[y == 10] = 0
    images = np.ascontiguousarray(x.transpose(3, 2, 0, 1)).astype(np.uint8)
    return images, y, [str(k) for k in range(10)]


# --------------------------------------------------------------------------- npz
def _npz_layout(x: np.ndarray, layout: str | None, path: Path) -> np.ndarray:
    if x.ndim == 3:
        return x[:, None]
    if x.ndim != 4:
        raise DataError(f"{path}: x has shape {list(x.shape)}, expected [N,H,W,C], [N,C,H,W] or [N,H,W]")
    if layout is None:
        chw = x.shape[1] in (1, 3)
        hwc = x.shape[3] in (1, 3)
        if chw == hwc:
            raise DataError(f"{path}: x shape {list(x.shape)} is ambiguous; set data.layout to 'NHWC' or 'NCHW'")
        layout = "NCHW" if chw else "NHWC"
    if layout == "NHWC":
        return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    if layout == "NCHW":
        return x
    raise ConfigError(f"data.layout={layout!r}: expected 'NHWC' or 'NCHW'")


def read_npz(path: str | os.PathLike, layout: str | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One .npz with ``x`` (uint8 images, see `_npz_layout`), ``y`` (int [N]), optional ``class_names``."""
    path = Path(path)
    if not path.is_file():
        raise missing_data(path, "npz")
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = set(z.files)
            if not {"x", "y"} <= keys:
                raise DataError(f"{path} has keys {sorted(keys)}: expected 'x' (uint8 images) and 'y' (labels), optional 'class_names'")
            x, y = z["x"], z["y"]
            names = [str(v) for v in z["class_names"].tolist()] if "class_names" in keys else None
    except DataError:
        raise
    except ValueError as exc:  # object arrays need pickle, which we refuse
        raise DataError(f"cannot read {path} without pickle ({exc}); store class_names as a unicode string array") from None
    except Exception as exc:
        raise DataError(f"cannot read {path}: {exc}") from None
    if x.dtype != np.uint8:
        if not np.issubdtype(x.dtype, np.integer) or (x.size and (x.min() < 0 or x.max() > 255)):
            raise DataError(f"{path}: x has dtype {x.dtype}, expected uint8 pixel values 0..255")
        x = x.astype(np.uint8)
    if not np.issubdtype(y.dtype, np.integer) or y.ndim != 1:
        raise DataError(f"{path}: y has dtype {y.dtype} shape {list(y.shape)}, expected integer labels [N]")
    if names is None:
        names = [str(k) for k in range(int(y.max()) + 1 if len(y) else 0)]
    images = _npz_layout(x, layout, path)
    return images, y.astype(np.int64), names


def load_npz(root: str | os.PathLike, split: str, layout: str | None = None,
             test_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``<root>/<split>.npz``, or one ``.npz`` file split by `stratified_split`."""
    root = Path(root)
    if root.is_dir():
        return read_npz(root / f"{split}.npz", layout)
    if not root.is_file():
        raise missing_data(root, "npz")
    images, labels, names = read_npz(root, layout)
    return take_split(images, labels, names, split, test_fraction, seed, "npz")


def load_imagenet_downsampled(root: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Downsampled ImageNet (Chrabaszcz et al. 2017) as distributed: `train_data_batch_*.npz`
    (train) and `val_data.npz` (test, the labelled validation set). Each file holds ``data``
    uint8 [N, 3*S*S] with the R, G and B planes one after another (so a reshape to [N, 3, S, S]
    is the image) and ``labels`` 1..1000, mapped here to 0..999. Class names are the indices;
    the dataset's synset list is not part of these files.
    """
    root = Path(root)
    pattern = "train_data_batch_*.npz" if split == "train" else "val_data.npz"
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}: imagenet_downsampled data is split into 'train' and 'test'")
    files = sorted(root.glob(pattern), key=lambda p: [int(t) if t.isdigit() else t
                                                       for t in re.split(r"(\d+)", p.name)])
    if not files:
        raise missing_data(root / pattern, "imagenet_downsampled")
    xs, ys = [], []
    for path in track(files, f"imagenet {split}", unit="file"):
        try:
            with np.load(path, allow_pickle=False) as z:
                if not {"data", "labels"} <= set(z.files):
                    raise DataError(f"{path} has keys {sorted(z.files)}: expected 'data' and 'labels'")
                data, labels = z["data"], np.asarray(z["labels"]).reshape(-1)
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"cannot read {path}: {exc}") from None
        side = int(round((data.shape[1] / 3) ** 0.5)) if data.ndim == 2 else 0
        if data.dtype != np.uint8 or data.ndim != 2 or 3 * side * side != data.shape[1]:
            raise DataError(f"{path}: data has dtype {data.dtype} shape {list(data.shape)}, "
                            "expected uint8 [N, 3*S*S]")
        if len(labels) != len(data) or (len(labels) and (labels.min() < 1 or labels.max() > 1000)):
            raise DataError(f"{path}: labels must be {len(data)} integers in 1..1000")
        xs.append(data.reshape(-1, 3, side, side))
        ys.append(labels.astype(np.int64) - 1)
    if len({x.shape[1:] for x in xs}) != 1:
        raise DataError(f"{root}: batches have different image sizes {sorted({x.shape[2] for x in xs})}")
    return np.concatenate(xs), np.concatenate(ys), [str(k) for k in range(1000)]
