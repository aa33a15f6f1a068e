"""Compare finished runs number by number (`oracle.tools.comparison`):

    python -m oracle.tools.compare results/default results/default-seed1
    python -m oracle.tools.compare RUN_A RUN_B --fail-on moved,verdict   # exit 1 when any moved
    python -m oracle.tools.compare RUN_A RUN_B RUN_C --markdown cmp.md   # a table of runs by number

First a warning when the runs are different worlds: their data, oracle or worlds settings
differ, or a world's flow checkpoint (its sha256) or its prior, label or base temperature does
(`oracle.tools.world_check`: another seed retrains the flow). Then the runs (commit, date,
machine, seed, config hash, wall time, job-seconds, package versions), each world (same or
differs, and why), the config keys that differ and the claims side by side (verdict and value
per run). Then, for two runs, every number of either numbers.json with B - A, z from the two
runs' spreads and a flag (moved, changed, undefined, only_a, only_b, between_worlds, within,
same; "nothing moved" when all are within or the same and no verdict changed); for more, every
number in every run. --markdown writes the same as Markdown, --html as one page (the claims side
by side, each verdict in its colour; for two runs the numbers that did not agree). A run given
twice is compared with itself (its second copy named "<run> (again)").
Exit status: 0; 1 when a number carries a flag named by --fail-on (``verdict``: a claim's verdict
changed); 2 on a usage error or a run folder without numbers.json (one line naming the file).
"""

from __future__ import annotations

import argparse
import sys

from pathlib import Path

from oracle.errors import DataError, OracleError
from oracle.io.atomic import atomic_output
from oracle.workflow.provenance import read_record


def _config(run: str) -> dict:
    """The effective config of a run folder (its config.yaml); {} when the run has none (a run
    made before the config was written there). DataError when it is not YAML."""
    import yaml

    from oracle.io.yaml_text import parse_yaml

    path = Path(run) / "config.yaml"
    if not path.is_file():
        return {}
    try:
        config = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not YAML ({exc})") from None
    if not isinstance(config, dict):
        raise DataError(f"{path}: expected a mapping of config keys")
    return config

FAIL_ON = ("moved", "changed", "undefined", "only_a", "only_b", "between_worlds", "verdict")


def run_names(runs: list[str]) -> list[str]:
    """The runs' names in the tables: each folder as given, a repeat of one "<run> (again)"
    (then "(again 2)", ...), so that a run compared with itself has two columns."""
    names: list[str] = []
    for run in runs:
        name, n = run, 1
        while name in names:
            name = f"{run} (again{f' {n}' if n > 1 else ''})"
            n += 1
        names.append(name)
    return names


def main(argv: list[str] | None = None) -> int:
    from oracle.report.timings import recorded_timing
    from oracle.tools import comparison as cmp
    from oracle.tools.world_check import compare_worlds, differing_worlds, world_identity

    parser = argparse.ArgumentParser(prog="python -m oracle.tools.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="two or more run folders, results/<run> (the first is A)")
    parser.add_argument("--markdown", help="also write the comparison as Markdown to this file")
    parser.add_argument("--z", type=float, default=3.0, help="|z| beyond which a number has moved (default 3)")
    parser.add_argument("--fail-on", default="", help=f"comma-separated flags that make the exit status 1: {', '.join(FAIL_ON)}")
    parser.add_argument("--flagged", action="store_true", help="list only the numbers that are not within or same")
    parser.add_argument("--html", help="also write the comparison as one HTML page (the claims side by side)")
    parser.add_argument("--csv", help="also write the full comparison (every number, every column) to this CSV file")
    args = parser.parse_args(argv)
    fail_on = [f for f in args.fail_on.split(",") if f]
    if bad := [f for f in fail_on if f not in FAIL_ON]:
        parser.error(f"--fail-on: unknown flag(s) {', '.join(bad)} (choose from {', '.join(FAIL_ON)})")
    if len(args.runs) < 2:
        parser.error("give at least two run folders")
    if len(args.runs) > 2 and (fail_on or args.csv or args.flagged):
        parser.error("--fail-on, --csv and --flagged compare two runs (A and B); give two run folders")
    folders = dict(zip(run_names(args.runs), args.runs))
    try:
        loaded = {name: cmp.read_run(run) for name, run in folders.items()}
        configs = {name: _config(run) for name, run in folders.items()}
        records = {name: read_record(Path(run) / "numbers.json", missing_ok=True) for name, run in folders.items()}
        timings = {name: recorded_timing(run) for name, run in folders.items()}
        worlds = compare_worlds({name: world_identity(run, configs[name]) for name, run in folders.items()})
    except OracleError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    meta, diff = cmp.run_metadata(records, configs, timings), cmp.config_differences(configs)
    side = cmp.claims_by_run({name: c for name, (_, c) in loaded.items()})
    numbers = cmp.numbers_by_run({name: n for name, (n, _) in loaded.items()})
    df = claims = None
    if len(args.runs) == 2:
        (a, claims_a), (b, claims_b) = loaded.values()
        df = cmp.mark_between_worlds(cmp.compare_numbers(a, b, args.z), set(worlds["world"]), differing_worlds(worlds))
        claims = cmp.compare_claims(claims_a, claims_b) if claims_a is not None and claims_b is not None else None
    for warning in cmp.comparison_warnings(diff, worlds):
        print(warning, file=sys.stderr)
    head = cmp.format_runs_markdown(meta, diff, side, numbers, None, args.z, worlds).split("## Numbers")[0]
    sys.stdout.write(head)
    if df is not None:
        sys.stdout.write("## Numbers\n\n" + cmp.format_comparison(df, claims, tuple(folders), args.z,
                                                                  flagged_only=args.flagged))
    else:
        sys.stdout.write("## Numbers\n\n" + cmp.markdown_table(numbers))
    if args.markdown:
        text = cmp.format_runs_markdown(meta, diff, side, numbers, df, args.z, worlds, claims)
        with atomic_output(args.markdown) as tmp:
            tmp.write_text(text, encoding="utf-8")
    if args.html:
        page = cmp.format_runs_html(meta, diff, side, numbers, df, args.z, worlds, claims)
        with atomic_output(args.html) as tmp:
            tmp.write_text(page, encoding="utf-8")
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
