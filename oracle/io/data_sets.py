"""What is known of a data set before it is read: the one table of data-set facts.

A row named after a data kind (``data.kind``: the loader that reads it) holds the loader's own
facts: the files it expects under ``data.root`` (named in every "not found" error) and, where
the kind fixes them, its images' channels and native side and its number of classes. The other
rows are the paper presets' data sets, named by the preset's ``run``: a kind's data whose
training-set size and classes are known only once read (the projected GPU cost counts from
them; the disk estimate takes their K). None: only reading the data tells.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DataSet", "DATA_SETS", "KINDS", "layout", "kind_facts", "preset_data_set"]


@dataclass(frozen=True)
class DataSet:
    """One row of `DATA_SETS`: ``kind`` (its loader), ``layout`` (the files expected under
    ``data.root``; a preset's row leaves it to its kind's row), image ``channels`` and native
    square ``side`` in pixels, ``num_classes``, ``n_train`` (training images; for a data kind
    with a fixed training split, its size: digits' 1,797 are all its images before the test
    split), ``source``."""

    kind: str
    layout: str
    channels: int | None = None
    side: int | None = None
    num_classes: int | None = None
    n_train: int | None = None
    source: str = ""


_IMAGE_FOLDER = "<root>/<split>/<class_name>/*.{jpg,jpeg,png,...} with the same class folders in every split"

DATA_SETS: dict[str, DataSet] = {
    # the data kinds
    "digits": DataSet("digits", "scikit-learn's bundled digits (no files needed)", 1, 8, 10, 1797),
    "image_folder": DataSet("image_folder", _IMAGE_FOLDER),
    "cifar10": DataSet("cifar10", "<root>/cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}", 3, 32, 10,
                       50000),
    "cifar100": DataSet("cifar100", "<root>/cifar-100-python/{train,test,meta}", 3, 32, 100, 50000),
    "mnist": DataSet("mnist", "<root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]", 1, 28, 10, 60000),
    "fashion_mnist": DataSet("fashion_mnist",
                             "<root>/FashionMNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]", 1, 28, 10, 60000),
    "svhn": DataSet("svhn", "<root>/{train,test,extra}_32x32.mat", 3, 32, 10, 73257),
    "npz": DataSet("npz", "<root>/{train,test}.npz or a single <root>.npz with keys x [N,H,W,C] uint8, y [N], "
                          "optional class_names"),
    "imagenet_downsampled": DataSet("imagenet_downsampled",
                                    "<root>/train_data_batch_*.npz and <root>/val_data.npz (Downsampled ImageNet, "
                                    "Chrabaszcz et al. 2017: keys data uint8 [N, 3*S*S] channel-planar, labels 1..1000)"),
    # the paper presets' data sets, by the preset's run name; the counts the presets' comments state
    "afhq256": DataSet("image_folder", "", channels=3, num_classes=3, n_train=14630,
                       source="AFHQ train split (presets/afhq256.yaml: 14,630 images)"),
    "imagenet64": DataSet("imagenet_downsampled", "", channels=3, num_classes=1000, n_train=1281167,
                          source="ImageNet-1K train (1,281,167 images)"),
    "imagenet128": DataSet("image_folder", "", channels=3, num_classes=1000, n_train=1281167,
                           source="ImageNet-1K train (1,281,167 images)"),
}

#: The data kinds the loaders read (``data.kind``): the rows named after their own kind.
KINDS = tuple(name for name, row in DATA_SETS.items() if row.kind == name)


def layout(kind: str) -> str:
    """The files data `kind` expects under ``data.root`` (KeyError for a name not in `KINDS`)."""
    return kind_facts(kind).layout


def kind_facts(kind: str) -> DataSet:
    """The row of data `kind` (KeyError for a name not in `KINDS`)."""
    if kind not in KINDS:
        raise KeyError(kind)
    return DATA_SETS[kind]


def preset_data_set(run: object) -> DataSet | None:
    """The row of the preset data set of run name `run`, None when `run` names none."""
    row = DATA_SETS.get(run) if isinstance(run, str) else None
    return row if row is not None and run not in KINDS else None
