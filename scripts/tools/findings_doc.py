"""Write docs/findings.md (and docs/findings/*.png) from one finished run: its claims table beside
the paper's values, the paper's figures with the run's captions, date, machine and time
(`oracle.report.findings_doc`). Not a workflow rule: a page of the documentation, regenerated
from a run's artifacts after the run.

    python scripts/tools/findings_doc.py results/cpu-study \
        --command "snakemake --cores 2 --configfile presets/cpu-study.yaml" [--doc docs/findings.md]
"""

from __future__ import annotations

import argparse
import sys

from oracle.errors import OracleError
from oracle.report.findings_doc import write_findings_page


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a finished run, results/<run>")
    ap.add_argument("--doc", default="docs/findings.md", help="the page to write (default docs/findings.md)")
    ap.add_argument("--command", required=True, help="the command that made the run (shown on the page)")
    args = ap.parse_args(argv)
    try:
        for path in write_findings_page(args.run_dir, args.doc, args.command):
            print(path)
    except OracleError as exc:
        print(f"findings_doc: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
