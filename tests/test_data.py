"""Loaders read small files written in the real on-disk formats and return them exactly."""

from __future__ import annotations

import gzip
import os
import pickle
import struct

import numpy as np
import pytest
import scipy.io
from PIL import Image

from oracle.io.array_formats import load_digits_dataset, read_idx
from oracle.io.images import read_images_h5, to_grayscale, write_images_h5
from oracle.io.real_data import load_split
from oracle.io.subsets import stratified_split, subsample_per_class
from oracle.errors import ConfigError, DataError

RNG = np.random.default_rng(1234)


# --------------------------------------------------------------------------- digits
def test_digits_match_sklearn_pixel_mapping():
    from sklearn.datasets import load_digits

    images, labels, names = load_digits_dataset()
    raw = load_digits()
    assert images.dtype == np.uint8 and images.shape == (1797, 1, 8, 8)
    assert labels.dtype == np.int64 and np.array_equal(labels, raw.target)
    assert names == [str(k) for k in range(10)]
    # independent mapping, value by value: v in 0..16 -> round(v * 255 / 16), halves up
    table = {v: int((2 * v * 255 + 16) // 32) for v in range(17)}
    expected = np.vectorize(lambda v: table[int(v)])(raw.images)
    assert np.array_equal(images[:, 0], expected)
    assert images.max() == 255 and table[8] == 128


def test_digits_split_is_stratified_disjoint_and_deterministic():
    tr, te = load_split({"kind": "digits"}, "train"), load_split({"kind": "digits"}, "test")
    assert len(tr[0]) + len(te[0]) == 1797
    _, labels, _ = load_digits_dataset()
    train_idx, test_idx = stratified_split(labels, 0.2, seed=0)
    assert np.intersect1d(train_idx, test_idx).size == 0
    assert np.array_equal(np.sort(np.concatenate([train_idx, test_idx])), np.arange(1797))
    for k in range(10):
        n_k = int((labels == k).sum())
        assert int((labels[test_idx] == k).sum()) == int(np.floor(0.2 * n_k + 0.5))
    again = load_split({"kind": "digits"}, "test")
    assert np.array_equal(te[0], again[0]) and np.array_equal(te[1], again[1])
    other = load_split({"kind": "digits", "seed": 1}, "test")
    assert not np.array_equal(te[1], other[1]) or not np.array_equal(te[0], other[0])


def test_max_per_class_and_classes_filter():
    images, labels, names = load_split({"kind": "digits", "max_per_class": 7, "classes": ["3", "1"]}, "train")
    assert names == ["3", "1"]
    assert np.bincount(labels).tolist() == [7, 7]
    full, flabels, _ = load_split({"kind": "digits"}, "train")
    # every kept image is a train image of the right original class
    for img, lab in zip(images, labels):
        match = np.flatnonzero((full == img).all(axis=(1, 2, 3)))
        assert match.size and ({"3": 3, "1": 1}[names[lab]] in flabels[match])
    idx = subsample_per_class(flabels, 5, seed=3)
    assert np.array_equal(idx, subsample_per_class(flabels, 5, seed=3))
    assert np.bincount(flabels[idx]).tolist() == [5] * 10


def test_channels_and_resize():
    g, _, _ = load_split({"kind": "digits", "channels": 3}, "test")
    assert g.shape[1] == 3 and np.array_equal(g[:, 0], g[:, 2])
    big, _, _ = load_split({"kind": "digits", "image_size": 16}, "test")
    assert big.shape[1:] == (1, 16, 16)
    rgb = RNG.integers(0, 256, (4, 3, 5, 6), dtype=np.uint8)
    ours = to_grayscale(rgb)
    pil = np.stack([np.asarray(Image.fromarray(x.transpose(1, 2, 0)).convert("L")) for x in rgb])
    assert np.array_equal(ours[:, 0], pil)


def test_unknown_spec_key_and_bad_kind():
    with pytest.raises(ConfigError, match="max_per_clas"):
        load_split({"kind": "digits", "max_per_clas": 3}, "train")
    with pytest.raises(ConfigError, match="data.kind"):
        load_split({"kind": "imagenet"}, "train")
    with pytest.raises(ConfigError, match="data.root"):
        load_split({"kind": "cifar10"}, "train")


# --------------------------------------------------------------------------- CIFAR
def _cifar_rows(n):
    return RNG.integers(0, 256, (n, 3072), dtype=np.uint8)


def test_cifar10_real_layout(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    batches = []
    for i in range(1, 6):
        rows, labs = _cifar_rows(3), [int(v) for v in RNG.integers(0, 10, 3)]
        batches.append((rows, labs))
        with open(d / f"data_batch_{i}", "wb") as f:
            pickle.dump({b"batch_label": b"training batch", b"data": rows, b"labels": labs,
                         b"filenames": [b"a.png"] * 3}, f)
    test_rows, test_labs = _cifar_rows(4), [9, 0, 1, 2]
    with open(d / "test_batch", "wb") as f:
        pickle.dump({b"data": test_rows, b"labels": test_labs}, f)
    names = [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog", b"frog", b"horse", b"ship", b"truck"]
    with open(d / "batches.meta", "wb") as f:
        pickle.dump({b"label_names": names, b"num_cases_per_batch": 3}, f)

    images, labels, cls = load_split({"kind": "cifar10", "root": str(tmp_path)}, "train")
    assert images.shape == (15, 3, 32, 32) and images.dtype == np.uint8
    assert labels.tolist() == sum((b[1] for b in batches), [])
    assert cls[0] == "airplane" and cls[9] == "truck"
    # the row holds 1024 red, then 1024 green, then 1024 blue values, each row-major
    rows = np.concatenate([b[0] for b in batches])
    for n, c, h, w in [(0, 0, 0, 0), (4, 1, 5, 7), (14, 2, 31, 30)]:
        assert images[n, c, h, w] == rows[n, c * 1024 + h * 32 + w]
    ti, tl, _ = load_split({"kind": "cifar10", "root": str(d)}, "test")  # the folder itself works too
    assert tl.tolist() == test_labs and ti[3, 2, 1, 0] == test_rows[3, 2048 + 32]


def test_cifar100_fine_labels(tmp_path):
    d = tmp_path / "cifar-100-python"
    d.mkdir()
    rows = _cifar_rows(5)
    fine, coarse = [99, 0, 42, 7, 7], [19, 0, 1, 2, 3]
    with open(d / "train", "wb") as f:
        pickle.dump({b"data": rows, b"fine_labels": fine, b"coarse_labels": coarse}, f)
    with open(d / "test", "wb") as f:
        pickle.dump({b"data": rows[:2], b"fine_labels": fine[:2], b"coarse_labels": coarse[:2]}, f)
    with open(d / "meta", "wb") as f:
        pickle.dump({b"fine_label_names": [f"c{i}".encode() for i in range(100)],
                     b"coarse_label_names": [b"x"] * 20}, f)
    images, labels, names = load_split({"kind": "cifar100", "root": str(tmp_path)}, "train")
    assert labels.tolist() == fine and len(names) == 100 and names[42] == "c42"
    assert images[2, 1, 3, 4] == rows[2, 1024 + 3 * 32 + 4]


def test_cifar_missing_and_corrupt(tmp_path):
    with pytest.raises(DataError, match="cifar-10-batches-py") as exc:
        load_split({"kind": "cifar10", "root": str(tmp_path / "nowhere")}, "train")
    assert str(tmp_path / "nowhere") in str(exc.value)
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    (d / "batches.meta").write_bytes(b"not a pickle")
    with pytest.raises(DataError, match="data_batch_1"):
        load_split({"kind": "cifar10", "root": str(tmp_path)}, "train")


# --------------------------------------------------------------------------- MNIST
def _idx_bytes(arr: np.ndarray) -> bytes:
    code = {np.uint8: 0x08}[arr.dtype.type]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.tobytes()


@pytest.mark.parametrize("kind,sub,gz", [("mnist", "MNIST", False), ("mnist", "MNIST", True),
                                         ("fashion_mnist", "FashionMNIST", True)])
def test_mnist_idx_files(tmp_path, kind, sub, gz):
    raw = tmp_path / sub / "raw"
    raw.mkdir(parents=True)
    data = {}
    for prefix, n in (("train", 6), ("t10k", 3)):
        imgs = RNG.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        labs = RNG.integers(0, 10, n).astype(np.uint8)
        data[prefix] = (imgs, labs)
        for stem, arr in ((f"{prefix}-images-idx3-ubyte", imgs), (f"{prefix}-labels-idx1-ubyte", labs)):
            blob = _idx_bytes(arr)
            assert blob[:4] == (b"\x00\x00\x08\x03" if arr.ndim == 3 else b"\x00\x00\x08\x01")
            if gz:
                with gzip.open(raw / (stem + ".gz"), "wb") as f:
                    f.write(blob)
            else:
                (raw / stem).write_bytes(blob)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels, names = load_split({"kind": kind, "root": str(tmp_path)}, split)
        assert images.shape == (len(data[prefix][0]), 1, 28, 28)
        assert np.array_equal(images[:, 0], data[prefix][0])
        assert np.array_equal(labels, data[prefix][1].astype(np.int64))
    assert names[0] == ("T-shirt/top" if kind == "fashion_mnist" else "0")


def test_idx_bad_magic_and_truncation(tmp_path):
    p = tmp_path / "bad-idx"
    p.write_bytes(b"\x00\x01\x08\x03" + b"\x00" * 12)
    with pytest.raises(DataError, match="magic"):
        read_idx(p)
    p.write_bytes(_idx_bytes(np.zeros((2, 3, 3), np.uint8))[:-1])
    with pytest.raises(DataError, match=str(p)):
        read_idx(p)
    with pytest.raises(DataError, match="MNIST/raw"):
        load_split({"kind": "mnist", "root": str(tmp_path)}, "train")


# --------------------------------------------------------------------------- SVHN
def test_svhn_mat(tmp_path):
    n = 5
    x = RNG.integers(0, 256, (32, 32, 3, n), dtype=np.uint8)
    y = np.array([[10], [1], [2], [10], [9]], dtype=np.uint8)
    scipy.io.savemat(tmp_path / "train_32x32.mat", {"X": x, "y": y})
    images, labels, names = load_split({"kind": "svhn", "root": str(tmp_path)}, "train")
    assert labels.tolist() == [0, 1, 2, 0, 9]
    assert images.shape == (n, 3, 32, 32)
    for i, c, h, w in [(0, 0, 0, 0), (3, 2, 10, 20), (4, 1, 31, 5)]:
        assert images[i, c, h, w] == x[h, w, c, i]
    with pytest.raises(DataError, match="test_32x32.mat"):
        load_split({"kind": "svhn", "root": str(tmp_path)}, "test")


# --------------------------------------------------------------------------- npz
def test_npz_layouts_and_class_names(tmp_path):
    x_hwc = RNG.integers(0, 256, (6, 5, 4, 3), dtype=np.uint8)
    y = np.array([0, 1, 1, 0, 2, 2])
    np.savez(tmp_path / "train.npz", x=x_hwc, y=y, class_names=np.array(["cat", "dog", "wild"]))
    np.savez(tmp_path / "test.npz", x=x_hwc.transpose(0, 3, 1, 2), y=y)
    images, labels, names = load_split({"kind": "npz", "root": str(tmp_path)}, "train")
    assert names == ["cat", "dog", "wild"] and labels.tolist() == y.tolist()
    assert np.array_equal(images, x_hwc.transpose(0, 3, 1, 2))
    images2, _, names2 = load_split({"kind": "npz", "root": str(tmp_path)}, "test")
    assert np.array_equal(images2, images) and names2 == ["0", "1", "2"]


def test_npz_single_file_is_split(tmp_path):
    x = RNG.integers(0, 256, (20, 1, 6, 6), dtype=np.uint8)
    y = np.repeat([0, 1], 10)
    np.savez(tmp_path / "all.npz", x=x, y=y)
    spec = {"kind": "npz", "root": str(tmp_path / "all.npz"), "test_fraction": 0.3}
    tr, te = load_split(spec, "train"), load_split(spec, "test")
    assert len(tr[0]) == 14 and len(te[0]) == 6 and np.bincount(te[1]).tolist() == [3, 3]
    both = np.concatenate([tr[0], te[0]])
    assert sorted(map(bytes, both)) == sorted(map(bytes, x))


def test_npz_wrong_keys_and_ambiguous(tmp_path):
    np.savez(tmp_path / "train.npz", images=np.zeros((2, 4, 4, 3), np.uint8), labels=np.zeros(2))
    with pytest.raises(DataError, match="expected 'x'") as exc:
        load_split({"kind": "npz", "root": str(tmp_path)}, "train")
    assert str(tmp_path / "train.npz") in str(exc.value)
    np.savez(tmp_path / "test.npz", x=np.zeros((2, 3, 3, 3), np.uint8), y=np.zeros(2, int))
    with pytest.raises(DataError, match="ambiguous"):
        load_split({"kind": "npz", "root": str(tmp_path)}, "test")
    imgs, _, _ = load_split({"kind": "npz", "root": str(tmp_path), "layout": "NHWC"}, "test")
    assert imgs.shape == (2, 3, 3, 3)
    np.savez(tmp_path / "test.npz", x=np.zeros((2, 4, 4, 3), np.float32), y=np.zeros(2, int))
    with pytest.raises(DataError, match="uint8"):
        load_split({"kind": "npz", "root": str(tmp_path)}, "test")


# --------------------------------------------------------------------------- image folders
def _tree(root, split, classes, n=2, size=(12, 8), fmt="PNG"):
    arrays = {}
    for c in classes:
        d = root / split / c
        d.mkdir(parents=True)
        for i in range(n):
            arr = RNG.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
            name = d / f"img{i}.{'png' if fmt == 'PNG' else 'jpg'}"
            Image.fromarray(arr).save(name, format=fmt)
            arrays[(c, i)] = arr
    return arrays


def test_image_folder_png_exact_and_center_crop(tmp_path):
    tr = _tree(tmp_path, "train", ["dog", "cat"], size=(12, 8))
    _tree(tmp_path, "val", ["dog", "cat"], n=1, size=(12, 8))
    (tmp_path / "train" / "cat" / "notes.txt").write_text("ignored")
    images, labels, names = load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")
    assert names == ["cat", "dog"] and labels.tolist() == [0, 0, 1, 1]
    assert np.array_equal(images[0], tr[("cat", 0)].transpose(2, 0, 1))
    assert np.array_equal(images[3], tr[("dog", 1)].transpose(2, 0, 1))
    # shorter side (8) already equals image_size: only the center crop of columns 2..9 remains
    crop, _, _ = load_split({"kind": "image_folder", "root": str(tmp_path), "image_size": 8}, "train")
    assert np.array_equal(crop[2], tr[("dog", 0)][:, 2:10].transpose(2, 0, 1))
    test, tl, _ = load_split({"kind": "image_folder", "root": str(tmp_path), "image_size": 4,
                              "channels": 1, "workers": 2}, "test")  # "test" falls back to val/
    assert test.shape == (2, 1, 4, 4) and tl.tolist() == [0, 1]


def test_image_folder_resize_constant_and_jpeg(tmp_path):
    for split in ("train", "test"):
        d = tmp_path / split / "a"
        d.mkdir(parents=True)
        Image.new("RGB", (40, 30), (200, 10, 90)).save(d / "x.jpeg", quality=95)
        Image.new("RGB", (30, 30), (200, 10, 90)).save(d / "y.PNG")
    images, _, _ = load_split({"kind": "image_folder", "root": str(tmp_path), "image_size": 16}, "train")
    assert images.shape == (2, 3, 16, 16)
    # a constant image stays constant under resize + crop; JPEG only within its quantization
    assert np.array_equal(images[1], np.broadcast_to(np.array([200, 10, 90], np.uint8)[:, None, None], (3, 16, 16)))
    assert np.abs(images[0].astype(int) - np.array([200, 10, 90])[:, None, None]).max() <= 3


def test_image_folder_class_mismatch(tmp_path):
    _tree(tmp_path, "train", ["cat", "dog", "wild"], n=1)
    _tree(tmp_path, "test", ["cat", "dog", "fox"], n=1)
    with pytest.raises(DataError, match=r"only in train: \['wild'\], only in test: \['fox'\]") as exc:
        load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")
    assert str(tmp_path / "train") in str(exc.value)


def test_image_folder_corrupt_jpeg(tmp_path):
    _tree(tmp_path, "train", ["cat", "dog"], n=2, fmt="JPEG")
    bad = tmp_path / "train" / "dog" / "img1.jpg"
    bad.write_bytes(bad.read_bytes()[:200])  # truncated JPEG
    with pytest.raises(DataError, match="img1.jpg") as exc:
        load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")
    assert str(bad) in str(exc.value)
    bad.write_bytes(b"\xff\xd8 garbage")
    with pytest.raises(DataError, match=str(bad)):
        load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")


def test_image_folder_missing_root_and_sizes(tmp_path):
    with pytest.raises(DataError) as exc:
        load_split({"kind": "image_folder", "root": str(tmp_path / "afhq")}, "train")
    assert str(tmp_path / "afhq") in str(exc.value) and "<class_name>" in str(exc.value)
    assert "\n" not in str(exc.value)
    d = tmp_path / "train" / "a"
    d.mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(d / "1.png")
    Image.new("RGB", (9, 8)).save(d / "2.png")
    with pytest.raises(DataError, match="image_size"):
        load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")


# --------------------------------------------------------------------------- HDF5
def test_images_h5_roundtrip_atomic(tmp_path):
    images, labels, names = load_split({"kind": "digits", "max_per_class": 3}, "train")
    path = tmp_path / "data" / "train.h5"
    write_images_h5(path, images, labels, names, {"kind": "digits", "image_size": 8, "spec": {"a": [1, 2]}})
    out = read_images_h5(path)
    assert np.array_equal(out["images"], images) and out["images"].dtype == np.uint8
    assert np.array_equal(out["labels"], labels) and out["labels"].dtype == np.int64
    assert out["class_names"] == names
    assert out["attrs"] == {"kind": "digits", "image_size": 8, "spec": {"a": [1, 2]}}
    assert os.listdir(path.parent) == ["train.h5"]  # no temporary left behind


def test_images_h5_refuses_bad_input_and_incomplete(tmp_path):
    import h5py

    with pytest.raises(DataError, match="labels"):
        write_images_h5(tmp_path / "x.h5", np.zeros((2, 1, 4, 4), np.uint8), np.array([0, 5]), ["a", "b"])
    assert not (tmp_path / "x.h5").exists() and not list(tmp_path.iterdir())
    with h5py.File(tmp_path / "inc.h5", "w") as f:
        f.create_dataset("images", data=np.zeros((1, 1, 2, 2), np.uint8))
    with pytest.raises(DataError, match="incomplete"):
        read_images_h5(tmp_path / "inc.h5")
    with pytest.raises(DataError, match="missing.h5"):
        read_images_h5(tmp_path / "missing.h5")


def test_image_folder_imagenet_layout_flat_test_is_skipped(tmp_path):
    # ImageNet: labelled train/ and val/, an unlabelled flat test/
    _tree(tmp_path, "train", ["n01", "n02"], n=1, size=(8, 8))
    _tree(tmp_path, "val", ["n01", "n02"], n=1, size=(8, 8))
    (tmp_path / "test").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "test" / "ILSVRC_test_1.JPEG")
    train = load_split({"kind": "image_folder", "root": str(tmp_path)}, "train")
    test = load_split({"kind": "image_folder", "root": str(tmp_path)}, "test")
    assert train[2] == test[2] == ["n01", "n02"] and len(test[0]) == 2
    explicit = load_split({"kind": "image_folder", "root": str(tmp_path),
                           "split_dirs": {"train": "train", "test": "val"}}, "test")
    assert np.array_equal(explicit[0], test[0])


# ------------------------------------------------------------- downsampled ImageNet batches
def _write_imagenet_batch(path, images_nchw, labels_1based):
    n = len(images_nchw)
    np.savez(path, data=images_nchw.reshape(n, -1), labels=list(labels_1based),
             mean=np.zeros(images_nchw.shape[1] * images_nchw.shape[2] ** 2))


def test_imagenet_downsampled_reads_planar_batches(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, size=(5, 3, 4, 4), dtype=np.uint8)
    b = rng.integers(0, 256, size=(3, 3, 4, 4), dtype=np.uint8)
    v = rng.integers(0, 256, size=(2, 3, 4, 4), dtype=np.uint8)
    # batch 10 sorts after batch 2 numerically, not lexically
    _write_imagenet_batch(tmp_path / "train_data_batch_10.npz", b, [1000, 2, 3])
    _write_imagenet_batch(tmp_path / "train_data_batch_2.npz", a, [1, 1, 5, 7, 9])
    _write_imagenet_batch(tmp_path / "val_data.npz", v, [4, 500])
    spec = {"kind": "imagenet_downsampled", "root": str(tmp_path)}
    x, y, names = load_split(spec, "train")
    assert np.array_equal(x, np.concatenate([a, b]))
    # R plane first: pixel (c, i, j) of image n is data[n, c*S*S + i*S + j]
    flat = np.load(tmp_path / "train_data_batch_2.npz")["data"]
    assert x[1, 2, 3, 1] == flat[1, 2 * 16 + 3 * 4 + 1]
    assert y.tolist() == [0, 0, 4, 6, 8, 999, 1, 2]
    assert len(names) == 1000
    xt, yt, _ = load_split(spec, "test")
    assert np.array_equal(xt, v) and yt.tolist() == [3, 499]


def test_imagenet_downsampled_missing_names_layout(tmp_path):
    with pytest.raises(DataError, match=r"train_data_batch_\*\.npz.*Chrabaszcz"):
        load_split({"kind": "imagenet_downsampled", "root": str(tmp_path)}, "train")
