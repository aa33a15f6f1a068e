"""A job uses an input only if it is the artifact this run's rule would have made (issue 19):
oracle.workflow.provenance.input_identity on small hand-made runs (fast). The end-to-end attacks on a
smoke run are in tests/test_integrity_workflow.py."""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from oracle.errors import DataError
from oracle.io.hashing import clear_hash_cache, file_sha256
from oracle.workflow.provenance.input_identity import check_inputs, check_pending_inputs, run_relative
from oracle.workflow.jobs import verify_inputs
from oracle.workflow.provenance import write_record

RUN = "results/r"


def _config(**worlds):
    return {"run": "r", "seed": 0, "oracle": {"world": "flow"},
            "worlds": {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0}, **worlds},
            "samples": {"n_total": 20, "n_shards": 2, "batch_size": 8},
            "splits": {"test_size": 5}, "data": {"kind": "digits"}}


def _flow(tmp_path):
    flow = tmp_path / RUN / "oracle" / "flow.pt"
    flow.parent.mkdir(parents=True, exist_ok=True)
    flow.write_bytes(b"the frozen flow")
    write_record(flow, rule="oracle_train", config={}, config_keys=[])
    return flow


def _shard(tmp_path, cfg, world="base", shard=0, *, oracle=None, seed=None, base_temperature=None,
           world_name=None, record_world=None, keys=("seed", "samples.n_total")):
    """A samples shard with the attributes `oracle.sampling` writes and the record `sample_shard` writes."""
    path = tmp_path / RUN / "samples" / world / f"shard-{shard:04d}.h5"
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.create_dataset("loglik", data=np.zeros((3, 10)))
        f.attrs.update({"oracle_sha256": oracle or file_sha256(tmp_path / RUN / "oracle" / "flow.pt"),
                        "world_name": world_name or world, "prior": np.full(10, 0.1),
                        "label_temperature": 1.0, "base_temperature": base_temperature or 1.0,
                        "seed": cfg["seed"] if seed is None else seed, "shard": shard, "n_shards": 2})
    write_record(path, rule="sample_shard", wildcards={"world": record_world or world, "shard": f"{shard:04d}"},
                 config=cfg, config_keys=list(keys))
    return path


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clear_hash_cache()
    _flow(tmp_path)
    return tmp_path


def test_run_relative_ignores_where_the_results_tree_lies(tmp_path):
    assert run_relative("results/r/samples/base/all.h5") == "samples/base/all.h5"
    assert run_relative(tmp_path / "copy" / "results" / "other" / "samples" / "base" / "all.h5") == "samples/base/all.h5"
    assert run_relative(tmp_path / "data" / "x.npz") is None


def test_an_own_shard_passes(run):
    cfg = _config()
    shard = _shard(run, cfg)
    assert check_inputs([str(shard), str(run / RUN / "oracle" / "flow.pt")], cfg) == [
        shard, run / RUN / "oracle" / "flow.pt"]
    assert verify_inputs({"samples": str(shard)}, cfg) == [shard]


def test_a_shard_of_another_world_is_refused_where_it_lies(run):
    """Issue 19 case 1: world hot's shard with its sidecar copied into samples/base/."""
    cfg = _config(hot={"base_temperature": 1.2})
    hot = _shard(run, cfg, world="hot", base_temperature=1.2, seed=7)
    base = run / RUN / "samples" / "base" / "shard-0000.h5"
    base.parent.mkdir(parents=True)
    shutil.copy(hot, base)
    shutil.copy(str(hot) + ".prov.json", str(base) + ".prov.json")
    with pytest.raises(DataError, match=r"shard-0000\.h5 is not the artifact this run's rule would make: its record "
                                        r"is the record of results/r/samples/hot/shard-0000\.h5") as err:
        check_inputs([str(base)], cfg)
    assert "\n" not in str(err.value) and "--forcerun" in str(err.value)


def test_shard_attributes_must_be_the_worlds(run):
    cfg = _config(hot={"base_temperature": 1.2})
    # a record that names this place, over a file of another world (a forged or stale record)
    bad = _shard(run, cfg, world="base", world_name="hot")
    with pytest.raises(DataError, match="holds samples of world 'hot', not of world 'base'"):
        check_inputs([str(bad)], cfg)
    bad = _shard(run, cfg, world="base", base_temperature=1.2)
    with pytest.raises(DataError, match="base_temperature is 1.2, world 'base' has 1.0"):
        check_inputs([str(bad)], cfg)
    bad = _shard(run, cfg, world="base", seed=1)
    with pytest.raises(DataError, match="drawn with seed 1, world 'base' has seed 0"):
        check_inputs([str(bad)], cfg)
    bad = _shard(run, cfg, world="base", oracle="f" * 64)
    with pytest.raises(DataError, match="drawn from another oracle"):
        check_inputs([str(bad)], cfg)
    bad = _shard(run, cfg, world="base", record_world="hot")
    with pytest.raises(DataError, match="wildcard world=hot does not match its place"):
        check_inputs([str(bad)], cfg)


def test_an_input_made_under_other_config_values_is_refused(run):
    cfg = _config()
    shard = _shard(run, cfg)
    cfg["seed"] = 1
    with pytest.raises(DataError, match=r"made with seed=0, the config now has 1"):
        check_inputs([str(shard)], cfg)
    cfg["seed"] = 0
    cfg["samples"]["n_total"] = 40
    with pytest.raises(DataError, match=r"samples.n_total=20"):
        check_inputs([str(shard)], cfg)


def test_a_record_less_file_is_raw_only_outside_results_and_named_by_the_config(run):
    """Issue 19 case 2: a shard whose record was deleted is not raw data."""
    cfg = _config()
    shard = _shard(run, cfg)
    shard.with_name(shard.name + ".prov.json").unlink()
    with pytest.raises(DataError, match=r"shard-0000\.h5 has no provenance record: it is not an artifact"):
        check_inputs([str(shard)], cfg)
    with pytest.raises(DataError, match="no provenance record"):
        check_inputs([str(shard)], None)  # without a config too: it lies under results/
    raw = run / "raw" / "weights.pt"
    raw.parent.mkdir()
    raw.write_bytes(b"w")
    with pytest.raises(DataError, match="the config names no such raw file"):
        check_inputs([str(raw)], cfg)
    cfg["validation"] = {"resnet_weights": str(raw)}
    assert check_inputs([str(raw)], cfg) == []
    folder = run / "afhq"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "a.png").write_bytes(b"png")
    cfg["data"] = {"kind": "image_folder", "root": str(folder)}
    assert check_inputs([str(folder / "train")], cfg) == []


def test_a_merged_file_checks_its_shards_against_its_own_record(run):
    """Issue 19 case 1b: a shard swapped (with its own consistent sidecar) behind all.h5 is
    not the one all.h5 was made from."""
    cfg = _config()
    shard = _shard(run, cfg)
    merged = run / RUN / "samples" / "base" / "all.h5"
    merged.write_bytes(b"virtual")
    write_record(merged, rule="merge_samples", wildcards={"world": "base"}, config=cfg, config_keys=[],
                 inputs=[str(shard)], extra={"references": [f"{RUN}/samples/base/shard-0000.h5"]})
    assert check_inputs([str(merged)], cfg) == [merged, shard]
    other = _shard(run, cfg, oracle=file_sha256(run / RUN / "oracle" / "flow.pt"))  # rewritten, same identity
    with h5py.File(other, "r+") as f:
        f["loglik"][0, 0] = 3.0
    write_record(other, rule="sample_shard", wildcards={"world": "base", "shard": "0000"}, config=cfg,
                 config_keys=["seed"])
    clear_hash_cache()
    with pytest.raises(DataError, match=r"shard-0000\.h5 is not the file .*all\.h5 was made from"):
        check_inputs([str(merged)], cfg)


def test_pending_inputs_skip_what_the_run_remakes(run):
    cfg = _config()
    shard = _shard(run, cfg)
    shard.with_name(shard.name + ".prov.json").unlink()
    jobs = [[str(shard), str(run / RUN / "oracle" / "flow.pt")], [str(run / RUN / "missing.json")]]
    with pytest.raises(DataError, match="no provenance record"):
        check_pending_inputs(jobs, [], cfg)
    assert check_pending_inputs(jobs, [str(shard)], cfg) == [run / RUN / "oracle" / "flow.pt"]


def test_record_json_is_what_the_check_reads(run):
    """The place check reads the sidecar's id: moving a record's target elsewhere in the same
    run is refused even with the bytes unchanged."""
    cfg = _config()
    shard = _shard(run, cfg)
    moved = run / RUN / "samples" / "base" / "shard-0001.h5"
    shutil.copy(shard, moved)
    rec = json.loads(shard.with_name(shard.name + ".prov.json").read_text())
    moved.with_name(moved.name + ".prov.json").write_text(json.dumps(rec))
    with pytest.raises(DataError, match="is the record of results/r/samples/base/shard-0000.h5"):
        check_inputs([str(moved)], cfg)
