"""oracle.io.layout and its use by the input checks: a damaged file whose record was re-signed
(a truncated split or image file, a zero-byte or cut checkpoint, a shard that lost classes, a
record that is not JSON) is refused in one line naming it, before any job reads it (issue 38
case 4). Real files of each format, made small; the end-to-end runs are in
tests/test_integrity_workflow.py."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from oracle.errors import DataError
from oracle.io.layout import check_layout


@pytest.fixture
def files(tmp_path):
    """One valid file of each format the layout check reads."""
    from oracle.io.images import write_images_h5
    from oracle.io.predictions import write_predictions
    from oracle.io.shards import ShardWriter
    from oracle.io.splits import make_splits, write_splits_h5
    from oracle.worlds import GaussianWorld, save_gaussian_world

    rng = np.random.default_rng(0)
    out = {"images": tmp_path / "train.h5", "splits": tmp_path / "base.h5", "shard": tmp_path / "shard-0000.h5",
           "world": tmp_path / "world.pt", "predictions": tmp_path / "pred.h5", "json": tmp_path / "history.json"}
    write_images_h5(out["images"], rng.integers(0, 255, (12, 1, 4, 4), dtype=np.uint8), np.arange(12) % 3,
                    ["a", "b", "c"])
    write_splits_h5(out["splits"], make_splits(12, 4, [0, 1]))
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 1.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(out["shard"], 3, (1, 2, 2), attrs, chunk_rows=4) as w:
        w.write(rng.normal(size=(9, 1, 2, 2)).astype(np.float32), np.zeros(9, int), np.zeros(9, int),
                rng.normal(size=(9, 3)), np.arange(9))
    save_gaussian_world(out["world"], GaussianWorld(torch.zeros(2, 4, dtype=torch.float64), std=1.0))
    write_predictions(out["predictions"], np.log(np.full((5, 3), 1 / 3)), np.arange(5), np.zeros(5, int))
    out["json"].write_text('{"epochs": [1, 2]}')
    return out


def _one_line(exc: pytest.ExceptionInfo, path) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg, msg
    return msg


def test_valid_files_pass(files):
    for path in files.values():
        check_layout(path)
    check_layout(files["json"].with_name("missing.json"))  # not there: the hash check's business


@pytest.mark.parametrize("name", ["images", "splits", "shard", "predictions"])
def test_a_truncated_hdf5_file_is_one_line(files, name):
    path = files[name]
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(DataError) as exc:
        check_layout(path)
    assert "is not a readable HDF5 file" in _one_line(exc, path) and "1000 bytes" in str(exc.value)


def test_a_zero_byte_or_cut_checkpoint_is_one_line(files):
    from oracle.io.state_dicts import read_checkpoint

    path = files["world"]
    whole = path.read_bytes()
    path.write_bytes(b"")
    with pytest.raises(DataError) as exc:
        check_layout(path)
    assert "is empty (0 bytes); expected a torch checkpoint" in _one_line(exc, path)
    # the readers too: a zero-byte file raised EOFError, which has no message (an IndexError here)
    with pytest.raises(DataError) as exc:
        read_checkpoint(path, "world file")
    assert "EOFError" in _one_line(exc, path)
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError) as exc:
        check_layout(path)
    assert "is unreadable" in _one_line(exc, path)


def test_a_safetensors_file_is_read_by_its_header(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "weights.safetensors"
    save_file({"w": torch.zeros(3)}, str(path))
    check_layout(path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(DataError) as exc:
        check_layout(path)
    assert "is not a readable safetensors file" in _one_line(exc, path)


def test_a_shard_of_the_wrong_shape_names_the_dataset_and_the_shape_expected(files):
    path = files["shard"]
    with h5py.File(path, "r+") as f:
        ll = f["loglik"][()]
        del f["loglik"]
        f.create_dataset("loglik", data=ll[:, :2])
    with pytest.raises(DataError) as exc:
        check_layout(path)
    assert "dataset loglik has shape (9, 2); expected (9, 3)" in _one_line(exc, path)


def test_images_and_predictions_of_the_wrong_layout(files):
    with h5py.File(files["images"], "r+") as f:
        del f["labels"]
        f.create_dataset("labels", data=np.zeros(5, dtype=np.int64))
    with pytest.raises(DataError) as exc:
        check_layout(files["images"])
    assert "labels int64 [5] beside 12 images" in _one_line(exc, files["images"])
    with h5py.File(files["predictions"], "r+") as f:
        del f["index"]
    with pytest.raises(DataError) as exc:
        check_layout(files["predictions"])
    assert "no dataset index" in _one_line(exc, files["predictions"])


def test_a_split_file_that_is_no_permutation(files):
    with h5py.File(files["splits"], "r+") as f:
        f["order/seed0"][0] = f["order/seed0"][1]
    with pytest.raises(DataError) as exc:
        check_layout(files["splits"])
    assert "not a permutation" in _one_line(exc, files["splits"])


def test_invalid_json(files):
    files["json"].write_text('{"epochs": [1,')
    with pytest.raises(DataError) as exc:
        check_layout(files["json"])
    assert "is not valid JSON" in _one_line(exc, files["json"])


def test_the_input_check_refuses_a_damaged_file_whose_record_was_re_signed(tmp_path, files, monkeypatch):
    """Bytes that agree with their (re-signed) record pass the hash check: the layout check
    refuses them, naming the command that remakes the file."""
    from oracle.workflow.provenance import write_record
    from oracle.workflow.provenance.input_identity import check_inputs

    monkeypatch.chdir(tmp_path)
    split = tmp_path / "results" / "r" / "splits" / "base.h5"
    split.parent.mkdir(parents=True)
    split.write_bytes(files["splits"].read_bytes()[:1000])
    write_record(split, rule="make_splits", wildcards={"world": "base"}, params={})
    with pytest.raises(DataError) as exc:
        check_inputs([str(split.relative_to(tmp_path))])
    msg = _one_line(exc, "results/r/splits/base.h5")
    assert "is not a readable HDF5 file" in msg and "remake it: snakemake --forcerun results/r/splits/base.h5" in msg


def test_an_unreadable_record_stops_the_start_check(tmp_path):
    """A record that is not JSON was taken for no record: its artifact passed unchecked."""
    from oracle.workflow.provenance.stale import PlannedJob, stale_reasons

    model = tmp_path / "model.pt"
    model.write_bytes(b"x")
    (tmp_path / "model.pt.prov.json").write_text('{"artifact": ')
    job = PlannedJob(rule="train_classifier", outputs=(str(model),), params={"seed": 0}, needrun=False)
    with pytest.raises(DataError) as exc:
        stale_reasons([job])
    assert f"snakemake --forcerun {model}" in _one_line(exc, model)
