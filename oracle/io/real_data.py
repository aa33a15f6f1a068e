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

`oracle.io.images.write_images_h5` / `read_images_h5` store such a triple as
``results/<run>/data/{train,test}.h5``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from oracle.errors import ConfigError
from oracle.io import array_formats as arrays
from oracle.io.image_folders import load_image_folder
from oracle.io.images import check_image_triple, resample_filter, resize_images, set_channels
from oracle.io.data_sets import KINDS, layout
from oracle.io.subsets import select_classes, subsample_per_class, take_split

SPEC_KEYS = frozenset({
    "kind", "root", "image_size", "channels", "max_per_class", "classes", "seed",
    "test_fraction", "split_dirs", "resample", "layout", "workers",
})
# --------------------------------------------------------------------------- generic helpers
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
        raise ConfigError(f"data.root is required for data.kind={kind!r}: expected {layout(kind)}")
    image_size = _opt_int(spec, "image_size")
    max_per_class = _opt_int(spec, "max_per_class")
    channels = spec.get("channels")
    if channels not in (None, 1, 3):
        raise ConfigError(f"data.channels={channels!r}: expected 1, 3 or null")
    seed = _opt_int(spec, "seed", minimum=0) or 0
    test_fraction = float(spec.get("test_fraction", 0.2))
    resample = str(spec.get("resample", "bicubic"))
    resample_filter(resample)
    classes = spec.get("classes")
    where = root if root else kind

    if kind == "image_folder":
        images, labels, names = load_image_folder(
            root, split, image_size=image_size, channels=channels, max_per_class=max_per_class,
            classes=classes, seed=seed, split_dirs=spec.get("split_dirs"), resample=resample,
            workers=_opt_int(spec, "workers") or 1)
        check_image_triple(images, labels, names, f"{root}/{split}")
        return images, labels, names

    if kind == "digits":
        images, labels, names = take_split(*arrays.load_digits_dataset(), split, test_fraction, seed, kind)
    elif kind == "cifar10":
        images, labels, names = arrays.load_cifar10(root, split)
    elif kind == "cifar100":
        images, labels, names = arrays.load_cifar100(root, split)
    elif kind in ("mnist", "fashion_mnist"):
        images, labels, names = arrays.load_mnist(root, split, kind)
    elif kind == "svhn":
        images, labels, names = arrays.load_svhn(root, split)
    elif kind == "imagenet_downsampled":
        images, labels, names = arrays.load_imagenet_downsampled(root, split)
    else:
        images, labels, names = arrays.load_npz(root, split, spec.get("layout"), test_fraction, seed)
    check_image_triple(images, labels, names, where)

    keep, labels, names = select_classes(labels, names, classes, where)
    images = images[keep] if len(keep) != len(images) else images
    if max_per_class is not None:
        sub = subsample_per_class(labels, max_per_class, seed)
        images, labels = images[sub], labels[sub]
    images = set_channels(images, channels)
    if image_size is not None:
        images = resize_images(images, image_size, resample)
    return np.ascontiguousarray(images), labels, names


# --------------------------------------------------------------------------- HDF5 storage
