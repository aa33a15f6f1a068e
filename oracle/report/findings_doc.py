"""A findings page (docs/findings.md) from one finished run: its claims table beside the paper's
values, the paper's figures with this run's captions, and where, when and how long it ran.

Every number on the page is read from the run's own artifacts: ``claims.csv`` (the verdicts),
``<figure>.caption.rst`` (the finding sentences), the provenance record of ``claims.csv``
(date, machine, code version, packages) and the benchmark files (wall time, job-seconds). The
page is regenerated, never edited: ``scripts/tools/findings_doc.py RUN_DIR`` rewrites it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from oracle.errors import DataError
from oracle.io.atomic import atomic_output
from oracle.report.timings import benchmark_files, job_intervals, read_benchmark, wall_time

VERDICT_ORDER = ("supported", "contradicted", "unresolved", "not run")


@dataclass(frozen=True)
class Figure:
    """One paper figure of a run: its paper id, its PNG and its caption file (absolute paths)."""
    paper_id: str
    png: Path
    caption: Path


def _md_cell(text: object) -> str:
    """A value as one Markdown table cell (pipes escaped, newlines folded)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def paper_figures(run_dir: Path, config: Mapping) -> list[Figure]:
    """The figures of the run's ``paper:`` map (ids ``fig*``), in the paper's order, with their
    files under `run_dir`: ``<kind>/<experiment>/figures/<artifact>`` for an experiment,
    ``validation/figures/<artifact>`` for validation. DataError names a missing file."""
    out = []
    experiments = config.get("experiments") or {}
    ids = [pid for pid in (config.get("paper") or {}) if pid.startswith("fig")]
    for pid in sorted(ids, key=lambda p: (len(p), p)):
        owner, artifact = config["paper"][pid].split("/", 1)
        folder = (run_dir / "validation" if owner == "validation"
                  else run_dir / experiments[owner]["kind"] / owner) / "figures"
        fig = Figure(pid, folder / f"{artifact}.png", folder / f"{artifact}.caption.rst")
        for path in (fig.png, fig.caption):
            if not path.is_file():
                raise DataError(f"{path}: paper {pid}'s file is missing (run `snakemake {pid}` first)")
        out.append(fig)
    return out


def claims_section(claims: pd.DataFrame) -> str:
    """The claims table, compact (finding, paper, this run, 95% interval, verdict), then each
    row's rule, numbered as the table's rows. `claims` is a run's claims.csv."""
    missing = {"id", "finding", "paper", "this run", "uncertainty", "rule", "verdict"} - set(claims.columns)
    if missing:
        raise DataError(f"claims.csv: columns {sorted(missing)} missing")
    lines = ["| # | finding | paper | this run | uncertainty | verdict |", "|---|---|---|---|---|---|"]
    rows = claims.to_dict("records")
    for i, r in enumerate(rows, 1):
        lines.append(f"| {i} | {_md_cell(r['finding'])} | {_md_cell(r['paper'])} | {_md_cell(r['this run'])} | "
                     f"{_md_cell(r['uncertainty'])} | **{_md_cell(r['verdict'])}** |")
    counts = claims["verdict"].value_counts()
    lines += ["", "Verdicts: " + ", ".join(f"{v} {int(counts.get(v, 0))}" for v in VERDICT_ORDER) + ".", "",
              "The rule behind each verdict (the 95% intervals are over seeds unless a row says otherwise):", ""]
    lines += [f"{i}. `{r['id']}`: {r['rule']}" for i, r in enumerate(rows, 1)]
    return "\n".join(lines)


def run_facts(run_dir: Path) -> dict[str, object]:
    """Where, when and how long: from the provenance record of ``claims.csv`` (``created_utc``,
    ``device``, ``hostname``, code commit and dirty flag, torch version) and the benchmark files
    (jobs, job-seconds, wall seconds from the first job's start to the last job's end)."""
    record_path = run_dir / "claims.csv.prov.json"
    if not record_path.is_file():
        raise DataError(f"{record_path}: no provenance record (is {run_dir} a finished run?)")
    record = json.loads(record_path.read_text())
    benchmarks = [p for paths in benchmark_files(run_dir / "benchmarks").values() for p in paths]
    wall = wall_time(job_intervals(run_dir / "benchmarks"))
    code = record.get("code") or {}
    return {"date": record["created_utc"], "device": record.get("device"), "hostname": record.get("hostname"),
            "commit": code.get("commit"), "dirty": code.get("dirty"),
            "torch": (record.get("packages") or {}).get("torch"),
            "jobs": len(benchmarks), "job_s": sum(read_benchmark(p)["s"] for p in benchmarks),
            "span_s": wall["span_s"], "busy_s": wall["busy_s"]}


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (None where there is none): read when the page
    is generated, so the page says so."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def findings_page(run_dir: str | os.PathLike, doc: str | os.PathLike, command: str,
                  figure_dir_name: str = "findings") -> tuple[str, dict[Path, Path]]:
    """The page's Markdown for the run in `run_dir` (``results/<run>``) to be written at `doc`,
    and the figure copies it links: ``{source PNG: destination}`` with destinations in
    ``<doc's folder>/<figure_dir_name>/``. `command` is the command that made the run."""
    run_dir, doc = Path(run_dir), Path(doc)
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise DataError(f"{config_path}: missing (the run's effective config; is {run_dir} a finished run?)")
    config = yaml.safe_load(config_path.read_text())
    claims_path = run_dir / "claims.csv"
    if not claims_path.is_file():
        raise DataError(f"{claims_path}: missing (run the workflow's `claims` target)")
    claims = pd.read_csv(claims_path, keep_default_na=False)
    facts = run_facts(run_dir)
    cpu = cpu_model()
    machine = f"{facts['device']} on host {facts['hostname']}" + (f" ({cpu}, read when this page was generated)" if cpu else "")
    commit = f"{facts['commit']}" + (" with uncommitted changes" if facts["dirty"] else "")
    text = [
        f"# Findings of the run `{config['run']}`",
        "",
        "Generated from the run's artifacts by `scripts/tools/findings_doc.py`; do not edit by hand. The "
        "numbers describe the world this run built (see the config), not the paper's worlds; the paper's "
        "value stands beside each.",
        "",
        f"- Command: `{command}`",
        f"- Date (claims.csv written, UTC): {facts['date']}",
        f"- Machine: {machine}; torch {facts['torch']}",
        f"- Code: commit {commit}",
        f"- Time: {facts['span_s'] / 60:.1f} min from the first job's start to the last job's end "
        f"({facts['jobs']} jobs, {facts['job_s'] / 60:.1f} job-minutes; timings.md of the run has the rest)",
        "",
        "## The paper's findings against this run",
        "",
        claims_section(claims),
        "",
        "## Figures",
        "",
        "Each caption is the run's own (its `.caption.rst`): what the figure shows, then what this run's data "
        "say beside the paper's value.",
    ]
    copies: dict[Path, Path] = {}
    for fig in paper_figures(run_dir, config):
        dest = doc.parent / figure_dir_name / f"{fig.paper_id}-{fig.png.name}"
        copies[fig.png] = dest
        caption = " ".join(fig.caption.read_text().split())
        text += ["", f"### {fig.paper_id}: `{config['paper'][fig.paper_id]}`", "",
                 f"![{fig.paper_id}]({figure_dir_name}/{dest.name})", "", caption]
    return "\n".join(text) + "\n", copies


def write_findings_page(run_dir: str | os.PathLike, doc: str | os.PathLike, command: str) -> list[Path]:
    """Write the page at `doc` and its figure copies (each atomically); returns the files written."""
    text, copies = findings_page(run_dir, doc, command)
    written = []
    for src, dest in copies.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(dest) as tmp:
            shutil.copyfile(src, tmp)
        written.append(dest)
    with atomic_output(doc) as tmp:
        Path(tmp).write_text(text)
    return [*written, Path(doc)]
