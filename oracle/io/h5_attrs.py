"""HDF5 attributes of the library's files (sample shards, predictions): what h5py can store,
and back to plain Python values."""

from __future__ import annotations

import json
from collections.abc import Mapping

import h5py
import numpy as np

from oracle.errors import ShardError
from oracle.io.atomic import to_jsonable


def to_attr(key: str, value):
    """A value h5py can store as an attribute (dicts and lists of strings become JSON)."""
    if isinstance(value, (str, bytes, bool, int, float, np.generic)):
        return value
    if isinstance(value, Mapping):
        return json.dumps(to_jsonable(value), sort_keys=True)
    try:
        import torch

        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
    except ImportError:  # pragma: no cover
        pass
    arr = np.asarray(value)
    if arr.dtype.kind in "biuf":
        return arr
    if arr.dtype.kind in "UO":
        return json.dumps(to_jsonable(value))
    raise ShardError(f"attribute {key}={value!r}: expected a number, string, array or dict")


def from_attr(value):
    """An attribute as a plain Python value (bytes decoded, numpy scalars unwrapped; arrays stay)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic):
        return value.item()
    return value


def file_attrs(f: h5py.File) -> dict:
    """The attributes of an open sample file as plain Python values (arrays stay numpy)."""
    return {k: from_attr(v) for k, v in f.attrs.items()}


_attrs_dict = file_attrs  # the old private name, used by oracle.experiments


def same_attr(a, b) -> bool:
    """Two attribute values are equal (strings as text, numbers and arrays elementwise)."""
    a, b = from_attr(a), from_attr(b)
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return np.array_equal(np.asarray(a), np.asarray(b))
