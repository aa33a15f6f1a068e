"""Images: channel conversion, resize + center crop, and the HDF5 image files of the data
stage (``results/<run>/data/{train,test}.h5``: uint8 [N, C, H, W], int64 labels, class names).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from oracle.errors import ConfigError, DataError
from oracle.io.atomic import atomic_output
from oracle.io.h5_files import reading
from oracle.progress import track

H5_FORMAT_VERSION = 1
#: What remakes an image file (named in its readers' errors).
RERUN = "rerun the data stage"
_RESAMPLE = {"nearest": 0, "lanczos": 1, "bilinear": 2, "bicubic": 3, "box": 4}


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


def resample_filter(name: str) -> int:
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
        img = img.resize(new, resample=resample_filter(resample))
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
    for i in track(range(n), "resize", unit="image"):
        for ch in range(c):
            im = Image.fromarray(images[i, ch], mode="L")
            out[i, ch] = np.asarray(resize_center_crop(im, size, resample))
    return out


def check_image_triple(images: np.ndarray, labels: np.ndarray, class_names: Sequence[str], where: Any) -> None:
    """DataError naming `where` unless images are uint8 [N, C, H, W] with N labels in [0, K)."""
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1] not in (1, 3):
        raise DataError(f"{where}: images must be uint8 [N, C in (1, 3), H, W], got {images.dtype} {list(images.shape)}")
    if labels.ndim != 1 or len(labels) != len(images):
        raise DataError(f"{where}: {len(images)} images but labels of shape {list(labels.shape)}")
    if len(labels) and (labels.min() < 0 or labels.max() >= len(class_names)):
        raise DataError(f"{where}: labels span [{labels.min()}, {labels.max()}] but there are "
                        f"{len(class_names)} class names; expected labels in [0, {len(class_names)})")


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
    check_image_triple(images, labels, class_names, path)
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
    with reading(path, "image", RERUN) as f:
        return [n.decode() if isinstance(n, bytes) else str(n) for n in f.attrs["class_names"]]


def read_image_labels(path: str | os.PathLike) -> np.ndarray:
    """The labels (int64 [N]) of a file written by `write_images_h5`, without its images."""
    with reading(path, "image", RERUN) as f:
        return f["labels"][()].astype(np.int64)


def read_image_rows(path: str | os.PathLike, rows: Sequence[int]) -> np.ndarray:
    """The images (uint8 [len(rows), C, H, W]) at `rows` (ascending, unique) of a file written
    by `write_images_h5`, read without the others (a train split of ImageNet does not fit in
    memory)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or (np.diff(rows) <= 0).any():
        raise DataError(f"read_image_rows({path}): rows must be ascending and unique, got {rows[:8].tolist()}...")
    with reading(path, "image", RERUN) as f:
        images = f["images"]
        if len(rows) and (rows[0] < 0 or rows[-1] >= len(images)):
            raise DataError(f"read_image_rows({path}): rows outside 0..{len(images) - 1}")
        return images[rows] if len(rows) else np.zeros((0, *images.shape[1:]), np.uint8)


def read_images_h5(path: str | os.PathLike) -> dict[str, Any]:
    """Read a file written by `write_images_h5`.

    Returns {"images": uint8 [N,C,H,W], "labels": int64 [N], "class_names": list[str],
    "attrs": dict of the caller's attributes}. Raises DataError if the file is missing,
    unreadable or lacks the ``complete`` flag.
    """
    with reading(path, "image", RERUN) as f:
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
    check_image_triple(images, labels, names, path)
    return {"images": images, "labels": labels, "class_names": names, "attrs": attrs}
