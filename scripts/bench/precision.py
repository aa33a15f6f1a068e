"""Benchmark: the precision modes of the oracle's log-likelihoods (oracle.float_precision), side by side.

For each mode (float64, float32, bf16 autocast, and TF32 on CUDA) on the same weights and the
same inputs, in one process with the timings interleaved (median of --repeats):

* throughput: (image x class) evaluations of log p(x|k) per second, and its ratio to float32;
* error against float64: max |d log p(x|k)| (nats per image, and per dimension), max
  |d p_T(y|x)| and max KL(p64 || p_mode) (nats), at the world's label temperature;
* the mode ``auto`` would pick at --tolerance (the first of oracle.float_precision.fastest_first
  within it).

Inputs are samples of the flow itself (what the oracle evaluates in practice). Not a test: it
asserts nothing.

Usage::

    .venv/bin/python scripts/bench/precision.py --flow results/default/oracle/flow.pt --n 512
    .venv/bin/python scripts/bench/precision.py --size digits-1x8x8 --device cuda
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch

from oracle.float_precision_error import choose_precision, compare_modes
from oracle.flow_checkpoints import load_flow, random_flow
from oracle.io.atomic import write_json_atomic
from oracle.worlds import FlowWorld

SIZES = {
    "digits-1x8x8": dict(in_channels=1, img_size=8, patch_size=2, channels=64, num_blocks=4,
                         layers_per_block=2, head_dim=16, num_classes=10),
    "mid-3x32x32": dict(in_channels=3, img_size=32, patch_size=4, channels=128, num_blocks=4,
                        layers_per_block=2, head_dim=64, num_classes=10),
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
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="max |d p(y|x)| that auto accepts")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.flow is not None:
        flow, spec = load_flow(args.flow)
        name = str(args.flow)
    else:
        spec = SIZES[args.size]
        flow, name = random_flow(spec, args.seed), f"{args.size} (random weights)"
    flow = flow.to(device=device, dtype=torch.float32).eval()
    world = FlowWorld(flow, label_temperature=args.label_temperature)
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    x, _ = world.sample(args.n, gen)
    x = x.float().clamp(-1, 1)
    modes = ["float64", "float32", "bf16"] + (["tf32"] if device.type == "cuda" else [])
    with torch.no_grad():
        per_mode = compare_modes(world, x, modes, args.repeats, args.class_batch)
    auto, _ = choose_precision(world, x, args.tolerance)
    result = {"flow": name, "device": str(device), "torch": torch.__version__,
              "machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
              "n_images": int(x.shape[0]), "num_classes": world.num_classes, "dims": int(x[0].numel()),
              "label_temperature": args.label_temperature, "tolerance": args.tolerance, "auto_picks": auto,
              "modes": per_mode}
    print(json.dumps(result, indent=2))
    if args.json_out:
        write_json_atomic(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
