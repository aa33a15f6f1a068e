"""The SLURM job-count tables of README.md and docs/slurm.md, from dry runs
(`scripts/ci/slurm_job_count.sh`, no SLURM needed), written between their markers or checked
against them.

    python scripts/ci/slurm_tables.py            # rewrite the tables
    python scripts/ci/slurm_tables.py --check    # exit 1, naming the stale rows, if it is out of date

The job counts change whenever a rule, a preset or the bundling changes; tests/test_readme_commands.py
runs --check, so a stale table fails the test suite. Environment: SNAKEMAKE and PYTHON as for
slurm_job_count.sh (default: this interpreter's venv).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SLURM_DOC = REPO / "docs" / "slurm.md"
#: row name -> config file relative to the repository (None: the embedded default)
CONFIGS = {"default": None, "smoke": "tests/smoke/config.yaml", "afhq256": "presets/afhq256.yaml",
           "imagenet64": "presets/imagenet64.yaml", "imagenet128": "presets/imagenet128.yaml"}


def count(config: str | None, *extra: str) -> dict[str, int]:
    """slurm_job_count.sh's numbers for one config: {jobs, local, classifier, prediction,
    bundles, K, unbundled, sbatch_submissions, worst_bundle_time_limit (minutes)}."""
    bindir = Path(sys.executable).parent
    env = {**os.environ, "SNAKEMAKE": os.environ.get("SNAKEMAKE", str(bindir / "snakemake")),
           "PYTHON": os.environ.get("PYTHON", sys.executable)}
    proc = subprocess.run(["bash", str(REPO / "scripts/ci/slurm_job_count.sh"), *([config] if config else []), *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"slurm_job_count.sh {config or ''} failed:\n{proc.stderr[-3000:]}")
    line = proc.stdout.strip().splitlines()[-1]
    out = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    if not {"jobs", "sbatch_submissions", "worst_bundle_time_limit", "K"} <= set(out):
        raise SystemExit(f"slurm_job_count.sh printed an unexpected line: {line!r}")
    return out


def tables() -> dict[Path, str]:
    """The generated text of each file: {README.md: its table, docs/slurm.md: its table}."""
    c = {name: count(path) for name, path in CONFIGS.items()}
    unbundled = count(CONFIGS["afhq256"], "--group-components", "classifiers=1")["sbatch_submissions"]
    readme = ("| config | jobs in the DAG | SLURM submissions | longest bundle's time limit |\n|---|---|---|---|\n" +
              "".join(f"| {'embedded default' if name == 'default' else name} | {n['jobs']} | {n['sbatch_submissions']} "
                      f"| {n['worst_bundle_time_limit']} min |\n" for name, n in c.items() if name != "smoke"))
    doc = ("| config | jobs | on the login node | classifiers (training jobs) | prediction jobs | bundles "
           f"(K={c['default']['K']}) | unbundled classifiers | sbatch submissions | worst bundle time limit |\n"
           "|---|---|---|---|---|---|---|---|---|\n" +
           "".join(f"| `{path or 'config.yaml'}`{' (default)' if path is None else ''} | {n['jobs']} | {n['local']} "
                   f"| {n['classifier']} | {n['prediction']} | {n['bundles']} | {n['unbundled']} "
                   f"| {n['sbatch_submissions']} | {n['worst_bundle_time_limit']} min |\n"
                   for (name, path), n in zip(CONFIGS.items(), c.values())) +
           f"\n(Without bundling, `--group-components classifiers=1`, AFHQ would take {unbundled} submissions.)\n")
    return {README: readme, SLURM_DOC: doc}


def current(path: Path, text: str) -> str:
    """The generated part of a file's text, between the markers."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: the markers {BEGIN!r} ... {END!r} are missing")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when stale")
    args = ap.parse_args(argv)
    for path in (README, SLURM_DOC):
        current(path, path.read_text())  # the markers are there before minutes of dry runs
    status = 0
    for path, new in tables().items():
        text = path.read_text()  # read after the dry runs: the file may have been edited meanwhile
        old = current(path, text)
        if args.check:
            if old != new:
                stale = sorted(set(new.splitlines()) - set(old.splitlines()))
                print(f"{path}: the SLURM job counts are stale; run python scripts/ci/slurm_tables.py "
                      f"(measured: {'; '.join(stale)})")
                status = 1
            continue
        before, rest = text.split(BEGIN, 1)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(before + BEGIN + "\n" + new + END + rest.split(END, 1)[1])
        os.replace(tmp, path)
        print(f"{path}:\n{new}", end="")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
