"""Benchmark: batched (image x class) log-likelihoods versus a per-image, per-class loop.

For each TarFlow size, measured side by side in one run on the same inputs:

* batched  -- ``oracle.posterior.log_likelihoods(world, x, class_batch=...)``: one forward pass
  per class batch over all images (``n * class_batch`` rows);
* loop     -- ``flow.log_prob(x[i:i+1], [k])`` for every image i and class k (one row per pass).

Reports (image x class) evaluations per second for each, their ratio, the peak memory of one
call, and the largest difference between the two results (they must agree). Timings are the
median over ``--repeats`` interleaved repetitions. Not a test: nothing here asserts a speed.

Usage::

    .venv/bin/python scripts/bench/loglik.py --device cpu --n-images 64 --k 10 --repeats 3 \
        --json-out results/bench/loglik.json

CPU peak memory is the process's resident-set high-water mark (VmHWM, reset through
/proc/self/clear_refs before each measured call) minus the resident set before the call; on
CUDA it is torch.cuda.max_memory_allocated minus the memory allocated before the call.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

from oracle.flow_checkpoints import build_flow
from oracle.io.atomic import write_json_atomic
from oracle.posterior import log_likelihoods
from oracle.worlds import FlowWorld

SIZES = {
    # the embedded default's flow (config.yaml: 8x8 digits)
    "digits-1x8x8": dict(in_channels=1, img_size=8, patch_size=2, channels=64, num_blocks=4,
                         layers_per_block=2, head_dim=16),
    # a mid-size flow: CIFAR-like 3x32x32 images, 64 tokens of 48 features
    "mid-3x32x32": dict(in_channels=3, img_size=32, patch_size=4, channels=128, num_blocks=4,
                        layers_per_block=2, head_dim=64),
}


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_memory_mib(fn, device: torch.device) -> float | None:
    """Peak extra memory (MiB) of one call of fn()."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    if not _reset_hwm():
        return None
    before = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    if before is None or peak is None:
        return None
    return (peak - before) / 1024


def timed(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def bench_size(name: str, spec: dict, args, device: torch.device) -> dict:
    flow = build_flow({**spec, "num_classes": args.k}, seed=0).to(device).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-zero output projections: a generic, non-identity flow
        for p in flow.parameters():
            p.add_(0.02 * torch.randn(p.shape, generator=gen).to(device))
    world = FlowWorld(flow)
    C, H, W = world.event_shape
    x = torch.rand(args.n_images, C, H, W, generator=gen).mul(2).sub(1).to(device)
    class_batch = args.class_batch or args.k
    n_loop = min(args.n_images, args.loop_images)
    x_loop = x[:n_loop]

    def batched():
        return log_likelihoods(world, x, class_batch=class_batch)

    @torch.no_grad()
    def loop():
        out = torch.empty(n_loop, args.k, dtype=torch.float64, device=device)
        for i in range(n_loop):
            for k in range(args.k):
                out[i, k] = flow.log_prob(x_loop[i:i + 1], torch.tensor([k], device=device))[0]
        return out

    # warm-up (allocator, kernels) and the agreement check
    ref_batched = batched()
    ref_loop = loop()
    max_diff = float((ref_batched[:n_loop] - ref_loop).abs().max())

    t_batched, t_loop = [], []
    for _ in range(args.repeats):  # interleaved, so load from other processes hits both
        t_batched.append(timed(batched, device))
        t_loop.append(timed(loop, device))
    tb, tl = statistics.median(t_batched), statistics.median(t_loop)
    rate_b = args.n_images * args.k / tb
    rate_l = n_loop * args.k / tl
    mem_b = peak_memory_mib(batched, device)
    mem_l = peak_memory_mib(loop, device)
    return {
        "size": name, "spec": spec, "k": args.k, "n_images_batched": args.n_images,
        "n_images_loop": n_loop, "class_batch": class_batch,
        "params_millions": sum(p.numel() for p in flow.parameters()) / 1e6,
        "batched_s": t_batched, "loop_s": t_loop,
        "batched_evals_per_s": rate_b, "loop_evals_per_s": rate_l, "speedup": rate_b / rate_l,
        "batched_peak_mib": mem_b, "loop_peak_mib": mem_l,
        "max_abs_diff_nats": max_diff,
    }


def machine() -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}
    try:
        with open("/proc/cpuinfo") as fh:
            names = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")]
        info["cpu"] = names[0] if names else platform.processor()
    except OSError:
        info["cpu"] = platform.processor()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    ap.add_argument("--n-images", type=int, default=64, help="images in the batched call")
    ap.add_argument("--loop-images", type=int, default=16,
                    help="images in the loop (it is slow; rates are per evaluation)")
    ap.add_argument("--k", type=int, default=10, help="number of classes K")
    ap.add_argument("--class-batch", type=int, default=None, help="classes per pass (default K)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--sizes", default=",".join(SIZES), help=f"comma list of {list(SIZES)}")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    results = []
    for name in args.sizes.split(","):
        r = bench_size(name, SIZES[name], args, device)
        results.append(r)
        mem = lambda v: "n/a" if v is None else f"{v:.1f} MiB"  # noqa: E731
        print(f"{name:14s} K={r['k']} batched {r['batched_evals_per_s']:9.1f} evals/s "
              f"(peak {mem(r['batched_peak_mib'])})  loop {r['loop_evals_per_s']:8.1f} evals/s "
              f"(peak {mem(r['loop_peak_mib'])})  speedup {r['speedup']:.1f}x  "
              f"max|diff| {r['max_abs_diff_nats']:.2e} nats", flush=True)
    # the 1-minute load average before/after: other processes on the machine skew CPU timings
    out = {"device": str(device), "machine": machine(), "args": vars(args), "results": results,
           "loadavg_1min_before_after": [load_before[0], os.getloadavg()[0]]}
    if args.json_out:
        write_json_atomic(args.json_out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
