"""Provenance records: hashes checked against hashlib directly, params and their hashes, code versions."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

import h5py
import numpy as np
import pytest

from oracle.errors import ConfigError, DataError
from oracle.io.hashing import dir_sha256, file_sha256
from oracle.workflow.provenance.params import job_params, params_differ, params_hash
from oracle.code_version import code_version
from oracle.workflow.provenance import read_record, record_path, resolve_recorded_path, write_record


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_file_record_fields(tmp_path, monkeypatch):
    sm = pytest.importorskip("snakemake.iocontainers")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    a, b = tmp_path / "in" / "a.bin", tmp_path / "in" / "b.txt"
    a.write_bytes(b"\x00\x01" * 1000)
    b.write_text("hello")
    out = tmp_path / "results" / "run" / "metrics.json"
    out.parent.mkdir(parents=True)
    out.write_text('{"acc": 0.9}')
    params = sm.Params(fromdict={"classifiers": {"lr": 0.1, "epochs": (3, 4)}, "seed": np.int64(7)})
    t0 = time.time() - 2.0
    # Snakemake's own containers, as a script receives them in `snakemake.wildcards/.input`
    wildcards = sm.Wildcards(fromdict={"arch": "resnet", "N": "100"})
    inputs = sm.InputFiles([str(a), str(b)])
    inputs._set_name("samples", 0)
    side = write_record(out, rule="train_classifier", wildcards=wildcards, params=params, inputs=inputs,
                        seed=3, started=t0, extra={"note": "x"})
    assert side == tmp_path / "results" / "run" / "metrics.json.prov.json" == record_path(out)
    rec = json.loads(side.read_text())
    assert rec == read_record(out)
    assert rec["id"] == "results/run/metrics.json" and rec["artifact"]["path"] == rec["id"]
    assert rec["artifact"]["sha256"] == _sha(b'{"acc": 0.9}') and rec["artifact"]["kind"] == "file"
    assert rec["inputs"] == {"in/a.bin": _sha(b"\x00\x01" * 1000), "in/b.txt": _sha(b"hello")}
    assert rec["rule"] == "train_classifier" and rec["wildcards"] == {"arch": "resnet", "N": "100"}
    assert rec["params"] == {"classifiers": {"lr": 0.1, "epochs": [3, 4]}, "seed": 7}
    canonical = '{"classifiers":{"epochs":[3,4],"lr":0.1},"seed":7}'
    assert rec["params_sha256"] == _sha(canonical.encode()) == params_hash(job_params(params))
    assert rec["seed"] == 3 and rec["extra"] == {"note": "x"}
    assert 2.0 <= rec["wall_time_s"] < 60
    assert rec["created_utc"].endswith("Z") and rec["hostname"]
    assert rec["packages"]["python"] and rec["packages"]["numpy"] == np.__version__
    assert rec["code"]["commit"] and "device" in rec
    assert sorted(os.listdir(out.parent)) == ["metrics.json", "metrics.json.prov.json"]


def test_directory_record_and_hash(tmp_path):
    d = tmp_path / "shards"
    (d / "sub").mkdir(parents=True)
    (d / "b.h5").write_bytes(b"bbb")
    (d / "sub" / "a.txt").write_bytes(b"a")
    before = dir_sha256(d)
    expected = _sha(f"b.h5\0{_sha(b'bbb')}\nsub/a.txt\0{_sha(b'a')}\n".encode())
    assert before == expected
    (d / "b.h5.prov.json").write_text("{}")  # sidecars inside do not change the tree hash
    assert dir_sha256(d) == before
    side = write_record(d, rule="sample")
    assert side == tmp_path / "shards.prov.json"
    rec = read_record(d)
    assert rec["artifact"]["kind"] == "directory" and rec["artifact"]["sha256"] == before
    assert rec["artifact"]["files"] == 2 and rec["artifact"]["size"] == 4


def test_job_params_are_the_named_params_but_callables_in_canonical_form():
    sm = pytest.importorskip("snakemake.iocontainers")
    params = sm.Params(fromdict={"spec": {"b": (1, 2), "a": np.float32(0.5)}, "seed": 0, "fn": len})
    assert job_params(params) == {"seed": 0, "spec": {"a": 0.5, "b": [1, 2]}}
    assert list(job_params(params)) == ["seed", "spec"]
    assert job_params(None) == {} and job_params({"x": {1: "a"}}) == {"x": {"1": "a"}}


def test_params_hash_is_order_independent_and_sensitive():
    assert params_hash({"a": 1, "b": [1, 2]}) == params_hash({"b": (1, 2), "a": 1})
    assert params_hash({"a": 1}) != params_hash({"a": 2})
    assert params_hash({"a": 1}) == _sha(b'{"a":1}')


def test_params_differ_names_each_changed_leaf():
    rec = {"training": {"lr": 0.001, "epochs": 3, "archs": {"vit.b16": {"size": 224}}}, "seed": 0}
    assert params_differ(rec, rec) == []
    now = {"training": {"lr": 0.003, "epochs": 3, "archs": {"vit.b16": {"size": 384}}, "new": 1}, "device": "cpu"}
    assert params_differ(rec, now) == [
        "params training.lr was 0.001, is 0.003", "params training.archs[vit.b16].size was 224, is 384",
        "params training.new was <missing>, is 1", "params seed was 0, is <missing>",
        "params device was <missing>, is cpu"]
    assert params_differ({"xs": (1, 2)}, {"xs": [1, 2]}) == []  # a tuple param is stored as a list
    long = params_differ({"t": "a" * 100}, {"t": "b"})[0]
    assert long.startswith("params t was aaa") and "..." in long and len(long) < 100


def test_errors_leave_no_record(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        write_record(tmp_path / "nope.h5", rule="r")
    art = tmp_path / "a"
    art.write_text("a")
    with pytest.raises(DataError, match="missing_input"):
        write_record(art, rule="r", inputs=[tmp_path / "missing_input"])
    assert not record_path(art).exists()
    with pytest.raises(DataError, match="no provenance record"):
        read_record(art)
    assert read_record(art, missing_ok=True) is None
    with pytest.raises(ConfigError, match="rule"):
        write_record(art, rule="")
    record_path(art).write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        read_record(art)


def test_hash_cache_sees_changes(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"one")
    assert file_sha256(p) == _sha(b"one")
    st = p.stat()
    p.write_bytes(b"two")  # same size: only the mtime tells the cache
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert file_sha256(p) == _sha(b"two")


def test_h5_attribute_copy(tmp_path):
    path = tmp_path / "all.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(4.0))
    write_record(path, rule="merge", seed=1, h5_attr=True)
    with h5py.File(path, "r") as f:
        inner = json.loads(f.attrs["provenance"])
    assert inner["rule"] == "merge" and "sha256" not in inner["artifact"]
    # the sidecar's hash covers the file as it is now, attribute included
    assert read_record(path)["artifact"]["sha256"] == _sha(path.read_bytes())
    record_path(path).unlink()
    assert read_record(path)["rule"] == "merge"  # falls back to the attribute


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


def test_code_version_in_a_repo(tmp_path):
    outside = tmp_path / "plain"
    outside.mkdir()
    assert code_version(outside)["commit"] == "unknown" and code_version(outside)["dirty"] is None
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "m.py").write_text("x = 1\n")
    _git(repo, "add", "m.py")
    _git(repo, "commit", "-q", "-m", "c")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    clean = code_version(repo)
    assert clean["commit"] == head and clean["dirty"] is False
    (repo / "m.py").write_text("x = 2\n")
    sub = repo / "sub"
    sub.mkdir()
    dirty = code_version(sub)  # any folder of the repo; a new path, so not cached
    assert dirty["commit"] == head and dirty["dirty"] is True and dirty["diff_sha256"]


def test_resolve_recorded_path_after_moving_the_tree(tmp_path, monkeypatch):
    old = tmp_path / "old"
    (old / "results").mkdir(parents=True)
    monkeypatch.chdir(old)
    (old / "raw.txt").write_text("r")
    art = old / "results" / "a.txt"
    art.write_text("a")
    write_record(art, rule="r", inputs=[old / "raw.txt"])
    new = tmp_path / "new"
    old.rename(new)
    monkeypatch.chdir(tmp_path)
    rec = read_record(new / "results" / "a.txt")
    assert resolve_recorded_path("raw.txt", rec, new / "results" / "a.txt") == new / "raw.txt"


def test_inputs_as_mapping_of_lists(tmp_path):
    files = []
    for name in ("p", "q", "r"):
        (tmp_path / name).write_text(name)
        files.append(tmp_path / name)
    art = tmp_path / "out"
    art.write_text("o")
    write_record(art, rule="r", inputs={"shards": files[:2], "flow": str(files[2])})
    got = read_record(art)["inputs"]
    assert {k.rsplit("/", 1)[-1]: v for k, v in got.items()} == {n: _sha(n.encode()) for n in "pqr"}


def test_atomic_output_permissions_and_cleanup(tmp_path):
    from oracle.io.atomic import atomic_output

    target = tmp_path / "sub" / "a.txt"
    with atomic_output(target) as tmp:
        tmp.write_text("x")
    mask = os.umask(0)
    os.umask(mask)
    assert (target.stat().st_mode & 0o777) == 0o666 & ~mask
    with pytest.raises(RuntimeError):
        with atomic_output(tmp_path / "sub" / "b.txt") as tmp:
            tmp.write_text("partial")
            raise RuntimeError("crash")
    assert sorted(os.listdir(tmp_path / "sub")) == ["a.txt"]


def test_a_script_is_unchanged_when_its_bytes_are_those_the_records_hold(tmp_path):
    """`stale.script_unchanged` (what Snakemake's "code changed" asks through the engine): the
    script's sha256 now against each output's record, whatever the files' mtimes."""
    from oracle.workflow.provenance.stale import script_unchanged

    script = tmp_path / "scripts" / "make.py"
    script.parent.mkdir()
    script.write_text("print('a')\n")
    out, bare = tmp_path / "out.txt", tmp_path / "bare.txt"
    out.write_text("x")
    bare.write_text("y")
    write_record(out, rule="make", params={"a": 1})
    rec = json.loads(record_path(out).read_text())
    rec["code"]["files"]["scripts/make.py"] = file_sha256(script)
    record_path(out).write_text(json.dumps(rec))
    os.utime(script, (time.time() + 100, time.time() + 100))  # newer than the output: content decides
    assert script_unchanged([str(out)], script, root=tmp_path)
    assert not script_unchanged([str(out), str(bare)], script, root=tmp_path)  # an output without a record
    assert not script_unchanged([str(out)], None, root=tmp_path) and not script_unchanged([], script, root=tmp_path)
    script.write_text("print('b')\n")  # an edited script
    assert not script_unchanged([str(out)], script, root=tmp_path)
