"""Write docs/findings.md (and docs/findings/*.png) from one finished run: its claims table beside
the paper's values, the paper's figures with the run's captions, date, machine and time
(`oracle.tools.findings_doc`). Not a workflow rule: a page of the documentation, regenerated
from a run's artifacts after the run.

    python scripts/tools/findings_doc.py results/cpu-study \
        --command "snakemake --cores 2 --configfile presets/cpu-study.yaml" [--doc docs/findings.md]
    python scripts/tools/findings_doc.py results/default --readme README.md   # the README's default-run block
"""

from __future__ import annotations

import argparse
import sys

from oracle.errors import OracleError
from oracle.tools.findings_doc import README_BEGIN, README_END, readme_block, write_findings_page
from oracle.report.generated_text import write_generated_part


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a finished run, results/<run>")
    ap.add_argument("--doc", default="docs/findings.md", help="the page to write (default docs/findings.md)")
    ap.add_argument("--command", default="make demo", help="the command that made the run (shown on the page)")
    ap.add_argument("--readme", help="rewrite this file's default-run block instead of the page")
    ap.add_argument("--conditions", default="", help="what the time was measured under, e.g. 'idle machine'")
    args = ap.parse_args(argv)
    try:
        if args.readme:
            write_generated_part(args.readme, README_BEGIN, README_END, readme_block(args.run_dir, args.command, args.conditions))
            print(args.readme)
            return 0
        for path in write_findings_page(args.run_dir, args.doc, args.command, args.conditions):
            print(path)
    except OracleError as exc:
        print(f"findings_doc: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
