"""Compare two finished runs number by number (`oracle.report.compare`):

    python -m oracle.workflow.provenance.compare results/default results/default-seed1
    python -m oracle.workflow.provenance.compare RUN_A RUN_B --fail-on moved,verdict   # exit 1 when any moved

Prints every number of either numbers.json with B - A, z from the two runs' spreads and a flag
(moved, changed, undefined, only_a, only_b, within, same), and the claims whose verdict changed.
Exit status: 0; 1 when a number carries a flag named by --fail-on (``verdict``: a claim's verdict
changed); 2 on a usage error or a run folder without numbers.json (one line naming the file).
"""

from __future__ import annotations

import argparse
import sys

from oracle.errors import OracleError

FAIL_ON = ("moved", "changed", "undefined", "only_a", "only_b", "verdict")


def main(argv: list[str] | None = None) -> int:
    from oracle.report.compare import compare_claims, compare_numbers, format_comparison, read_run

    parser = argparse.ArgumentParser(prog="python -m oracle.workflow.provenance.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_a", help="a run folder, results/<run>")
    parser.add_argument("run_b", help="the run to compare with it")
    parser.add_argument("--z", type=float, default=3.0, help="|z| beyond which a number has moved (default 3)")
    parser.add_argument("--fail-on", default="", help=f"comma-separated flags that make the exit status 1: {', '.join(FAIL_ON)}")
    parser.add_argument("--flagged", action="store_true", help="list only the numbers that are not within or same")
    parser.add_argument("--csv", help="also write the full comparison (every number, every column) to this CSV file")
    args = parser.parse_args(argv)
    fail_on = [f for f in args.fail_on.split(",") if f]
    if bad := [f for f in fail_on if f not in FAIL_ON]:
        parser.error(f"--fail-on: unknown flag(s) {', '.join(bad)} (choose from {', '.join(FAIL_ON)})")
    try:
        (a, claims_a), (b, claims_b) = read_run(args.run_a), read_run(args.run_b)
    except OracleError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    df = compare_numbers(a, b, args.z)
    claims = compare_claims(claims_a, claims_b) if claims_a is not None and claims_b is not None else None
    sys.stdout.write(format_comparison(df, claims, (args.run_a, args.run_b), args.z, flagged_only=args.flagged))
    if args.csv:
        df.to_csv(args.csv, index=False)
    failed = [f"{int((df['flag'] == f).sum())} number(s) flagged {f}" for f in fail_on
              if f != "verdict" and (df["flag"] == f).any()]
    if "verdict" in fail_on and claims is not None and claims["changed"].any():
        failed.append(f"{int(claims['changed'].sum())} claim verdict(s) changed")
    if failed:
        print(f"compare: {'; '.join(failed)} (--fail-on {args.fail_on})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
