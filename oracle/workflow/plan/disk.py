"""How much disk a run's sample shards take, known from the config before any job, and whether
the disk under the run folder holds it (checked when a run starts, rules: the Snakefile's
``onstart``).

The shards are the run's largest artifact by far (DESIGN: ``x`` float32 [n, C, H, W],
``loglik`` float64 [n, K], three int64 columns per row); data files, models and tables are small
beside them for every preset. The estimate counts the shards only, so it is a lower bound of what
the run writes. It needs each sample's shape: a Gaussian world's spec, or the data kind's native
shape (or ``data.image_size`` / ``data.channels`` where set); an ``npz`` or image-folder run
without ``data.image_size`` has no known shape before the data stage and is not estimated. K
(`sample_classes`) is counted where the config fixes it (`oracle.world_specs.known_num_classes`),
where the data kind has a fixed number of classes, or for the presets' data sets (both from
`oracle.io.data_sets.DATA_SETS`), else as 2 (a lower bound).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from oracle.io.data_sets import kind_facts, preset_data_set
from oracle.world_specs import gaussian_spec, known_num_classes, world_kind, world_specs

__all__ = ["disk_problem", "row_bytes", "sample_bytes", "sample_classes", "sample_shape"]

#: Bytes per sample row besides x and loglik: source_class, label, index (int64 each).
ROW_EXTRA_BYTES = 3 * 8


def sample_shape(config: Mapping) -> tuple[int, int, int] | None:
    """(C, H, W) of every oracle sample, or None when the data stage decides it."""
    if world_kind(config) == "gaussian":
        g = gaussian_spec(config)
        return g["channels"], g["image_size"], g["image_size"]
    data = config["data"]
    facts = kind_facts(data["kind"])
    side = data.get("image_size") or facts.side
    channels = data.get("channels") or facts.channels or 3  # colour unless the kind says otherwise
    return None if side is None else (int(channels), int(side), int(side))


def sample_classes(config: Mapping) -> int:
    """K of the samples as far as the config tells it (module docstring); 2 when only the data
    stage knows (a lower bound of the bytes)."""
    k = known_num_classes(config)
    if k is None and world_kind(config) != "gaussian":
        k = kind_facts(config["data"]["kind"]).num_classes
    if k is None and (preset := preset_data_set(config.get("run"))) is not None:
        k = preset.num_classes
    return int(k or 2)


def row_bytes(config: Mapping) -> int | None:
    """Bytes of one sample row in the shard format (x float32 [C, H, W], loglik float64 [K], three
    int64; HDF5's own overhead not counted), or None when the shape is unknown (`sample_shape`)."""
    shape = sample_shape(config)
    if shape is None:
        return None
    return 4 * shape[0] * shape[1] * shape[2] + 8 * sample_classes(config) + ROW_EXTRA_BYTES


def sample_bytes(config: Mapping) -> int | None:
    """Bytes of every world's sample shards (module docstring), or None when the shape is unknown."""
    row = row_bytes(config)
    if row is None:
        return None
    return sum(int(spec["n_total"]) for spec in world_specs(config).values()) * row


def disk_problem(config: Mapping, run_dir: str | os.PathLike) -> str | None:
    """One line when the file system of `run_dir` (or of its nearest existing parent) has less
    room than the shards still to write (`sample_bytes` less the shards already under
    ``<run_dir>/samples``); None when it holds them or the size is unknown."""
    need = sample_bytes(config)
    if need is None:
        return None
    run = Path(run_dir)
    there = sum(p.stat().st_size for p in (run / "samples").rglob("shard-*.h5")) if (run / "samples").is_dir() else 0
    probe = run
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if need - there <= free:
        return None
    return (f"config keys 'samples.n_total' / 'worlds.*.n_total': the sample shards alone take {_gib(need)} "
            f"({_gib(there)} written), more than the {_gib(free)} free under {probe}: lower n_total or free the disk")


def _gib(n: int) -> str:
    return f"{n / 2**30:,.1f} GiB"
