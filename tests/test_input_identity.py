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


@pytest.fixture(autouse=True)
def _stand_in_files(monkeypatch):
    """The files here are stand-ins for their artifacts (a flow file of 15 bytes, a shard with
    only loglik): what is tested is identity, not layout (tests/test_input_layout.py)."""
    monkeypatch.setattr("oracle.workflow.provenance.input_identity.check_layout", lambda path: None)


def _config(**worlds):
    return {"run": "r", "seed": 0,
            "oracle": {"world": "flow", "flow": {"channels": 8}, "per_class": False, "train": {"steps": 3}},
            "worlds": {"base": {"prior": None, "label_temperature": 1.0, "base_temperature": 1.0}, **worlds},
            "samples": {"n_total": 20, "n_shards": 2, "batch_size": 8, "class_batch": None, "precision": "auto",
                        "precision_tolerance": 1e-4, "precision_rows": 4},
            "splits": {"test_size": 5}, "data": {"kind": "digits"}}


def _record(path, rule, cfg, wildcards=None, **kwargs):
    """The record the rule's job writes (params: what its settings are is the start check's
    question, not the input check's)."""
    write_record(path, rule=rule, wildcards=wildcards or {}, params={"seed": cfg["seed"]}, **kwargs)


def _flow(tmp_path):
    flow = tmp_path / RUN / "oracle" / "flow.pt"
    flow.parent.mkdir(parents=True, exist_ok=True)
    flow.write_bytes(b"the frozen flow")
    _record(flow, "oracle_train", _config())
    return flow


def _shard(tmp_path, cfg, world="base", shard=0, *, oracle=None, seed=None, base_temperature=None,
           world_name=None, record_world=None):
    """A samples shard with the attributes `oracle.sampling` writes and the record `sample_shard` writes."""
    path = tmp_path / RUN / "samples" / world / f"shard-{shard:04d}.h5"
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        f.create_dataset("loglik", data=np.zeros((3, 10)))
        f.attrs.update({"oracle_sha256": oracle or file_sha256(tmp_path / RUN / "oracle" / "flow.pt"),
                        "world_name": world_name or world, "prior": np.full(10, 0.1),
                        "label_temperature": 1.0, "base_temperature": base_temperature or 1.0,
                        "seed": cfg["seed"] if seed is None else seed, "shard": shard, "n_shards": 2})
    wildcards = {"world": record_world or world, "shard": f"{shard:04d}"}
    write_record(path, rule="sample_shard", wildcards=wildcards, params={"samples": cfg["samples"]})
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


def test_settings_are_compared_by_the_start_check_not_by_the_input_check(run):
    """A shard made under another samples.n_total: what its job's params were is the start
    check's question (oracle.workflow.provenance.stale, every job of the DAG before any runs),
    so the input check, which cannot know the params of another rule's job, passes it."""
    cfg = _config()
    shard = _shard(run, cfg)
    cfg["samples"]["n_total"] = 40
    assert check_inputs([str(shard)], cfg) == [shard]


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
    _record(merged, "merge_samples", cfg, {"world": "base"}, inputs=[str(shard)],
            extra={"references": [f"{RUN}/samples/base/shard-0000.h5"]})
    assert check_inputs([str(merged)], cfg) == [merged, shard]
    other = _shard(run, cfg, oracle=file_sha256(run / RUN / "oracle" / "flow.pt"))  # rewritten, same identity
    with h5py.File(other, "r+") as f:
        f["loglik"][0, 0] = 3.0
    _record(other, "sample_shard", cfg, {"world": "base", "shard": "0000"})
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


# ----------------------------------------------------------------------------- issue 31
def test_an_input_made_from_another_version_of_its_input_is_refused(run):
    """Issue 31 case 3: an artifact (with its own consistent record) made from another file than
    the one its input's place holds now, e.g. a model swapped in from a run with another seed."""
    cfg = _config()
    shard = _shard(run, cfg)
    constants = run / RUN / "samples" / "base" / "constants.json"
    constants.write_text("{}")
    _record(constants, "world_constants", {**cfg, "oracle": {**cfg["oracle"], "world": "flow"}}, {"world": "base"},
            inputs=[str(shard)])
    assert check_inputs([str(constants)], cfg) == [constants]
    with h5py.File(shard, "r+") as f:  # the shard remade (another run's): its own record is consistent
        f["loglik"][0, 0] = 3.0
    _record(shard, "sample_shard", cfg, {"world": "base", "shard": "0000"})
    clear_hash_cache()
    assert check_inputs([str(shard)], cfg) == [shard]
    with pytest.raises(DataError, match=r"constants\.json is not the artifact this run's rule would make: it was made "
                                        r"from another results/r/samples/base/shard-0000\.h5 .*--forcerun"):
        check_inputs([str(constants)], cfg)


def test_a_linked_run_of_another_checkout_is_refused_a_copy_is_not(run, tmp_path_factory, monkeypatch):
    """Issue 31 case 1: results/<run> linked to another checkout's run is that run's, not this one's."""
    other = tmp_path_factory.mktemp("other-clone")
    monkeypatch.chdir(other)
    cfg = _config()
    _flow(other)
    _shard(other, cfg)
    monkeypatch.chdir(run)
    shutil.rmtree(run / RUN)
    (run / RUN).symlink_to(other / RUN)
    shard = f"{RUN}/samples/base/shard-0000.h5"
    with pytest.raises(DataError, match=r"is another run's artifact: it lies at .*other-clone.* \(reached through a "
                                        r"link\) and its record was written for .*other-clone"):
        check_inputs([shard], cfg)
    (run / RUN).unlink()
    shutil.copytree(other / RUN, run / RUN)  # a copy (cp -a) is this clone's to use
    clear_hash_cache()
    assert [str(p) for p in check_inputs([shard], cfg)] == [shard]
