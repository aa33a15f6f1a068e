"""Image folders (``<root>/<split>/<class_name>/*.jpg``, AFHQ and ImageNet as class folders):
indexing, decoding with resize + center crop, loading in parallel threads (order unaffected)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from oracle.errors import DataError
from oracle.io.images import resize_center_crop
from oracle.io.data_sets import layout
from oracle.io.raw_files import IMAGE_EXTENSIONS, missing_data
from oracle.io.subsets import select_classes, subsample_per_class
from oracle.progress import Progress


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
        raise DataError(f"{folder} has no class folders: expected {layout('image_folder')}")
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
    """Decode one image file to uint8 [C,H,W] (RGB or L), resized/cropped if `image_size`.

    A 16-bit grayscale image (PNG ``I;16``) keeps its high byte (value >> 8: 65535 -> 255, the
    same scaling Pillow applies to 16-bit RGB PNGs); a 32-bit integer or float image (mode
    ``I``/``F``, e.g. a TIFF) has no agreed 8-bit scale and raises DataError. A JPEG is read
    with truncated images refused and checked for corrupt compressed data (`_check_jpeg`):
    libjpeg only warns about it and Pillow drops the warnings, so such a file would otherwise
    decode without a word.
    """
    from PIL import Image, ImageFile, UnidentifiedImageError

    ImageFile.LOAD_TRUNCATED_IMAGES = False  # a library imported earlier may have turned it on
    try:
        with Image.open(path) as im:
            if im.format == "JPEG":
                _check_jpeg(Path(path).read_bytes(), path)
            im.load()
            im = _to_8bit(im, path).convert("L" if channels == 1 else "RGB")
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(f"cannot decode image {path}: {type(exc).__name__}: {exc}") from None
    if image_size is not None:
        im = resize_center_crop(im, int(image_size), resample)
    arr = np.asarray(im, dtype=np.uint8)
    return arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)


def _to_8bit(im, path):
    """`im` as an 8-bit image: 16-bit grayscale scaled by >> 8 (Pillow's convert would clip every
    value above 255 to 255)."""
    from PIL import Image

    if im.mode.startswith("I;16"):
        return Image.fromarray((np.asarray(im).astype(np.uint16) >> 8).astype(np.uint8), "L")
    if im.mode in ("I", "F"):
        raise DataError(f"image {path}: mode {im.mode!r} (32-bit {'integer' if im.mode == 'I' else 'float'} "
                        "pixels) has no 8-bit scale; convert it to 8 or 16 bits per channel")
    return im


#: Markers that may follow a scan's compressed data: EOI, SOS, DHT, DQT, DRI, DNL, DAC, APPn, COM.
_AFTER_SCAN = {0xD9, 0xDA, 0xC4, 0xDB, 0xDD, 0xDC, 0xCC, 0xFE, *range(0xE0, 0xF0)}


def _check_jpeg(data: bytes, path: str | os.PathLike) -> None:
    """DataError naming `path` when the JPEG `data` is corrupt in a way libjpeg only warns
    about (and Pillow then decodes without a word): a broken marker structure
    (`check_jpeg_stream`), or compressed data whose decoding ends before the data do.

    The second test decodes the file without its last two bytes of compressed data (at 1/8
    scale: the Huffman decoding is the same, the inverse DCTs are cheap): a sound file then
    lacks bits and Pillow refuses it as truncated; a file whose flipped or overwritten bytes
    desynchronized the decoder usually finished early ("Corrupt JPEG data: N extraneous
    bytes") and decodes. Corruption that neither breaks the structure nor changes where the
    decoding ends stays undetected: only libjpeg's own warnings would show it. Of random byte
    corruptions that Pillow decodes silently, 37% were caught (none of 200 sound files of
    several sizes, qualities, subsamplings and progressive ones were refused). Cost: about 0.7
    of a full decode per file (the Huffman decoding dominates; 4-7 ms for 512x512 and 500x375
    on the project's 2-core machine, one decode job per core), once, in the data stage.
    """
    import io

    from PIL import Image

    end = check_jpeg_stream(data, path)
    while end > 0 and data[end - 1] == 0xFF:  # fill bytes before EOI carry no data
        end -= 1
    try:
        with Image.open(io.BytesIO(data[:end - 2])) as im:
            im.draft(im.mode, (max(1, im.size[0] // 8), max(1, im.size[1] // 8)))
            im.load()
    except Exception:  # noqa: BLE001 - the expected outcome: the decoder needs the bytes we cut
        return
    raise DataError(f"corrupt JPEG {path}: its compressed data decode completely without their last bytes "
                    "(libjpeg: 'Corrupt JPEG data: extraneous bytes'); copy the file again or remove it")


def check_jpeg_stream(data: bytes, path: str | os.PathLike) -> int:
    """The offset of the EOI marker of the JPEG bytes `data`; DataError naming `path` unless
    they are well formed up to it: segments whose lengths fit the file, compressed data in
    which every 0xFF is a stuffed 0xFF00, a restart marker in sequence, or a marker that may
    follow a scan. Data after EOI (camera trailers) is allowed.
    """
    def bad(what: str) -> DataError:
        return DataError(f"corrupt JPEG {path}: {what}; copy the file again or remove it")

    n = len(data)
    if data[:2] != b"\xff\xd8":
        raise bad("no SOI marker at the start")
    i = 2
    while True:
        if i >= n:
            raise bad("ends before its EOI marker (truncated?)")
        if data[i] != 0xFF:
            raise bad(f"byte 0x{data[i]:02x} at offset {i} where a marker belongs")
        while i < n and data[i] == 0xFF:  # fill bytes before a marker
            i += 1
        if i >= n:
            raise bad("ends before its EOI marker (truncated?)")
        marker, i = data[i], i + 1
        if marker == 0xD9:
            return i - 2
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            continue
        if i + 2 > n or int.from_bytes(data[i:i + 2], "big") < 2 or i + int.from_bytes(data[i:i + 2], "big") > n:
            raise bad(f"segment 0xFF{marker:02X} at offset {i - 2} runs past the end of the file (truncated?)")
        i += int.from_bytes(data[i:i + 2], "big")
        if marker != 0xDA:
            continue
        restarts = 0
        while True:  # the scan's compressed data, up to the next marker
            j = data.find(b"\xff", i)
            k = j + 1
            while 0 < k < n and data[k] == 0xFF:
                k += 1
            if j < 0 or k >= n:
                raise bad("compressed data ends before an EOI marker (truncated?)")
            if data[k] == 0x00:
                i = k + 1
            elif 0xD0 <= data[k] <= 0xD7:
                if data[k] - 0xD0 != restarts % 8:
                    raise bad(f"restart marker RST{data[k] - 0xD0} at offset {j} where RST{restarts % 8} belongs")
                restarts, i = restarts + 1, k + 1
            elif data[k] in _AFTER_SCAN:
                i = j
                break
            else:
                raise bad(f"invalid marker 0xFF{data[k]:02X} in the compressed data at offset {j}")


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

    bar = Progress(f"decode {Path(root).name}/{split}", len(paths), unit="image", quiet=True)
    if workers > 1:
        with ThreadPoolExecutor(int(workers)) as ex:
            for _ in ex.map(work, range(len(paths))):
                bar.update()
    else:
        for i in range(len(paths)):
            work(i)
            bar.update()
    bar.finish()
    return images, labels, names
