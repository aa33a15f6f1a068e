"""Benchmark: one classifier training epoch on rows streamed from a sample file against the same
rows in memory (oracle.classifiers.stream_bench), on a synthetic 3x64x64 shard: the peak resident
set of each (N, mode), each in a fresh process, then the throughput of both at --throughput-n in
one process, alternating epoch by epoch (median of --rounds).

Usage::

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_stream.py --shard /tmp/bench/shard.h5 \
        --sizes 1000 40000 --max-steps 100 --json-out results/bench/stream.json
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from oracle.classifiers.stream_bench import MODES, epoch_run, throughput_run, write_synthetic_shard
from oracle.io.atomic import write_json_atomic

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--shard", type=Path, required=True, help="the synthetic shard (written when missing)")
p.add_argument("--sizes", type=int, nargs="+", default=[1000, 40000])
p.add_argument("--throughput-n", type=int, default=40000)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--max-steps", type=int, help="cap each timed epoch (see stream_bench.epoch_run)")
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
