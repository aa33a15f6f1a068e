"""Benchmark: one classifier training epoch on rows streamed from a sample file against the same
rows in memory, on a synthetic 3x64x64 shard: the peak resident
set of each (N, mode), each in a fresh process, then the throughput of both at --throughput-n in
one process, alternating epoch by epoch (median of --rounds).

Usage::

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/stream.py --shard /tmp/bench/shard.h5 \
        --sizes 1000 40000 --max-steps 100 --json-out results/bench/stream.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from oracle.io.atomic import write_json_atomic
from oracle.io.shards import ShardWriter

MODES = ("stream", "memory")


def write_synthetic_shard(path: str | os.PathLike, n: int, shape: tuple[int, ...] = (3, 64, 64),
                          num_classes: int = 10, seed: int = 0, block: int = 1000) -> Path:
    """A shard of `n` uniform images in [-1, 1] float32 `shape` with random classes and
    log-likelihoods, written with the repo's `ShardWriter` (its chunking: ~1 MiB chunks of
    ``x``) in blocks of `block` rows, so writing it takes little memory."""
    rng = np.random.default_rng(seed)
    attrs = {"oracle_sha256": "0" * 64, "prior": np.full(num_classes, 1.0 / num_classes), "label_temperature": 1.0,
             "base_temperature": 1.0, "seed": seed, "shard": 0, "n_shards": 1, "code_version": "bench"}
    with ShardWriter(path, num_classes, shape, attrs) as w:
        for start in range(0, n, block):
            m = min(block, n - start)
            y = rng.integers(0, num_classes, m)
            w.write(rng.uniform(-1, 1, (m, *shape)).astype(np.float32), y, y, rng.normal(size=(m, num_classes)),
                    np.arange(start, start + m))
    return Path(path)


def peak_rss_mb() -> float:
    """This process's peak resident set so far, MB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def epoch_run(path: str | os.PathLike, n: int, mode: str, arch: str = "test_resnet", input_size: int | None = 32,
              batch_size: int = 64, threads: int = 2, workers: int = 0, seed: int = 0,
              max_steps: int | None = None) -> dict:
    """One training epoch on `n` rows of `path` (a seeded random subset of its rows, in
    random order, so reads spread over the whole file), streamed (``mode="stream"``) or read
    into memory first (``"memory"``), after a warm-up of 16 steps on random images. Meant to run alone in a fresh process, since the peak
    resident set is the process's. Returns ``n``, ``mode``, ``load_s`` (reading rows into
    memory / opening the stream), ``epoch_s``, ``samples_per_s`` (training rows / epoch_s),
    ``rss_before_mb`` (after imports and model, before data) and ``peak_rss_mb``.

    max_steps: the timed epoch takes the first ``max_steps * batch_size`` of the n rows (still
    a random spread over the file; ``fit`` in the result). The n rows are selected all the
    same, and in memory mode read all, so the peak memory is that of holding n rows; a
    streamed run holds only its row indices and one batch whatever n is."""
    import torch

    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.stream import SampleRows
    from oracle.classifiers.train import train_classifier
    from oracle.io.sample_rows import read_rows

    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {MODES}")
    torch.set_num_threads(int(threads))
    rows, fit, labels, k, shape = _bench_rows(path, n, seed, batch_size, max_steps)
    model = build_classifier(arch, k, shape[0], shape[1], input_size, seed=seed)
    targets = torch.from_numpy(labels)
    # oneDNN builds its kernels and thread pool in the first steps (a first epoch of 16 steps
    # took 7x the third): warm up on 128 random images (6 MB) so the timed epoch is steady
    warm = torch.rand(128, *shape) * 2 - 1
    train_classifier(model, warm, targets[:128], soft=False, epochs=8, batch_size=batch_size, lr=1e-3,
                     weight_decay=0.0, seed=seed, num_classes=k)
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    if mode == "stream":
        x = SampleRows(path, rows[:fit])
    else:
        x = torch.from_numpy(read_rows(path, rows, fields=("x",))["x"])[:fit]  # a view: all n rows stay in memory
    load_s = time.perf_counter() - started
    _, history = train_classifier(model, x, targets[:fit], soft=False, epochs=1, batch_size=batch_size, lr=1e-3,
                                  weight_decay=0.0, seed=seed, num_classes=k, loader_workers=workers)
    epoch_s = float(history[0]["seconds"])
    return {"n": int(n), "fit": fit, "mode": mode, "workers": int(workers), "load_s": load_s, "epoch_s": epoch_s,
            "samples_per_s": fit / epoch_s, "rss_before_mb": rss_before, "peak_rss_mb": peak_rss_mb()}


def _bench_rows(path: str | os.PathLike, n: int, seed: int, batch_size: int, max_steps: int | None
                ) -> tuple[np.ndarray, int, np.ndarray, int, tuple[int, ...]]:
    """The benchmark's rows of `path`: a seeded random `n` of them in random order, how many of
    them an epoch fits on (``max_steps`` batches at most), their labels, the class count and
    the event shape."""
    from oracle.io.sample_rows import read_rows

    meta = read_rows(path, None, fields=("label",))
    rows = np.random.default_rng(seed).permutation(len(meta["label"]))[: int(n)]
    fit = len(rows) if max_steps is None else min(len(rows), int(max_steps) * batch_size)
    return (rows, fit, meta["label"][rows], int(meta["attrs"]["num_classes"]),
            tuple(int(s) for s in meta["attrs"]["event_shape"]))


def throughput_run(path: str | os.PathLike, n: int, rounds: int = 3, arch: str = "test_resnet",
                   input_size: int | None = 32, batch_size: int = 64, threads: int = 2, workers: int = 0,
                   seed: int = 0, max_steps: int | None = None) -> dict:
    """Streamed against in-memory training throughput on the same rows in one process, the two
    alternating epoch by epoch for `rounds` rounds (so a change of machine load hits both), after
    a warm-up epoch of each. Rows as in :func:`epoch_run`. Returns ``n``, ``fit``, ``rounds``,
    ``stream`` and ``memory`` (samples/s of each round) and their medians ``stream_median``,
    ``memory_median`` and ``ratio`` (stream / memory)."""
    import torch

    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.stream import SampleRows
    from oracle.classifiers.train import train_classifier
    from oracle.io.sample_rows import read_rows

    torch.set_num_threads(int(threads))
    rows, fit, labels, k, shape = _bench_rows(path, n, seed, batch_size, max_steps)
    rows, targets = rows[:fit], torch.from_numpy(labels[:fit])
    sources = {"stream": SampleRows(path, rows), "memory": torch.from_numpy(read_rows(path, rows, fields=("x",))["x"])}
    out: dict = {"n": int(n), "fit": fit, "rounds": int(rounds), "workers": int(workers), "stream": [], "memory": []}
    for r in range(int(rounds) + 1):
        for mode, x in sources.items():
            model = build_classifier(arch, k, shape[0], shape[1], input_size, seed=seed)
            _, history = train_classifier(model, x, targets, soft=False, epochs=1, batch_size=batch_size, lr=1e-3,
                                          weight_decay=0.0, seed=seed, num_classes=k, loader_workers=workers)
            if r:  # round 0 warms up
                out[mode].append(fit / float(history[0]["seconds"]))
    out.update(stream_median=float(np.median(out["stream"])), memory_median=float(np.median(out["memory"])))
    out["ratio"] = out["stream_median"] / out["memory_median"]
    return out


p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--shard", type=Path, required=True, help="the synthetic shard (written when missing)")
p.add_argument("--sizes", type=int, nargs="+", default=[1000, 40000])
p.add_argument("--throughput-n", type=int, default=40000)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--max-steps", type=int, help="cap each timed epoch (see epoch_run)")
p.add_argument("--workers", type=int, default=0, help="reader processes of the streamed runs")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--arch", default="test_resnet")
p.add_argument("--json-out", type=Path)
p.add_argument("--child", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
a = p.parse_args()
common = dict(arch=a.arch, threads=a.threads, max_steps=a.max_steps, workers=a.workers)

if a.child:  # one measurement, alone in this process
    mode, n = a.child[0], int(a.child[1])
    run = throughput_run(a.shard, n, a.rounds, **common) if mode == "throughput" else \
        epoch_run(a.shard, n, mode, **{**common, "workers": a.workers if mode == "stream" else 0})
    sys.exit(print(json.dumps(run)))

if not a.shard.exists():
    print(f"wrote {write_synthetic_shard(a.shard, max(a.sizes + [a.throughput_n]))}", flush=True)
results = []
for n, mode in [(n, m) for n in a.sizes for m in MODES] + [(a.throughput_n, "throughput")]:
    cmd = [sys.executable, __file__, *sys.argv[1:], "--child", mode, str(n)]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
    results.append({"measure": mode, **r})
    print(f"N={n} fit={r['fit']} {mode}: " + (f"stream {r['stream_median']:.0f} vs memory {r['memory_median']:.0f} "
          f"samples/s, ratio {r['ratio']:.3f} ({r['rounds']} rounds)" if mode == "throughput" else
          f"epoch {r['epoch_s']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB (before data {r['rss_before_mb']:.0f})"), flush=True)
if a.json_out:
    write_json_atomic(a.json_out, results)
