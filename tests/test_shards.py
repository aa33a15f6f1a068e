"""Shard format: streaming writes, crash safety, verification, virtual merge."""

from __future__ import annotations

import gc
import shutil
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import h5py
import numpy as np
import pytest

from oracle.errors import ShardError
from oracle.io.merge import merge_shards
from oracle.io.shards import (FORMAT_VERSION, REQUIRED_ATTRS, ShardWriter, open_samples, partial_path, read_shard,
                              verify_shard)

K = 4
EVENT = (1, 4, 4)


def attrs(shard=0, **over):
    a = {"oracle_sha256": "ab" * 32, "prior": [0.1, 0.2, 0.3, 0.4], "label_temperature": 1.0,
         "base_temperature": 1.0, "seed": 3, "shard": shard, "n_shards": 3, "code_version": "test"}
    a.update(over)
    return a


def rows(n, start=0, seed=0, k=K, event=EVENT):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, *event)).astype(np.float32), rng.integers(0, k, n), rng.integers(0, k, n),
            rng.normal(size=(n, k)) - 50.0, np.arange(start, start + n, dtype=np.int64))


def write_shard(path, n, shard=0, batch=7, **kw):
    data = rows(n, start=shard * n, seed=shard)
    with ShardWriter(path, K, EVENT, attrs(shard, **kw)) as w:
        for i in range(0, n, batch):
            w.write(*(a[i:i + batch] for a in data))
    return data


def test_round_trip(tmp_path):
    path = tmp_path / "shard-0000.h5"
    data = write_shard(path, 50)
    assert not partial_path(path).exists()
    got = read_shard(path)
    for name, a in zip(("x", "source_class", "label", "loglik", "index"), data):
        np.testing.assert_array_equal(got[name], a)
    assert got["x"].dtype == np.float32 and got["loglik"].dtype == np.float64
    assert got["source_class"].dtype == got["label"].dtype == got["index"].dtype == np.int64
    a = got["attrs"]
    assert a["complete"] is True and a["format_version"] == FORMAT_VERSION == 2 and a["num_classes"] == K
    for key in REQUIRED_ATTRS:
        assert key in a
    np.testing.assert_array_equal(a["prior"], [0.1, 0.2, 0.3, 0.4])
    assert tuple(a["event_shape"]) == EVENT
    verify_shard(path)
    with h5py.File(path) as f:  # complete is the last attribute written
        assert list(f.attrs)[-1] == "complete"
        assert f["x"].chunks is not None and f["x"].maxshape[0] is None


def test_vector_event_shape(tmp_path):
    path = tmp_path / "g.h5"
    x = np.ones((5, 3), np.float32)
    with ShardWriter(path, 2, (3,), attrs(prior=[0.5, 0.5])) as w:
        w.write(x, np.zeros(5, int), np.zeros(5, int), np.zeros((5, 2)), np.arange(5))
    assert read_shard(path)["x"].shape == (5, 3)


def _peak_bytes_writing(path, n, batch=100):
    gc.collect()
    tracemalloc.start()
    with ShardWriter(path, K, (1, 8, 8), attrs()) as w:
        rng = np.random.default_rng(0)
        for i in range(0, n, batch):
            m = min(batch, n - i)
            w.write(rng.normal(size=(m, 1, 8, 8)).astype(np.float32), np.zeros(m, np.int64), np.zeros(m, np.int64),
                    np.zeros((m, K)), np.arange(i, i + m))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_memory_is_flat_in_the_number_of_rows(tmp_path):
    _peak_bytes_writing(tmp_path / "warm.h5", 500)  # lazy imports and caches are not the writer's
    small = _peak_bytes_writing(tmp_path / "a.h5", 2_000)
    large = _peak_bytes_writing(tmp_path / "b.h5", 20_000)
    data_bytes = 20_000 * (64 * 4 + K * 8 + 16)
    assert large < 2 * small + 256 * 1024, (small, large)  # 10x the rows, not 10x the memory
    assert large < data_bytes / 10, (large, data_bytes)


def test_exception_inside_context_leaves_nothing(tmp_path):
    path = tmp_path / "s.h5"
    with pytest.raises(RuntimeError, match="boom"):
        with ShardWriter(path, K, EVENT, attrs()) as w:
            w.write(*rows(10))
            raise RuntimeError("boom")
    assert not path.exists() and not partial_path(path).exists()
    with pytest.raises(ShardError, match="no such sample file"):
        read_shard(path)


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    from oracle.io.shards import ShardWriter
    path = sys.argv[1]
    attrs = {"oracle_sha256": "x", "prior": [0.25] * 4, "label_temperature": 1.0,
             "base_temperature": 1.0, "seed": 0, "shard": 0, "n_shards": 1, "code_version": "t"}
    with ShardWriter(path, 4, (1, 4, 4), attrs) as w:
        for i in range(100):
            w.write(np.zeros((10, 1, 4, 4), np.float32), np.zeros(10, int), np.zeros(10, int), np.zeros((10, 4)),
                    np.arange(10 * i, 10 * i + 10))
            if i == 5:
                os.kill(os.getpid(), signal.SIGKILL)
""")


def test_sigkill_mid_write_leaves_nothing_a_reader_accepts(tmp_path):
    path = tmp_path / "s.h5"
    res = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(path)], capture_output=True)
    assert res.returncode == -signal.SIGKILL, res.stderr.decode()
    assert not path.exists()
    tmp = partial_path(path)
    assert tmp.exists()  # the killed writer's leftover ...
    for p in (path, tmp):  # ... which no reader accepts
        with pytest.raises(ShardError):
            read_shard(p)
        with pytest.raises(ShardError):
            open_samples(p)
        with pytest.raises(ShardError):
            verify_shard(p)
    with pytest.raises(ShardError, match="incomplete"):
        read_shard(tmp)
    # the partial file can be resumed from its committed rows
    a = attrs(prior=[0.25] * 4, oracle_sha256="x", seed=0, n_shards=1, code_version="t")
    with ShardWriter(path, 4, (1, 4, 4), a, resume=True) as w:
        assert w.resumed_rows == 60
        w.write(np.zeros((5, 1, 4, 4), np.float32), np.zeros(5, int), np.zeros(5, int), np.zeros((5, 4)), np.arange(60, 65))
    assert read_shard(path)["index"].tolist() == list(range(65))


def test_resume_refuses_a_partial_with_other_attributes(tmp_path, capsys):
    """A partial shard of another world, seed or code version is discarded (one line says so)
    and the shard is written from scratch: it equals a fresh one."""
    path = tmp_path / "s.h5"
    w = ShardWriter(path, K, EVENT, attrs(seed=1)).open()
    w.write(*rows(10))
    w._f.close()  # simulate a killed process: the partial stays behind
    with ShardWriter(path, K, EVENT, attrs(seed=2), resume=True) as w2:
        assert w2.rows == 0 and w2.resumed_rows == 0
        w2.write(*rows(5, seed=7))
    assert capsys.readouterr().out.count(f"discarding the partial shard {partial_path(path)}") == 1
    with ShardWriter(tmp_path / "fresh.h5", K, EVENT, attrs(seed=2)) as w3:
        w3.write(*rows(5, seed=7))
    got, fresh = read_shard(path), read_shard(tmp_path / "fresh.h5")
    for name in ("x", "source_class", "label", "loglik", "index"):
        np.testing.assert_array_equal(got[name], fresh[name])


def test_resume_discards_a_truncated_partial(tmp_path, capsys):
    """A partial shard cut short (the disk filled, a copy was interrupted) cannot be reopened:
    it is discarded with one line naming it, never resumed, and the shard equals a fresh one."""
    path = tmp_path / "s.h5"
    w = ShardWriter(path, K, EVENT, attrs()).open()
    w.write(*rows(40))
    w._f.close()  # the killed process's leftover
    tmp = partial_path(path)
    tmp.write_bytes(tmp.read_bytes()[: tmp.stat().st_size // 2])
    with ShardWriter(path, K, EVENT, attrs(), resume=True) as w2:
        assert w2.resumed_rows == 0
        w2.write(*rows(5, seed=7))
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("discarding")]
    assert len(lines) == 1 and str(tmp) in lines[0]
    with ShardWriter(tmp_path / "fresh.h5", K, EVENT, attrs()) as w3:
        w3.write(*rows(5, seed=7))
    got, fresh = read_shard(path), read_shard(tmp_path / "fresh.h5")
    for name in ("x", "source_class", "label", "loglik", "index"):
        np.testing.assert_array_equal(got[name], fresh[name])


def test_writer_validation(tmp_path):
    path = tmp_path / "s.h5"
    bad = attrs()
    del bad["oracle_sha256"]
    with pytest.raises(ShardError, match=r"missing required key\(s\) \['oracle_sha256'\]"):
        ShardWriter(path, K, EVENT, bad)
    with pytest.raises(ShardError, match=r"prior'\] has shape \(4,\); expected \(3,\)"):
        ShardWriter(path, 3, EVENT, attrs())
    x, sc, lab, ll, idx = rows(5)
    cases = [
        ((x.astype(np.float64), sc, lab, ll, idx), "x has dtype float64; expected float32"),
        ((x[:, :, :2], sc, lab, ll, idx), r"x has shape \(5, 1, 2, 4\)"),
        ((x, sc[:4], lab, ll, idx), r"source_class has shape \(4,\); expected \(5,\)"),
        ((x, sc, lab[:3], ll, idx), r"label has shape \(3,\); expected \(5,\)"),
        ((x, sc, lab, ll[:, :3], idx), r"loglik has shape \(5, 3\); expected \(5, 4\)"),
        ((x, sc, lab, np.where(np.arange(4) == 2, np.nan, ll), idx), r"loglik\[0, 2\] = nan is not finite"),
        ((x, sc + 4, lab, ll, idx), r"source_class outside \[0, 4\)"),
        ((x, sc, lab - 1 - lab.max(), ll, idx), r"label outside \[0, 4\)"),
    ]
    for args, match in cases:
        with pytest.raises(ShardError, match=match):
            with ShardWriter(path, K, EVENT, attrs()) as w:
                w.write(*args)
        assert not path.exists() and not partial_path(path).exists()


@pytest.mark.parametrize("first,second", [([0, 1, 2], [3, 3, 4]), ([0, 1, 2], [2, 5, 6]), ([0, 2, 1], [5, 6, 7])])
def test_repeated_or_decreasing_index_is_refused(tmp_path, first, second):
    path = tmp_path / "s.h5"
    x, sc, lab, ll, _ = rows(3)
    with pytest.raises(ShardError, match="index must be strictly increasing"):
        with ShardWriter(path, K, EVENT, attrs()) as w:
            w.write(x, sc, lab, ll, np.array(first))
            w.write(x, sc, lab, ll, np.array(second))
    assert not path.exists() and not partial_path(path).exists()


def test_verify_catches_a_corrupt_shard(tmp_path):
    path = tmp_path / "s.h5"
    write_shard(path, 20)
    verify_shard(path)
    with h5py.File(path, "r+") as f:
        f["loglik"][3, 1] = np.inf
    with pytest.raises(ShardError, match=r"loglik\[3, 1\] = inf"):
        verify_shard(path)
    write_shard(path, 20)
    with h5py.File(path, "r+") as f:
        f["index"][5] = 7
    with pytest.raises(ShardError, match="index value 7 appears more than once"):
        verify_shard(path)
    write_shard(path, 20)
    with h5py.File(path, "r+") as f:
        del f.attrs["seed"]
    with pytest.raises(ShardError, match=r"missing attribute\(s\) \['seed'\]"):
        verify_shard(path)


# -------------------------------------------------------------------- merging


def three_shards(folder: Path, n=30, **over):
    paths, datas = [], []
    for s in range(3):
        p = folder / f"shard-{s:04d}.h5"
        datas.append(write_shard(p, n, shard=s, **over))
        paths.append(p)
    return paths, datas


def test_merged_file_is_virtual_and_reads_like_the_concatenation(tmp_path):
    paths, datas = three_shards(tmp_path)
    out = merge_shards(paths, tmp_path / "all.h5")
    with open_samples(out) as f:
        for j, name in enumerate(("x", "source_class", "label", "loglik", "index")):
            assert f[name].is_virtual
            want = np.concatenate([d[j] for d in datas])
            np.testing.assert_array_equal(f[name][()], want)
            assert f[name].dtype == want.dtype
        assert f.attrs["complete"] and f.attrs["oracle_sha256"] == "ab" * 32
        np.testing.assert_array_equal(f.attrs["shard_ids"], [0, 1, 2])
    verify_shard(out)
    # no copy: the merged file is tiny next to its shards
    assert out.stat().st_size < min(p.stat().st_size for p in paths)
    assert not partial_path(out).exists()


def test_merged_folder_can_be_moved(tmp_path):
    paths, datas = three_shards(tmp_path / "samples")
    merge_shards(paths, tmp_path / "samples" / "all.h5")
    shutil.move(tmp_path / "samples", tmp_path / "moved")
    got = read_shard(tmp_path / "moved" / "all.h5")
    np.testing.assert_array_equal(got["loglik"], np.concatenate([d[3] for d in datas]))


def test_merged_file_refuses_a_missing_or_incomplete_source(tmp_path):
    paths, _ = three_shards(tmp_path)
    out = merge_shards(paths, tmp_path / "all.h5")
    paths[1].rename(tmp_path / "elsewhere.h5")
    with pytest.raises(ShardError, match="source shard .* no such sample file"):
        open_samples(out)
    # without the check HDF5 would read fill values: NaN log-likelihoods, index -1
    with h5py.File(out) as f:
        assert np.isnan(f["loglik"][30:60]).all() and (f["index"][30:60] == -1).all()


@pytest.mark.parametrize("key,value", [
    ("oracle_sha256", "cd" * 32), ("prior", [0.25] * 4), ("label_temperature", 2.0),
    ("base_temperature", 0.9), ("seed", 4),
])
def test_merge_refuses_disagreeing_attributes(tmp_path, key, value):
    paths, _ = three_shards(tmp_path)
    odd = tmp_path / "odd.h5"
    write_shard(odd, 30, shard=5, **{key: value})
    with pytest.raises(ShardError, match=f"attribute {key}=.* disagrees"):
        merge_shards([*paths, odd], tmp_path / "all.h5")
    assert not (tmp_path / "all.h5").exists()


def test_merge_refuses_other_class_count(tmp_path):
    paths, _ = three_shards(tmp_path)
    odd = tmp_path / "odd.h5"
    x, sc, lab, ll, idx = rows(5, start=500, k=3)
    with ShardWriter(odd, 3, EVENT, attrs(prior=[0.2, 0.3, 0.5])) as w:
        w.write(x, sc, lab, ll, idx)
    with pytest.raises(ShardError, match="disagrees"):
        merge_shards([*paths, odd], tmp_path / "all.h5")


def test_merge_refuses_overlapping_indices(tmp_path):
    paths, _ = three_shards(tmp_path)
    twin = tmp_path / "twin.h5"
    write_shard(twin, 30, shard=1)  # same indices as shard 1
    with pytest.raises(ShardError, match="index 30 occurs in more than one place"):
        merge_shards([*paths, twin], tmp_path / "all.h5")


def test_merge_refuses_incomplete_shards(tmp_path):
    paths, _ = three_shards(tmp_path)
    with h5py.File(paths[2], "r+") as f:
        del f.attrs["complete"]
    with pytest.raises(ShardError, match="incomplete"):
        merge_shards(paths, tmp_path / "all.h5")
    assert not (tmp_path / "all.h5").exists()


def test_a_file_of_the_format_without_labels_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "old.h5"
    write_shard(path, 10)
    with h5py.File(path, "r+") as f:
        del f["label"]
        f.attrs["format_version"] = 1
    with pytest.raises(ShardError, match=r"sample format 1, which lacks \['label'\].*rerun the samples stage"):
        open_samples(path)
