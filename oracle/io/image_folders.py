"""Image folders (``<root>/<split>/<class_name>/*.jpg``, AFHQ and ImageNet as class folders):
indexing, decoding with resize + center crop, loading in parallel threads (order unaffected)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from oracle.errors import DataError
from oracle.io.images import resize_center_crop
from oracle.io.raw_files import IMAGE_EXTENSIONS, LAYOUTS, missing_data
from oracle.io.subsets import select_classes, subsample_per_class


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
        raise missing_data(root, "image_folder")
    folder = _split_dir(root, split, split_dirs)
    if folder is None or not folder.is_dir():
        raise missing_data(folder if folder is not None else root / split, "image_folder")
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
    keep, labels, names = select_classes(labels, names, classes, root)
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
