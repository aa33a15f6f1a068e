"""Real-image loaders: local files only, nothing is downloaded.

Every loader returns ``(images, labels, class_names)``:

    images       uint8   [N, C, H, W]   (C = 1 or 3; raw pixel values 0..255)
    labels       int64   [N]            in [0, len(class_names))
    class_names  list[str]

One dispatcher, `load_split(spec, split)`, reads a ``spec`` dict (the ``data`` section of the
config):

    kind           "digits" | "image_folder" | "cifar10" | "cifar100" | "mnist" |
                   "fashion_mnist" | "svhn" | "npz" | "imagenet_downsampled"  (required)
    root           folder (or .npz file) holding the data        (required except for digits)
    image_size     int or None: resize the shorter side to it, then center-crop to a square
                   (None keeps the native size; image folders then need equal-sized images)
    channels       None | 1 | 3: convert to grayscale (ITU-R 601-2 luma, as PIL "L") or RGB;
                   None keeps the dataset's channels (image folders decode to RGB)
    max_per_class  int or None: keep at most this many images per class (seeded, deterministic)
    classes        list of class names to keep, in this order (labels are re-indexed to it)
    seed           int (default 0): seeds subsampling and the split of unsplit datasets
    test_fraction  float (default 0.2): test share for datasets without a fixed split
                   (digits, a single .npz file), stratified by class
    split_dirs     image_folder only: {split: folder name}; default train -> "train",
                   test -> "test" or else "val" (AFHQ and ImageNet ship "val")
    resample       image_folder and resizing: "bicubic" (default) | "bilinear" | "box" |
                   "lanczos" | "nearest"
    layout         npz only: "NHWC" | "NCHW" when the shape alone is ambiguous
    workers        image_folder only: decoding threads (default 1); order is unaffected

On-disk layouts read (the ones torchvision writes; ``root`` is the folder you would pass to
torchvision, or the dataset folder itself):

    cifar10        <root>/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}
    cifar100       <root>/cifar-100-python/{train, test, meta}        (fine labels)
    mnist          <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
    fashion_mnist  <root>/FashionMNIST/raw/... (same names as MNIST)
    svhn           <root>/{train,test,extra}_32x32.mat   (labels 10 mean digit 0)
    image_folder   <root>/<split>/<class_name>/*.{jpg,jpeg,png,bmp,gif,tif,tiff,webp}
    npz            <root>/{train,test}.npz, or one <root>.npz split like digits; keys:
                   ``x`` uint8 [N,H,W,C] or [N,C,H,W] (or [N,H,W]), ``y`` int [N], optional
                   ``class_names`` str [K] (a unicode array: files are read with
                   allow_pickle=False)

    imagenet_downsampled
                   <root>/train_data_batch_*.npz (train), <root>/val_data.npz (test): the
                   Downsampled ImageNet files as distributed (Imagenet64/32/16_train_npz);
                   ``data`` uint8 [N, 3*S*S] channel-planar, ``labels`` 1..1000 (-> 0..999)

CIFAR files are Python pickles, read with `pickle`: only load files you trust.

`write_images_h5` / `read_images_h5` store such a triple as ``results/<run>/data/{train,test}.h5``.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import re

import numpy as np
from tqdm.auto import tqdm

from oracle.errors import ConfigError, DataError
from oracle.io.atomic import atomic_output

KINDS = ("digits", "image_folder", "cifar10", "cifar100", "mnist", "fashion_mnist", "svhn", "npz",
         "imagenet_downsampled")
SPEC_KEYS = frozenset({
    "kind", "root", "image_size", "channels", "max_per_class", "classes", "seed",
    "test_fraction", "split_dirs", "resample", "layout", "workers",
})
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp"})
H5_FORMAT_VERSION = 1

FASHION_MNIST_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal",
                         "Shirt", "Sneaker", "Bag", "Ankle boot"]

LAYOUTS = {
    "digits": "scikit-learn's bundled digits (no files needed)",
    "image_folder": "<root>/<split>/<class_name>/*.{jpg,jpeg,png,...} with the same class folders in every split",
    "cifar10": "<root>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}",
    "cifar100": "<root>/cifar-100-python/{train,test,meta}",
    "mnist": "<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]",
    "fashion_mnist": "<root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]",
    "svhn": "<root>/{train,test,extra}_32x32.mat",
    "npz": "<root>/{train,test}.npz or a single <root>.npz with keys x [N,H,W,C] uint8, y [N], optional class_names",
    "imagenet_downsampled": "<root>/train_data_batch_*.npz and <root>/val_data.npz (Downsampled ImageNet, "
                            "Chrabaszcz et al. 2017: keys data uint8 [N, 3*S*S] channel-planar, labels 1..1000)",
}


def _missing(path: Path | str, kind: str) -> DataError:
    return DataError(f"{kind} data not found at {path}: expected {LAYOUTS[kind]}")


# --------------------------------------------------------------------------- generic helpers
def _rng(seed: int, tag: int) -> np.random.Generator:
    # a tag per purpose keeps the subsampling stream independent of the split stream
    return np.random.default_rng([int(tag), int(seed)])


def stratified_split(labels: np.ndarray, test_fraction: float = 0.2, seed: int = 0
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified train/test split of `labels` int [N].

    Each class k with n_k members puts round(test_fraction * n_k) of them (a seeded random
    choice) into the test part. Returns (train_idx, test_idx), each sorted int64, disjoint,
    together a permutation of range(N).
    """
    if not 0.0 < float(test_fraction) < 1.0:
        raise ConfigError(f"test_fraction={test_fraction!r}: expected a number in (0, 1)")
    labels = np.asarray(labels)
    rng = _rng(seed, 1)
    test = []
    for k in np.unique(labels):
        idx = np.flatnonzero(labels == k)
        n_test = int(np.floor(test_fraction * len(idx) + 0.5))
        test.append(rng.permutation(idx)[:n_test])
    test_idx = np.sort(np.concatenate(test)).astype(np.int64) if test else np.zeros(0, np.int64)
    mask = np.ones(len(labels), bool)
    mask[test_idx] = False
    return np.flatnonzero(mask).astype(np.int64), test_idx


def subsample_per_class(labels: np.ndarray, max_per_class: int, seed: int = 0) -> np.ndarray:
    """Indices keeping at most `max_per_class` items of each class (seeded choice), sorted int64."""
    if int(max_per_class) < 1:
        raise ConfigError(f"max_per_class={max_per_class!r}: expected a positive integer")
    labels = np.asarray(labels)
    rng = _rng(seed, 2)
    keep = [rng.permutation(np.flatnonzero(labels == k))[: int(max_per_class)] for k in np.unique(labels)]
    return np.sort(np.concatenate(keep)).astype(np.int64) if keep else np.zeros(0, np.int64)


def to_grayscale(images: np.ndarray) -> np.ndarray:
    """uint8 [N,3,H,W] -> [N,1,H,W] with PIL's integer luma: (19595 R + 38470 G + 7471 B + 2^15) >> 16."""
    x = images.astype(np.uint32)
    y = (19595 * x[:, 0] + 38470 * x[:, 1] + 7471 * x[:, 2] + 0x8000) >> 16
    return y[:, None].astype(np.uint8)


def set_channels(images: np.ndarray, channels: int | None) -> np.ndarray:
    """Convert uint8 [N,C,H,W] to `channels` (1: luma, 3: replicate gray); None keeps C."""
    if channels is None or images.shape[1] == channels:
        return images
    if channels == 1 and images.shape[1] == 3:
        return to_grayscale(images)
    if channels == 3 and images.shape[1] == 1:
        return np.repeat(images, 3, axis=1)
    raise ConfigError(f"channels={channels!r}: expected 1 or 3 (images have {images.shape[1]})")


_RESAMPLE = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4}


def _resample(name: str) -> int:
    if name not in _RESAMPLE:
        raise ConfigError(f"resample={name!r}: expected one of {sorted(_RESAMPLE)}")
    return _RESAMPLE[name]


def resize_center_crop(img, size: int, resample: str = "bicubic"):
    """PIL image -> PIL image of size x size: shorter side resized to `size`, then center crop.

    Sizes follow torchvision's Resize(int) + CenterCrop: long side int(size * long / short),
    crop offset round((L - size) / 2).
    """
    w, h = img.size
    if min(w, h) != size:
        if w <= h:
            new = (size, int(size * h / w))
        else:
            new = (int(size * w / h), size)
        img = img.resize(new, resample=_resample(resample))
        w, h = img.size
    left = int(round((w - size) / 2.0))
    top = int(round((h - size) / 2.0))
    if (w, h) != (size, size):
        img = img.crop((left, top, left + size, top + size))
    return img


def resize_images(images: np.ndarray, size: int, resample: str = "bicubic") -> np.ndarray:
    """uint8 [N,C,H,W] -> uint8 [N,C,size,size] via `resize_center_crop` per image."""
    from PIL import Image

    n, c, h, w = images.shape
    if h == size and w == size:
        return images
    out = np.empty((n, c, size, size), np.uint8)
    for i in tqdm(range(n), desc="resize", disable=None, leave=False, mininterval=2.0):
        for ch in range(c):
            im = Image.fromarray(images[i, ch], mode="L")
            out[i, ch] = np.asarray(resize_center_crop(im, size, resample))
    return out


def _check_triple(images: np.ndarray, labels: np.ndarray, class_names: Sequence[str], where: Any) -> None:
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1] not in (1, 3):
        raise DataError(f"{where}: images must be uint8 [N, C in (1, 3), H, W], got {images.dtype} {list(images.shape)}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise DataError(f"{where}: {len(images)} images but labels of shape {list(labels.shape)}")
    if len(labels) and (labels.min() < 0 or labels.max() >= len(class_names)):
        raise DataError(f"{where}: labels span [{labels.min()}, {labels.max()}] but there are "
                        f"{len(class_names)} class names; expected labels in [0, {len(class_names)})")


def _select_classes(labels: np.ndarray, class_names: list[str], classes: Sequence[str] | None,
                    where: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(keep_idx, new_labels, new_names) for a `classes` filter; identity when None."""
    if classes is None:
        return np.arange(len(labels)), labels, class_names
    classes = [str(c) for c in classes]
    if not classes:
        raise ConfigError("data.classes is empty: list the class names to keep, or omit the key")
    unknown = [c for c in classes if c not in class_names]
    if unknown:
        raise ConfigError(f"data.classes: {unknown} not among the classes of {where}: {class_names}")
    if len(set(classes)) != len(classes):
        raise ConfigError(f"data.classes lists a class twice: {classes}")
    remap = np.full(len(class_names), -1, np.int64)
    for new, name in enumerate(classes):
        remap[class_names.index(name)] = new
    new_labels = remap[labels]
    keep = np.flatnonzero(new_labels >= 0)
    return keep, new_labels[keep], classes


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
        raise _missing(root, "cifar10")
    files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"] if split == "test" else None
    if files is None:
        raise ConfigError(f"split={split!r}: cifar10 has splits 'train' and 'test'")
    parts = []
    for name in files:
        if not (d / name).is_file():
            raise _missing(d / name, "cifar10")
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
        raise _missing(root, "cifar100")
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}: cifar100 has splits 'train' and 'test'")
    if not (d / split).is_file():
        raise _missing(d / split, "cifar100")
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
        raise _missing(root, kind)
    img_path, lab_path = _idx_file(folder, img_stem), _idx_file(folder, lab_stem)
    if lab_path is None:
        raise _missing(folder / lab_stem, kind)
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
        raise _missing(path, "svhn")
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
        raise _missing(path, "npz")
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
        raise _missing(root, "npz")
    images, labels, names = read_npz(root, layout)
    return _take_split(images, labels, names, split, test_fraction, seed, "npz")


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
        raise _missing(root / pattern, "imagenet_downsampled")
    xs, ys = [], []
    for path in tqdm(files, desc=f"imagenet {split}", disable=len(files) < 2):
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


def _take_split(images, labels, names, split, test_fraction, seed, kind):
    train, test = stratified_split(labels, test_fraction, seed)
    if split not in ("train", "test"):
        raise ConfigError(f"split={split!r}: {kind} data is split into 'train' and 'test'")
    idx = train if split == "train" else test
    return images[idx], labels[idx], names


# --------------------------------------------------------------------------- image folders
def _is_image(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS


def _class_dirs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def _split_dir(root: Path, split: str, split_dirs: Mapping[str, str] | None) -> Path | None:
    if split_dirs and split in split_dirs:
        return root / split_dirs[split]
    cands = [root / c for c in {"train": ["train"], "test": ["test", "val"]}.get(split, [split])]
    existing = [c for c in cands if c.is_dir()]
    # ImageNet ships a flat, unlabelled test/ next to a labelled val/: prefer a labelled folder
    labelled = [c for c in existing if _class_dirs(c)]
    return (labelled or existing or [None])[0]


def index_image_folder(root: str | os.PathLike, split: str,
                       split_dirs: Mapping[str, str] | None = None
                       ) -> tuple[list[Path], np.ndarray, list[str]]:
    """List ``<root>/<split>/<class>/<image>`` files: (paths, labels int64, sorted class names).

    The class folders of `split` must equal those of every other split folder present
    (train/test/val, or the `split_dirs` values) that has class folders; a difference raises
    DataError naming it.
    """
    root = Path(root)
    if not root.is_dir():
        raise _missing(root, "image_folder")
    folder = _split_dir(root, split, split_dirs)
    if folder is None or not folder.is_dir():
        raise _missing(folder if folder is not None else root / split, "image_folder")
    names = _class_dirs(folder)
    if not names:
        raise DataError(f"{folder} has no class folders: expected {LAYOUTS['image_folder']}")
    others = set(split_dirs.values()) if split_dirs else {"train", "test", "val"}
    for other in sorted(others - {folder.name}):
        od = root / other
        onames = _class_dirs(od) if od.is_dir() else []
        # a folder without class subfolders (ImageNet's flat, unlabelled test/) is not a split
        if onames and onames != names:
            only_here = sorted(set(names) - set(onames))
            only_there = sorted(set(onames) - set(names))
            raise DataError(f"class folders differ between {folder} and {od}: only in {folder.name}: "
                            f"{only_here}, only in {od.name}: {only_there}")
    paths: list[Path] = []
    labels: list[int] = []
    for k, name in enumerate(names):
        files = sorted(p for p in (folder / name).iterdir() if _is_image(p))
        if not files:
            raise DataError(f"class folder {folder / name} holds no images ({', '.join(sorted(IMAGE_EXTENSIONS))})")
        paths.extend(files)
        labels.extend([k] * len(files))
    return paths, np.asarray(labels, np.int64), names


def decode_image(path: str | os.PathLike, image_size: int | None, channels: int = 3,
                 resample: str = "bicubic") -> np.ndarray:
    """Decode one image file to uint8 [C,H,W] (RGB or L), resized/cropped if `image_size`."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im.load()
            im = im.convert("L" if channels == 1 else "RGB")
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(f"cannot decode image {path}: {type(exc).__name__}: {exc}") from None
    if image_size is not None:
        im = resize_center_crop(im, int(image_size), resample)
    arr = np.asarray(im, dtype=np.uint8)
    return arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)


def load_image_folder(root: str | os.PathLike, split: str, image_size: int | None = None,
                      channels: int | None = 3, max_per_class: int | None = None,
                      classes: Sequence[str] | None = None, seed: int = 0,
                      split_dirs: Mapping[str, str] | None = None, resample: str = "bicubic",
                      workers: int = 1) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """An AFHQ/ImageNet-style tree as uint8 [N,C,S,S] (S = image_size, C = channels or 3).

    Subsampling and class selection happen before decoding. With image_size None every image
    must have the size of the first. The output array is allocated once (ImageNet-64 train is
    ~16 GB) and filled in file order, so `workers` threads do not change the result.
    """
    paths, labels, names = index_image_folder(root, split, split_dirs)
    keep, labels, names = _select_classes(labels, names, classes, root)
    paths = [paths[i] for i in keep]
    if max_per_class is not None:
        sub = subsample_per_class(labels, max_per_class, seed)
        paths, labels = [paths[i] for i in sub], labels[sub]
    c = 1 if channels == 1 else 3
    first = decode_image(paths[0], image_size, c, resample)
    images = np.empty((len(paths),) + first.shape, np.uint8)

    def work(i: int) -> None:
        arr = first if i == 0 else decode_image(paths[i], image_size, c, resample)
        if arr.shape != first.shape:
            raise DataError(f"image {paths[i]} decodes to {list(arr.shape)} but {paths[0]} to "
                            f"{list(first.shape)}: set data.image_size to resize")
        images[i] = arr

    bar = tqdm(total=len(paths), desc=f"decode {Path(root).name}/{split}", disable=None, mininterval=2.0)
    if workers > 1:
        with ThreadPoolExecutor(int(workers)) as ex:
            for _ in ex.map(work, range(len(paths))):
                bar.update()
    else:
        for i in range(len(paths)):
            work(i)
            bar.update()
    bar.close()
    return images, labels, names


# --------------------------------------------------------------------------- dispatcher
def _opt_int(spec: Mapping, key: str, minimum: int = 1) -> int | None:
    v = spec.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
        raise ConfigError(f"data.{key}={v!r}: expected an integer >= {minimum} or null")
    return int(v)


def load_split(spec: Mapping[str, Any], split: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Load one split ("train" | "test"; svhn also "extra") of the dataset described by `spec`.

    See the module docstring for the keys of `spec`. Returns (images uint8 [N,C,H,W],
    labels int64 [N], class_names). Unknown keys, a missing root or file, and malformed
    files raise ConfigError / DataError naming the key or path and the expected layout.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"data spec must be a mapping, got {type(spec).__name__}")
    unknown = sorted(set(spec) - SPEC_KEYS)
    if unknown:
        raise ConfigError(f"data spec has unknown keys {unknown}: expected a subset of {sorted(SPEC_KEYS)}")
    kind = spec.get("kind")
    if kind not in KINDS:
        raise ConfigError(f"data.kind={kind!r}: expected one of {list(KINDS)}")
    root = spec.get("root")
    if kind != "digits" and not root:
        raise ConfigError(f"data.root is required for data.kind={kind!r}: expected {LAYOUTS[kind]}")
    image_size = _opt_int(spec, "image_size")
    max_per_class = _opt_int(spec, "max_per_class")
    channels = spec.get("channels")
    if channels not in (None, 1, 3):
        raise ConfigError(f"data.channels={channels!r}: expected 1, 3 or null")
    seed = _opt_int(spec, "seed", minimum=0) or 0
    test_fraction = float(spec.get("test_fraction", 0.2))
    resample = str(spec.get("resample", "bicubic"))
    _resample(resample)
    classes = spec.get("classes")
    where = root if root else kind

    if kind == "image_folder":
        images, labels, names = load_image_folder(
            root, split, image_size=image_size, channels=channels, max_per_class=max_per_class,
            classes=classes, seed=seed, split_dirs=spec.get("split_dirs"), resample=resample,
            workers=_opt_int(spec, "workers") or 1)
        _check_triple(images, labels, names, f"{root}/{split}")
        return images, labels, names

    if kind == "digits":
        images, labels, names = _take_split(*load_digits_dataset(), split, test_fraction, seed, kind)
    elif kind == "cifar10":
        images, labels, names = load_cifar10(root, split)
    elif kind == "cifar100":
        images, labels, names = load_cifar100(root, split)
    elif kind in ("mnist", "fashion_mnist"):
        images, labels, names = load_mnist(root, split, kind)
    elif kind == "svhn":
        images, labels, names = load_svhn(root, split)
    elif kind == "imagenet_downsampled":
        images, labels, names = load_imagenet_downsampled(root, split)
    else:
        images, labels, names = load_npz(root, split, spec.get("layout"), test_fraction, seed)
    _check_triple(images, labels, names, where)

    keep, labels, names = _select_classes(labels, names, classes, where)
    images = images[keep] if len(keep) != len(images) else images
    if max_per_class is not None:
        sub = subsample_per_class(labels, max_per_class, seed)
        images, labels = images[sub], labels[sub]
    images = set_channels(images, channels)
    if image_size is not None:
        images = resize_images(images, image_size, resample)
    return np.ascontiguousarray(images), labels, names


# --------------------------------------------------------------------------- HDF5 storage
def write_images_h5(path: str | os.PathLike, images: np.ndarray, labels: np.ndarray,
                    class_names: Sequence[str], attrs: Mapping[str, Any] | None = None) -> None:
    """Write an image set to HDF5 atomically.

    Datasets: ``images`` uint8 [N,C,H,W] (chunked by image rows), ``labels`` int64 [N].
    Root attributes: ``class_names`` (str [K]), ``num_classes``, ``format_version``, the
    caller's `attrs` (str/number/bool stored as is; other values as JSON text, their names
    listed in ``json_attrs``), and ``complete`` written last.
    """
    import h5py

    images = np.asarray(images)
    labels = np.asarray(labels)
    class_names = [str(c) for c in class_names]
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"write_images_h5({path}): labels must be integers [N], got {labels.dtype} {list(labels.shape)}")
    labels = labels.astype(np.int64)
    _check_triple(images, labels, class_names, path)
    reserved = {"class_names", "num_classes", "format_version", "json_attrs", "complete"}
    json_keys = []
    with atomic_output(path) as tmp:
        with h5py.File(tmp, "w") as f:
            per = max(1, (1 << 20) // max(1, int(np.prod(images.shape[1:]))))
            chunks = (min(len(images), per),) + images.shape[1:] if len(images) else None
            f.create_dataset("images", data=images, chunks=chunks)
            f.create_dataset("labels", data=labels)
            f.attrs["class_names"] = np.array(class_names, dtype=h5py.string_dtype())
            f.attrs["num_classes"] = len(class_names)
            f.attrs["format_version"] = H5_FORMAT_VERSION
            for key, value in (attrs or {}).items():
                if key in reserved:
                    raise ConfigError(f"write_images_h5: attribute name {key!r} is reserved")
                if isinstance(value, (str, bool, int, float, np.integer, np.floating, np.bool_)):
                    f.attrs[key] = value
                else:
                    f.attrs[key] = json.dumps(value, sort_keys=True)
                    json_keys.append(key)
            f.attrs["json_attrs"] = json.dumps(json_keys)
            f.attrs["complete"] = True


def read_class_names(path: str | os.PathLike) -> list[str]:
    """The class names of a file written by `write_images_h5`, without reading its images."""
    import h5py

    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            if not f.attrs.get("complete", False):
                raise DataError(f"{path} is incomplete (no 'complete' attribute): rerun the data stage")
            return [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["class_names"]]
    except DataError:
        raise
    except Exception as exc:
        raise DataError(f"cannot read class names from {path}: {exc}") from None


def read_images_h5(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by `write_images_h5`.

    Returns {"images": uint8 [N,C,H,W], "labels": int64 [N], "class_names": list[str],
    "attrs": dict of the caller's attributes}. Raises DataError if the file is missing,
    unreadable or lacks the ``complete`` flag.
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise DataError(f"image file {path} not found: expected an HDF5 file written by write_images_h5")
    try:
        with h5py.File(path, "r") as f:
            if not f.attrs.get("complete", False):
                raise DataError(f"{path} is incomplete (no 'complete' attribute): rerun the data stage")
            if "images" not in f or "labels" not in f:
                raise DataError(f"{path} lacks datasets 'images'/'labels'")
            images = f["images"][()]
            labels = f["labels"][()].astype(np.int64)
            names = [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["class_names"]]
            json_keys = set(json.loads(f.attrs.get("json_attrs", "[]")))
            attrs = {}
            for key, value in f.attrs.items():
                if key in {"class_names", "num_classes", "format_version", "json_attrs", "complete", "provenance"}:
                    continue
                if key in json_keys:
                    value = json.loads(value)
                elif isinstance(value, np.generic):
                    value = value.item()
                elif isinstance(value, bytes):
                    value = value.decode()
                attrs[key] = value
    except DataError:
        raise
    except OSError as exc:
        raise DataError(f"cannot read HDF5 image file {path}: {exc}") from None
    _check_triple(images, labels, names, path)
    return {"images": images, "labels": labels, "class_names": names, "attrs": attrs}
