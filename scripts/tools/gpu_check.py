"""Check a GPU install at a preset's real model shapes before GPU-days are spent on it
(`oracle.tools.gpu.check`): the posterior in every precision mode, flow training steps in bf16, one
sample shard, one classifier.

    python scripts/tools/gpu_check.py --preset presets/afhq256.yaml --device cuda
    python scripts/tools/gpu_check.py --preset presets/imagenet64.yaml --device cuda --only posterior --only shard
    python scripts/tools/gpu_check.py --preset presets/afhq256.yaml --small     # every code path on a CPU, in minutes

Prints one line per check ("<check> ok: ..." or "<check> FAILED ...: <error>"); exits 1 when
a check failed. docs/gpu.md says what each line should show.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from oracle.devices import pick_device
from oracle.errors import ConfigError
from oracle.io.atomic import write_json_atomic
from oracle.workflow.plan.config import check_config, load_yaml, validate_config
from oracle.tools.gpu.check import CHECKS, run_checks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", required=True, type=Path, help="a paper preset (presets/afhq256.yaml, ...)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--only", action="append", choices=CHECKS, help="run only this check (repeatable)")
    ap.add_argument("--small", action="store_true", help="shrunken shapes: proves the code paths on a CPU")
    ap.add_argument("--arch", default=None, help="classifier to check (a key of classifiers.archs; "
                                                 "default: the first one an experiment trains)")
    ap.add_argument("--json-out", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args(argv)
    try:
        cfg = load_yaml(args.preset)
        validate_config(cfg, REPO / "config.schema.yaml")
        check_config(cfg)
        device = pick_device(args.device)
        print(f"{args.preset} on {device}{' (small shapes)' if args.small else ''}", flush=True)
        results = run_checks(cfg, device, args.only, args.small, args.arch, echo=lambda s: print(s, flush=True))
    except ConfigError as exc:
        print(f"gpu_check: {exc}", file=sys.stderr)
        return 2
    if args.json_out:
        write_json_atomic(args.json_out, {"preset": str(args.preset), "device": str(device), "small": args.small,
                                          "results": results})
    return 0 if len(results) == len(args.only or CHECKS) else 1


if __name__ == "__main__":
    raise SystemExit(main())
