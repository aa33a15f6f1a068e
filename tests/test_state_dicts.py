"""oracle.io.state_dicts: the one reader of every weight file."""

from __future__ import annotations

import pytest
import torch

from oracle.errors import DataError
from oracle.io.state_dicts import read_checkpoint, read_state_dict

SD = {"a.weight": torch.arange(6.0).reshape(2, 3), "a.bias": torch.zeros(2)}


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("wrap", [
    lambda sd: sd,
    lambda sd: {"state_dict": sd, "epoch": 3},
    lambda sd: {"model": sd, "optimizer": {}},
    lambda sd: {"state_dict_ema": sd, "state_dict": {"x": torch.ones(1)}},  # the EMA weights first
    lambda sd: {f"module.{k}": v for k, v in sd.items()},  # DistributedDataParallel
    lambda sd: {"model": {f"_orig_mod.{k}": v for k, v in sd.items()}},  # torch.compile
])
def test_every_nesting_and_wrapper_prefix_gives_the_same_state_dict(tmp_path, wrap):
    path = tmp_path / "w.pth"
    torch.save(wrap(SD), path)
    assert _same(read_state_dict(path, "weights file"), SD)


def test_a_prefix_on_only_some_keys_is_kept(tmp_path):
    path = tmp_path / "w.pth"
    torch.save({"module.a": torch.ones(1), "b": torch.ones(1)}, path)
    assert set(read_state_dict(path, "weights file")) == {"module.a", "b"}


def test_safetensors(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file(SD, str(path))
    assert _same(read_state_dict(path, "weights file"), SD)


def test_missing_truncated_and_foreign_files_name_the_file_and_key(tmp_path):
    with pytest.raises(DataError, match=r"weights file '.*nope\.pth' \(config key k\.x\) does not exist"):
        read_state_dict(tmp_path / "nope.pth", "weights file", "k.x")
    path = tmp_path / "w.pth"
    torch.save(SD, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(DataError, match=rf"'{path}'.*unreadable.*truncated") as err:
        read_state_dict(path, "weights file")
    assert "\n" not in str(err.value)
    torch.save([1, 2, 3], path)
    with pytest.raises(DataError, match="does not hold a state dict of tensors"):
        read_state_dict(path, "weights file")
    torch.save({"lr": 0.1, "step": 3}, path)
    with pytest.raises(DataError, match="does not hold a state dict of tensors"):
        read_state_dict(path, "weights file")
    assert read_checkpoint(path, "checkpoint") == {"lr": 0.1, "step": 3}
