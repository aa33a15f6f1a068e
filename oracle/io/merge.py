"""Merging sample shards: one HDF5 file of virtual datasets over the shards (no copy).

Source paths are stored relative to the merged file, so a samples folder can be moved as a
whole; `oracle.io.shards.open_samples` checks every source shard when the merged file is opened.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import h5py
import numpy as np

from oracle.errors import ShardError
from oracle.io.atomic import to_jsonable
from oracle.io.h5_attrs import file_attrs, same_attr
from oracle.io.shards import (DATASETS, DTYPES, FILL, MERGE_KEYS, PER_SHARD_ATTRS, PRECISION_BOUNDS, REQUIRED_ATTRS, open_samples,
                              partial_path)


def merge_shards(paths: Iterable[str | os.PathLike], out_path: str | os.PathLike) -> Path:
    """Write ``out_path``: virtual datasets concatenating the shards in the given order.

    No sample data is copied. Source paths are stored relative to ``out_path``'s folder.
    Refuses (ShardError) incomplete shards, shards whose world attributes disagree
    (``MERGE_KEYS``: oracle, prior, temperatures, K, event shape, seed, n_shards, format) and
    overlapping global indices. The merged file gets the common attributes, ``shards``
    (JSON list of relative paths), ``shard_ids``, ``code_version`` (the common one, or
    ``"mixed"`` with the list in ``code_versions``) and ``complete`` last; it is written to a
    temporary name and renamed.
    """
    out_path = Path(out_path)
    paths = [Path(p) for p in paths]
    if not paths:
        raise ShardError(f"{out_path}: no shards to merge")
    if any(p.resolve() == out_path.resolve() for p in paths):
        raise ShardError(f"{out_path}: the merged file cannot also be one of its shards")
    infos = []
    for p in paths:
        with open_samples(p) as f:
            if any(f[name].is_virtual for name in DATASETS):
                raise ShardError(f"{p}: is itself a merged file; merge the original shards")
            attrs = file_attrs(f)
            missing = [k for k in (*REQUIRED_ATTRS, "format_version", "num_classes", "event_shape")
                       if k not in attrs]
            if missing:
                raise ShardError(f"{p}: missing attribute(s) {missing}")
            infos.append({"path": p, "attrs": attrs, "n": f["index"].shape[0],
                          "shapes": {name: f[name].shape for name in DATASETS},
                          "index": f["index"][()]})
    ref = infos[0]
    for info in infos[1:]:
        for key in MERGE_KEYS:
            if not same_attr(info["attrs"][key], ref["attrs"][key]):
                raise ShardError(
                    f"{info['path']}: attribute {key}={to_jsonable(info['attrs'][key])!r} disagrees with "
                    f"{ref['path']} ({to_jsonable(ref['attrs'][key])!r}); shards of one sample set must agree"
                )
    all_index = np.concatenate([i["index"] for i in infos])
    uniq, counts = np.unique(all_index, return_counts=True)
    if (counts > 1).any():
        dup = int(uniq[counts > 1][0])
        where = [str(i["path"]) for i in infos if (i["index"] == dup).any()]
        raise ShardError(f"{out_path}: index {dup} occurs in more than one place: {where}")

    total = sum(i["n"] for i in infos)
    K = int(ref["attrs"]["num_classes"])
    event = tuple(int(s) for s in np.asarray(ref["attrs"]["event_shape"]))
    shapes = {"x": (total, *event), "source_class": (total,), "label": (total,), "loglik": (total, K), "index": (total,)}
    out_dir = out_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    rel = [os.path.relpath(i["path"].resolve(), out_dir.resolve()) for i in infos]
    layouts = {name: h5py.VirtualLayout(shape=shapes[name], dtype=DTYPES[name]) for name in DATASETS}
    start = 0
    for info, r in zip(infos, rel):
        stop = start + info["n"]
        for name in DATASETS:
            if info["n"]:
                layouts[name][start:stop] = h5py.VirtualSource(r, name, shape=info["shapes"][name])
        start = stop

    code_versions = [str(i["attrs"]["code_version"]) for i in infos]
    tmp = partial_path(out_path)
    try:
        with h5py.File(tmp, "w", track_order=True) as f:
            for name in DATASETS:
                f.create_virtual_dataset(name, layouts[name], fillvalue=FILL[name])
            for key, value in ref["attrs"].items():
                if key in PER_SHARD_ATTRS:
                    continue
                # every attribute all shards agree on describes the merged set too
                if all(key in i["attrs"] and same_attr(i["attrs"][key], value) for i in infos):
                    f.attrs[key] = value
            same_code = len(set(code_versions)) == 1
            f.attrs["code_version"] = code_versions[0] if same_code else "mixed"
            if not same_code:
                f.attrs["code_versions"] = json.dumps(code_versions)
            if all("precision" in i["attrs"] for i in infos):
                modes = {str(i["attrs"]["precision"]) for i in infos}
                f.attrs["precision"] = modes.pop() if len(modes) == 1 else "mixed"
                for key in PRECISION_BOUNDS:
                    f.attrs[key] = max(float(i["attrs"][key]) for i in infos)
            f.attrs["shard"] = -1
            f.attrs["shards"] = json.dumps(rel)
            f.attrs["shard_ids"] = np.asarray([int(i["attrs"]["shard"]) for i in infos], dtype=np.int64)
            f.attrs["merged"] = True
            f.attrs["complete"] = True
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out_path
