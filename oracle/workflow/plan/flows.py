"""Shards of a world's samples, and the flow of the oracle stage: its architecture spec and its
step count.

Light: standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from oracle.errors import ConfigError


def shard_ids(n_shards: int) -> list[str]:
    """The shard wildcard values: '0000', '0001', ... (four digits, as in shard-0000.h5)."""
    return [f"{i:04d}" for i in range(int(n_shards))]


def shard_sizes(n_total: int, n_shards: int) -> list[int]:
    """Samples per shard: as even as possible, the first `n_total % n_shards` shards get one more."""
    if n_shards < 1 or n_total < n_shards:
        raise ConfigError(f"samples: cannot split n_total={n_total} samples into n_shards={n_shards} shards")
    base, extra = divmod(n_total, n_shards)
    return [base + (i < extra) for i in range(n_shards)]


def flow_spec(config: Mapping, in_channels: int, img_size: int, num_classes: int) -> dict:
    """The `oracle.flow_checkpoints.build_flow` spec of this run, once the data fix C, H(=W) and K."""
    f = config["oracle"]["flow"]
    if img_size % f["patch_size"]:
        raise ConfigError(
            f"config key 'oracle.flow.patch_size': {f['patch_size']} does not divide the image size {img_size}"
        )
    if f["channels"] % f["head_dim"]:
        raise ConfigError(
            f"config key 'oracle.flow.head_dim': {f['head_dim']} does not divide channels={f['channels']}"
        )
    return {
        "in_channels": int(in_channels),
        "img_size": int(img_size),
        "patch_size": f["patch_size"],
        "channels": f["channels"],
        "num_blocks": f["num_blocks"],
        "layers_per_block": f["layers_per_block"],
        "head_dim": f["head_dim"],
        "num_classes": int(num_classes),
        "per_class": bool(config["oracle"]["per_class"]),
        "nvp": bool(f["nvp"]),
    }


def train_steps(train: Mapping, n_train: int) -> int:
    """Optimizer steps of flow training: `steps`, or ceil(epochs * n_train / batch_size)."""
    if train["steps"] is not None:
        return int(train["steps"])
    if n_train < 1:
        raise ConfigError("oracle.train.epochs: the training set is empty")
    return max(1, math.ceil(train["epochs"] * n_train / train["batch_size"]))


#: Keys of oracle.train that FlowTrainConfig takes as they are (steps and epochs become steps).
FLOW_TRAIN_KEYS = ("batch_size", "lr", "weight_decay", "warmup_steps", "grad_clip", "ema_decay", "noise_std",
                   "label_dropout", "checkpoint_every")


def flow_train_settings(train: Mapping, n_train: int, seed: int) -> dict:
    """The `oracle.flow_training.FlowTrainConfig` settings of `oracle.train` for `n_train`
    training images: its keys, the step count (`train_steps`) and the seed."""
    return {**{k: train[k] for k in FLOW_TRAIN_KEYS}, "steps": train_steps(train, n_train), "seed": int(seed)}
