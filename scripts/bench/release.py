"""Benchmark: our batched log p(x|k) against the public TarFlow release's own forward pass.

Same weights (the release's Model loads our flow's state dict strictly), same inputs, one
process, timings interleaved (median of --repeats):

* ours     -- ``TarFlow.log_prob_classes(x, classes)``: n*K rows in one pass, float32 network,
  float64 sums;
* release  -- ``transformer_flow.Model(x_rep, y_rep)`` on the same n*K rows, with log p formed
  from its outputs as the release's own bits-per-dim evaluation does (Gaussian base term over
  all D dims plus D times its per-dimension mean log-determinant).

Reports (image x class) evaluations per second of each, the ratio ours/release (the target:
at least 1.0 on CPU) and max |log p_ours - log p_release| (nats per image). The release is not
part of this repository and nothing is downloaded: pass a local checkout of
apple/ml-tarflow (the directory holding transformer_flow.py) with --release. The release
fixes the head size at 64, so the flow sizes here use head_dim 64.

Usage::

    .venv/bin/python scripts/bench/release.py --release ~/src/ml-tarflow --threads 1 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from oracle.flow_checkpoints import build_flow
from oracle.io.atomic import write_json_atomic

SIZES = {
    "small-1x8x8": dict(in_channels=1, img_size=8, patch_size=2, channels=64, num_blocks=4,
                        layers_per_block=2, head_dim=64),
    "mid-3x32x32": dict(in_channels=3, img_size=32, patch_size=4, channels=128, num_blocks=4,
                        layers_per_block=2, head_dim=64),
}


def load_release(path: Path):
    """The release's transformer_flow module from a local checkout; SystemExit naming the
    path and the expected layout when it is not there."""
    src = path / "transformer_flow.py"
    if not src.is_file():
        raise SystemExit(f"--release {path}: no transformer_flow.py there; expected a local checkout of "
                         "apple/ml-tarflow (its top-level directory)")
    spec = importlib.util.spec_from_file_location("transformer_flow", src)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def release_log_prob(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """log p(x|y) in nats per image from the release's forward: z, and the sum over blocks of
    the per-dimension mean log-determinant, times D."""
    z, _, logdets = model(x, y)
    d = x[0].numel()
    base = -0.5 * z.double().pow(2).sum(dim=(1, 2)) - 0.5 * d * math.log(2 * math.pi)
    return base + d * logdets.double()


def timed(fn, repeats: int, others) -> list[float]:
    out = []
    for _ in range(repeats):
        for other in others:
            other()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench(module, name: str, spec: dict, n: int, k: int, repeats: int, seed: int) -> dict:
    ours = build_flow({**spec, "num_classes": k}, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in ours.named_parameters():
            if "proj_out" in pname:
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
    release = module.Model(spec["in_channels"], spec["img_size"], spec["patch_size"], spec["channels"],
                           spec["num_blocks"], spec["layers_per_block"], num_classes=k).eval()
    release.load_state_dict(ours.state_dict(), strict=True)
    x = ours.sample(torch.arange(n) % k, generator=gen).float()
    classes = torch.arange(k)
    x_rep, y_rep = x.repeat_interleave(k, dim=0), classes.repeat(n)
    with torch.no_grad():
        run_ours = lambda: ours.log_prob_classes(x, classes)  # noqa: E731
        run_release = lambda: release_log_prob(release, x_rep, y_rep)  # noqa: E731
        diff = float((run_ours().reshape(-1) - run_release()).abs().max())
        t_ours = timed(run_ours, repeats, [run_release])
        t_release = timed(run_release, repeats, [run_ours])
    evals = n * k
    ours_s, release_s = evals / statistics.median(t_ours), evals / statistics.median(t_release)
    return {"size": name, "n_images": n, "k": k, "ours_evals_per_s": ours_s, "release_evals_per_s": release_s,
            "ratio_ours_over_release": ours_s / release_s, "max_abs_diff_nats": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", type=Path, required=True, help="local checkout of apple/ml-tarflow")
    ap.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=sorted(SIZES))
    ap.add_argument("--n-images", type=int, default=32)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    module = load_release(args.release.expanduser())
    rows = [bench(module, s, SIZES[s], args.n_images, args.k, args.repeats, args.seed) for s in args.sizes]
    result = {"torch": torch.__version__, "machine": platform.processor() or platform.machine(),
              "threads": torch.get_num_threads(), "results": rows}
    print(json.dumps(result, indent=2))
    if args.json_out:
        write_json_atomic(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
