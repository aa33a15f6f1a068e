"""Classifier inputs streamed from the sample file (oracle.classifiers.stream): the same rows as
the in-memory set, and training on them gives bit-identical weights for the same seed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from oracle.classifiers.build import build_classifier
from oracle.classifiers.data import training_set
from oracle.classifiers.stream import SampleRows
from oracle.classifiers.train import train_classifier
from oracle.errors import DataError
from oracle.io.shards import ShardWriter
from oracle.io.splits import make_splits, write_splits_h5

K = 3


@pytest.fixture
def world_files(tmp_path):
    """A shard of 90 labelled 3x8x8 samples in chunks of 4 rows (a batch spans several chunks)."""
    rng = np.random.default_rng(0)
    n = 90
    source = rng.integers(0, K, n)
    x = np.clip(rng.normal(size=(n, 3, 8, 8)) * 0.4 + (source - 1)[:, None, None, None] * 0.5, -1, 1).astype(np.float32)
    attrs = {"oracle_sha256": "0" * 64, "prior": [0.2, 0.3, 0.5], "label_temperature": 1.0, "base_temperature": 1.0,
             "seed": 0, "shard": 0, "n_shards": 1, "code_version": "test"}
    with ShardWriter(tmp_path / "all.h5", K, (3, 8, 8), attrs, chunk_rows=4) as w:
        w.write(x, source, source, rng.normal(size=(n, K)), np.arange(n))
    write_splits_h5(tmp_path / "splits.h5", make_splits(n, 20, [0, 1], labels=source, test_seed=0))
    return tmp_path / "all.h5", tmp_path / "splits.h5", x


def spec(n=50, **extra):
    return {"world": "base", "n": n, "labels": "hard", "hard_label": "label", **extra,
            "training": {"epochs": 2, "min_steps": 0, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01}}


def test_rows_read_in_batch_order(world_files):
    samples, _, x = world_files
    rows = np.array([7, 3, 88, 3, 0, 41])  # unsorted, with a repeat (a with-replacement draw)
    ds = SampleRows(samples, rows)
    assert ds.shape == (6, 3, 8, 8) and len(ds) == 6
    np.testing.assert_array_equal(ds[torch.tensor([5, 0, 3, 1])].numpy(), x[rows[[5, 0, 3, 1]]])
    np.testing.assert_array_equal(ds[2].numpy(), x[88])
    assert ds[torch.tensor([0])].dtype == torch.float32
    # pickling (a spawned worker) drops the handle; the copy opens its own
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._file is None
    np.testing.assert_array_equal(copy[np.array([1, 2])].numpy(), x[[3, 88]])
    assert copy.fingerprint() == ds.fingerprint() != SampleRows(samples, rows[::-1]).fingerprint()
    ds.close()
    with pytest.raises(DataError, match=r"all.h5: row indices outside \[0, 90\)"):
        SampleRows(samples, np.array([90]))


@pytest.mark.parametrize("extra", [{}, {"class_prior": [0.1, 0.1, 0.8]}], ids=["plain", "prior_shift"])
@pytest.mark.parametrize("workers", [0, 2])
def test_streamed_training_is_bit_identical(world_files, extra, workers):
    """Same seed, same batches in the same order, the same float32 bytes in each: the final
    weights and every loss agree exactly, with the reads in this process or in 2 workers."""
    samples, splits, _ = world_files
    memory = training_set(samples, splits, spec(**extra), seed=1)
    streamed = training_set(samples, splits, spec(**extra), seed=1, stream=True)
    assert isinstance(streamed.x, SampleRows) and isinstance(memory.x, np.ndarray)
    np.testing.assert_array_equal(streamed.rows, memory.rows)
    np.testing.assert_array_equal(streamed.targets, memory.targets)
    assert streamed.shift == memory.shift
    hyper = {"soft": False, "epochs": 2, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01, "seed": 3,
             "num_classes": K, "val_fraction": 0.2}

    def model():  # dropout: the training's random draws must not move either
        return build_classifier("test_efficientnet", K, 3, 8, seed=0, model_kwargs={"drop_rate": 0.5})

    a, ha = train_classifier(model(), memory.images(), torch.from_numpy(memory.targets), **hyper)
    b, hb = train_classifier(model(), streamed.images(), torch.from_numpy(streamed.targets), **hyper,
                             loader_workers=workers)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    strip = ("seconds",)
    assert [{k: v for k, v in h.items() if k not in strip} for h in ha] == \
           [{k: v for k, v in h.items() if k not in strip} for h in hb]


def test_auto_holds_small_sets_in_memory(world_files, monkeypatch):
    """stream="auto" (the training job's choice) reads a set of at most IN_MEMORY_MAX_BYTES of
    images into memory and streams a larger one; both train to the same weights bit for bit."""
    import oracle.classifiers.data as data_module

    samples, splits, _ = world_files
    small = training_set(samples, splits, spec(), seed=1, stream="auto")
    assert isinstance(small.x, np.ndarray)
    set_bytes = 50 * 3 * 8 * 8 * 4
    monkeypatch.setattr(data_module, "IN_MEMORY_MAX_BYTES", set_bytes)
    assert isinstance(training_set(samples, splits, spec(), seed=1, stream="auto").x, np.ndarray)
    monkeypatch.setattr(data_module, "IN_MEMORY_MAX_BYTES", set_bytes - 1)
    large = training_set(samples, splits, spec(), seed=1, stream="auto")
    assert isinstance(large.x, SampleRows)
    hyper = {"soft": False, "epochs": 2, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01, "seed": 3, "num_classes": K}
    a, _ = train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), small.images(),
                            torch.from_numpy(small.targets), **hyper)
    b, _ = train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), large.images(),
                            torch.from_numpy(large.targets), **hyper)
    sa, sb = a.state_dict(), b.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    with pytest.raises(DataError, match="stream='yes'"):
        training_set(samples, splits, spec(), seed=1, stream="yes")


def test_trained_weights_are_contiguous(world_files):
    """Training runs channels-last; the model it returns is back in the usual layout, so its
    stored weights and their hashes are those of any other model."""
    samples, splits, _ = world_files
    data = training_set(samples, splits, spec(), seed=0)
    model, _ = train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), data.images(),
                                torch.from_numpy(data.targets), soft=False, epochs=1, batch_size=8, lr=1e-3,
                                weight_decay=0.01, seed=0, num_classes=K)
    convs = [v for v in model.state_dict().values() if v.ndim == 4]
    assert convs and all(v.is_contiguous() for v in model.state_dict().values())


def test_noisy_training_set_stays_in_memory(world_files):
    samples, splits, _ = world_files
    noisy = training_set(samples, splits, spec(noise_std=0.2), seed=0, stream=True)
    assert isinstance(noisy.x, np.ndarray) and noisy.shift["noise_std"] == 0.2
    np.testing.assert_array_equal(noisy.x, training_set(samples, splits, spec(noise_std=0.2), seed=0).x)


def test_streamed_checkpoint_resumes(world_files, tmp_path):
    """A training checkpoint written on streamed rows resumes on the same rows (the resume key
    holds the file's attributes and the rows) and gives the weights of an uninterrupted run."""
    samples, splits, _ = world_files
    data = training_set(samples, splits, spec(), seed=0, stream=True)
    t = torch.from_numpy(data.targets)
    hyper = {"soft": False, "batch_size": 8, "lr": 1e-3, "weight_decay": 0.01, "seed": 0, "num_classes": K}
    full, _ = train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), data.images(), t, epochs=2, **hyper)
    ckpt = tmp_path / "state.pt"
    calls = []

    def stop_in_epoch_two(m):  # the job is killed after the first epoch's checkpoint
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return {}

    with pytest.raises(KeyboardInterrupt):
        train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), data.images(), t, epochs=2,
                         checkpoint_path=ckpt, monitor=stop_in_epoch_two, checkpoint_seconds=0, **hyper)
    state = torch.load(ckpt, weights_only=False)
    assert state["epoch"] == 1
    again = training_set(samples, splits, spec(), seed=0, stream=True)  # a new job, the same rows
    resumed, history = train_classifier(build_classifier("test_resnet", K, 3, 8, seed=0), again.images(), t,
                                        epochs=2, checkpoint_path=ckpt, checkpoint_seconds=0, **hyper)
    a, b = full.state_dict(), resumed.state_dict()
    assert len(history) == 2 and all(torch.equal(a[k], b[k]) for k in a)
    assert history[0] == state["history"][0]  # resumed (its first epoch's wall time kept), not redone


def test_rows_of_a_merged_file(tmp_path):
    """all.h5 holds virtual datasets over the shards: a streamed batch crossing two shards reads
    the same bytes as the shards themselves."""
    from oracle.io.merge import merge_shards

    rng = np.random.default_rng(1)
    paths, xs = [], []
    for shard in range(2):
        x = rng.uniform(-1, 1, (10, 3, 8, 8)).astype(np.float32)
        attrs = {"oracle_sha256": "0" * 64, "prior": [0.5, 0.5], "label_temperature": 1.0, "base_temperature": 1.0,
                 "seed": 0, "shard": shard, "n_shards": 2, "code_version": "test"}
        with ShardWriter(tmp_path / f"shard-{shard}.h5", 2, (3, 8, 8), attrs, chunk_rows=3) as w:
            y = rng.integers(0, 2, 10)
            w.write(x, y, y, rng.normal(size=(10, 2)), np.arange(10) + 10 * shard)
        paths.append(tmp_path / f"shard-{shard}.h5")
        xs.append(x)
    merged = merge_shards(paths, tmp_path / "all.h5")
    rows = np.array([19, 0, 9, 10, 4, 5, 6, 15])
    ds = SampleRows(merged, rows)
    np.testing.assert_array_equal(ds[torch.arange(8)].numpy(), np.concatenate(xs)[rows])


def test_adamw_is_fused_where_torch_fuses_it():
    """Classifiers and flows share one optimizer: fused on CPU (and CUDA), the loop elsewhere;
    a fused step moves the weights as the loop's does, up to float32 rounding."""
    from oracle.devices import adamw

    def step(fused_device):
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.randn(64, 32))
        opt = adamw([w], torch.device(fused_device), lr=1e-2, weight_decay=0.01)
        for _ in range(3):
            opt.zero_grad()
            (w.square().sum()).backward()
            opt.step()
        return opt, w.detach()

    fused, wf = step("cpu")
    loop, wl = step("meta")  # not a device torch fuses on: the per-tensor loop (run here on CPU tensors)
    assert fused.defaults["fused"] is True and loop.defaults["fused"] is False
    torch.testing.assert_close(wf, wl, rtol=1e-6, atol=1e-6)
