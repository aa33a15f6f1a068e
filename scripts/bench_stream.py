"""Benchmark: peak memory and throughput of one classifier training epoch on rows streamed from
a sample file against the same rows in memory (oracle.classifiers.stream_bench), each run in a
fresh process (its own peak resident set), the modes alternating, on a synthetic shard.

Usage::

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_stream.py --shard /tmp/bench/shard.h5 \
        --sizes 1000 40000 --repeats 2 --json-out results/bench/stream.json
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from oracle.classifiers.stream_bench import MODES, epoch_run, write_synthetic_shard

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--shard", type=Path, required=True, help="the synthetic shard (written when missing)")
p.add_argument("--sizes", type=int, nargs="+", default=[1000, 40000])
p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
p.add_argument("--repeats", type=int, default=1)
p.add_argument("--workers", type=int, default=0, help="reader processes of the streamed runs")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--arch", default="test_resnet")
p.add_argument("--json-out", type=Path)
p.add_argument("--child", nargs=2, metavar=("MODE", "N"), help=argparse.SUPPRESS)
a = p.parse_args()

if a.child:  # one measurement, alone in this process
    mode, n = a.child[0], int(a.child[1])
    print(json.dumps(epoch_run(a.shard, n, mode, a.arch, threads=a.threads, workers=a.workers if mode == "stream" else 0)))
    sys.exit(0)

if not a.shard.exists():
    write_synthetic_shard(a.shard, max(a.sizes))
    print(f"wrote {a.shard} ({a.shard.stat().st_size / 2**30:.2f} GiB)", flush=True)
results = []
for _ in range(a.repeats):
    for n in a.sizes:
        for mode in a.modes:
            cmd = [sys.executable, __file__, "--shard", str(a.shard), "--child", mode, str(n), "--arch", a.arch,
                   "--threads", str(a.threads), "--workers", str(a.workers)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=os.environ).stdout
            results.append(json.loads(out.strip().splitlines()[-1]))
            r = results[-1]
            print(f"N={n:6d} {mode:6s} workers={r['workers']} load {r['load_s']:6.1f} s  epoch {r['epoch_s']:6.1f} s  "
                  f"{r['samples_per_s']:7.0f} samples/s  peak RSS {r['peak_rss_mb']:7.0f} MB "
                  f"(before data {r['rss_before_mb']:.0f} MB)", flush=True)
if a.json_out:
    a.json_out.parent.mkdir(parents=True, exist_ok=True)
    a.json_out.write_text(json.dumps(results, indent=1) + "\n")
