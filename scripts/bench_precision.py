"""Benchmark: how far float32 log-likelihoods are from float64 ones, and what that does to posteriors.

The oracle evaluates flows in float32 (fast on GPUs) and accumulates the per-image sums in
float64 (DESIGN rule 3). This script measures the price: the same weights are evaluated once as
a float32 model and once as a float64 model on the same inputs, and it reports

* max and median |log p32(x|k) - log p64(x|k)| in nats per image, and the same per dimension;
* the largest effect on the exact posteriors: max |p32(y|x) - p64(y|x)| and max KL(p64 || p32)
  in nats, at the world's label temperature.

Inputs are samples from the float64 flow itself (what the oracle evaluates in practice), or real
images from a `--data` HDF5 file. Not a test: it asserts nothing.

Usage::

    .venv/bin/python scripts/bench_precision.py --flow results/default/oracle/flow.pt --n 512
    .venv/bin/python scripts/bench_precision.py --size digits-1x8x8 --device cuda
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import sys
from pathlib import Path

import torch

from oracle.flow_checkpoints import build_flow, load_flow
from oracle.posterior import log_likelihoods, log_posterior
from oracle.worlds import FlowWorld

SIZES = {
    "digits-1x8x8": dict(in_channels=1, img_size=8, patch_size=2, channels=64, num_blocks=4,
                         layers_per_block=2, head_dim=16, num_classes=10),
    "mid-3x32x32": dict(in_channels=3, img_size=32, patch_size=4, channels=128, num_blocks=4,
                        layers_per_block=2, head_dim=64, num_classes=10),
}


def _random_flow(spec: dict, seed: int) -> torch.nn.Module:
    """Random weights with a non-zero output projection, so the flow is not the identity."""
    flow = build_flow(spec, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in flow.named_parameters():
            if "proj_out" in name:
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
    return flow


def measure(flow64: torch.nn.Module, x: torch.Tensor, label_temperature: float,
            device: torch.device, class_batch: int | None) -> dict:
    """Compare float32 and float64 evaluations of the same flow on x (float64 [n, C, H, W])."""
    flow64 = flow64.to(device=device, dtype=torch.float64).eval()
    flow32 = copy.deepcopy(flow64).to(dtype=torch.float32).eval()
    with torch.no_grad():
        l64 = log_likelihoods(FlowWorld(flow64, label_temperature=label_temperature), x.double(),
                              class_batch=class_batch).cpu()
        # the float32 model reads the float32 array, as it does in the pipeline (rule 2)
        l32 = log_likelihoods(FlowWorld(flow32, label_temperature=label_temperature), x.float(),
                              class_batch=class_batch).cpu()
    diff = (l32 - l64).abs()
    dims = x[0].numel()
    lp64 = log_posterior(l64, None, label_temperature)
    lp32 = log_posterior(l32, None, label_temperature)
    kl = (lp64.exp() * (lp64 - lp32)).sum(dim=1)
    return {
        "n_images": int(x.shape[0]), "num_classes": int(l64.shape[1]), "dims": int(dims),
        "label_temperature": label_temperature,
        "loglik_abs_diff_max_nats": float(diff.max()),
        "loglik_abs_diff_median_nats": float(diff.median()),
        "loglik_abs_diff_max_nats_per_dim": float(diff.max() / dims),
        "loglik_magnitude_median_nats": float(l64.abs().median()),
        "posterior_abs_diff_max": float((lp32.exp() - lp64.exp()).abs().max()),
        "posterior_kl_max_nats": float(kl.max()),
        "posterior_kl_mean_nats": float(kl.mean()),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flow", type=Path, help="a flow written by oracle.flow_checkpoints.save_flow")
    ap.add_argument("--size", choices=sorted(SIZES), default="digits-1x8x8",
                    help="random-weight flow of this size when --flow is not given")
    ap.add_argument("--n", type=int, default=256, help="number of images")
    ap.add_argument("--label-temperature", type=float, default=1.0)
    ap.add_argument("--class-batch", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.flow is not None:
        flow, spec = load_flow(args.flow)
        name = str(args.flow)
    else:
        spec = SIZES[args.size]
        flow, name = _random_flow(spec, args.seed), f"{args.size} (random weights)"
    flow = flow.to(device=device, dtype=torch.float64).eval()
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    y = torch.arange(args.n) % flow.num_classes
    with torch.no_grad():
        x = flow.sample(y.to(device), generator=gen).clamp(-1, 1)
    result = {"flow": name, "device": str(device), "torch": torch.__version__,
              "machine": platform.processor() or platform.machine(),
              **measure(flow, x, args.label_temperature, device, args.class_batch)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
