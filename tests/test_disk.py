"""oracle.workflow.plan.disk: the sample shards' size from the config, and a run whose disk
cannot hold them refused before any job (issue 38 case 5)."""

from __future__ import annotations

import copy
import shutil
from collections import namedtuple
from pathlib import Path


from oracle.workflow.plan.disk import disk_problem, sample_bytes, sample_shape
from oracle.workflow.plan.config import effective_config

REPO = Path(__file__).resolve().parents[1]


def _config(name: str) -> dict:
    return effective_config(REPO / name)


def test_shard_bytes_follow_the_shard_format():
    smoke = _config("tests/smoke/config.yaml")  # digits: 1x8x8, its 10 classes
    assert sample_shape(smoke) == (1, 8, 8)
    assert sample_bytes(smoke) == 500 * (4 * 64 + 8 * 10 + 3 * 8)
    gauss = _config("tests/smoke/gaussian.yaml")  # its spec: 2 classes over 1x8x8
    assert sample_bytes(gauss) == 4000 * (4 * 64 + 8 * 2 + 3 * 8)
    afhq = _config("presets/afhq256.yaml")
    assert sample_shape(afhq) == (3, 256, 256)
    assert sample_bytes(afhq) >= 52000 * 4 * 3 * 256 * 256  # 38 GiB of x alone
    folder = copy.deepcopy(smoke)
    folder["data"] = {**folder["data"], "kind": "npz", "image_size": None}
    assert sample_shape(folder) is None and sample_bytes(folder) is None and disk_problem(folder, "results/x") is None


def test_a_disk_that_cannot_hold_the_shards_is_one_line(tmp_path, monkeypatch):
    cfg = _config("tests/smoke/config.yaml")
    cfg["samples"]["n_total"] = 10**8  # 33.5 GiB of digits shards (360 B a row)
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 0, 2**30))
    run = tmp_path / "results" / "smoke"  # not there yet: its nearest parent's disk counts
    msg = disk_problem(cfg, run)
    assert msg is not None and "\n" not in msg and "'samples.n_total'" in msg
    assert "take 33.5 GiB (0.0 GiB written), more than the 1.0 GiB free under " + str(tmp_path) in msg
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 0, 2**40))
    assert disk_problem(cfg, run) is None
