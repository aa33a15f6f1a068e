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

from oracle.errors import DataError
from oracle.io.atomic import atomic_output
from oracle.io.yaml_text import parse_yaml
from oracle.report.claims_doc import margin_of
from oracle.report.verdicts import counts_text, verdict_cell
from oracle.report.tables import markdown_cell
from oracle.report.timings import benchmark_files, job_intervals, read_benchmark, wall_time



@dataclass(frozen=True)
class Figure:
    """One paper figure of a run: its paper id, its PNG and its caption file (absolute paths)."""
    paper_id: str
    png: Path
    caption: Path


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
    """The claims table, compact (finding, paper, the paper's own verdict where claims.csv has
    it, this run, 95% interval, verdict with its margin), then what would decide each unresolved
    row (claims.csv's ``to decide``, the power analysis of the run's own variance), the rows whose
    posing or threshold reads a world constant (`world_conditional`), and each row's rule,
    numbered as the table's rows. `claims` is a run's claims.csv."""
    missing = {"id", "finding", "paper", "this run", "uncertainty", "rule", "verdict"} - set(claims.columns)
    if missing:
        raise DataError(f"claims.csv: columns {sorted(missing)} missing")
    paper_verdict = "paper verdict" in claims.columns
    lines = ["| # | finding | paper | " + ("paper's numbers | " if paper_verdict else "")
             + "this run | uncertainty | verdict |", "|---|---|---|" + ("---|" if paper_verdict else "") + "---|---|---|"]
    rows = claims.to_dict("records")
    for i, r in enumerate(rows, 1):
        m = margin_of(r)
        margin = f" ({m:.2g} SE)" if m is not None else ""
        lines.append(f"| {i} | {markdown_cell(r['finding'])} | {markdown_cell(r['paper'])} | "
                     + (f"{markdown_cell(r['paper verdict'])} | " if paper_verdict else "")
                     + f"{markdown_cell(r['this run'])} | {markdown_cell(r['uncertainty'])} | "
                     f"**{markdown_cell(verdict_cell(r))}**{margin} |")
    lines += ["", f"Verdicts: {counts_text(rows)}.", ""]
    if paper_verdict:
        lines += ["paper's numbers: the same rule applied to the paper's printed numbers. The margin after a "
                  "verdict: how many of its interval's own SEs the interval end nearest the threshold lies from "
                  "it (how far the interval moves before the verdict can change).", ""]
    undecided = [(r["id"], str(r.get("to decide") or "")) for r in rows if r["verdict"] == "unresolved"]
    if undecided:
        lines += ["What would decide each unresolved row (the power analysis of this run's own variance "
                  "components: the seeds at this run's test rows, or the test rows at its seeds):", ""]
        lines += [f"- `{rid}`: {markdown_cell(text) if text else 'no check carries variance components to size'}"
                  for rid, text in undecided]
        lines.append("")
    conditional = world_conditional(rows)
    if conditional:
        lines += ["Conditional on the trained world: the flow is trained in float32, whose kernels differ by CPU "
                  "model, so another machine trains another world (another Bayes error and floor). These rows "
                  "read a world constant in their posing or threshold (a `world.*` number), so their verdict, "
                  "not only their digits, can change with the world: "
                  + ", ".join(f"`{rid}`" for rid in conditional) + ". No run here measured the verdicts across "
                  "flow seeds.", ""]
    lines += ["The rule behind each verdict (the 95% intervals are over seeds unless a row says otherwise):", ""]
    lines += [f"{i}. `{r['id']}`: {r['rule']}" for i, r in enumerate(rows, 1)]
    return "\n".join(lines)


def world_conditional(rows: list[Mapping]) -> list[str]:
    """The ids of claims rows that read a world constant (a ``world.<name>.*`` key among their
    ``numbers``): their posing or threshold moves with the trained world."""
    return [r["id"] for r in rows if any(k.startswith("world.") for k in str(r.get("numbers") or "").split())]


def _experiment_worlds(spec: Mapping) -> list[str]:
    """The worlds an experiment entry trains or evaluates on, in its entry's order."""
    out = [spec["world"]] if spec.get("world") else []
    return out + [w for w in spec.get("worlds") or [] if w not in out]


def worlds_section(config: Mapping, numbers: Mapping[str, Mapping], claims: pd.DataFrame) -> str:
    """Which world poses which question: per world of the run, its parameters (base temperature
    tau, label temperature T, prior), its Bayes error and aleatoric floor (± SE over its samples,
    numbers.json), the experiments that use it and the findings judged on its experiments
    (claims.csv's ``numbers`` name the experiment a row read)."""
    experiments = config.get("experiments") or {}
    judged: dict[str, list[str]] = {}
    for r in claims.to_dict("records"):
        keys = str(r.get("numbers") or "").split()
        exp = keys[0].split(".", 1)[0] if keys else None
        spec = experiments.get(exp)
        if spec and spec.get("world"):
            judged.setdefault(spec["world"], []).append(f"`{r['id']}` ({r['verdict']})")
    lines = ["| world | τ | T | prior | Bayes error (%) | aleatoric floor (nats) | experiments | findings judged there |",
             "|---|---|---|---|---|---|---|---|"]
    base = config["worlds"]["base"]
    for name, entry in config["worlds"].items():
        entry = entry or {}
        get = lambda k: entry.get(k, base.get(k))  # noqa: E731 - a variant inherits the base world's
        prior = get("prior")
        be, fl = numbers.get(f"world.{name}.bayes_error", {}), numbers.get(f"world.{name}.aleatoric_floor", {})

        def pm(e: Mapping, scale: float) -> str:
            if e.get("value") is None:
                return "--"
            return f"{scale * e['value']:.3g} ± {scale * e['se']:.2g}" if e.get("se") else f"{scale * e['value']:.3g}"

        users = [f"`{x}`" for x, spec in experiments.items() if name in _experiment_worlds(spec)]
        if name == "base" and (config.get("validation") or {}).get("enabled"):
            users.insert(0, "validation")
        lines.append(f"| `{name}` | {float(get('base_temperature')):g} | {float(get('label_temperature')):g} | "
                     f"{'uniform' if not prior else 'skewed'} | {pm(be, 100)} | {pm(fl, 1)} | {', '.join(users)} | "
                     f"{', '.join(judged.get(name, []))} |")
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
    numbers_record = run_dir / "numbers.json.prov.json"
    numbers_code = (json.loads(numbers_record.read_text()).get("code") or {}) if numbers_record.is_file() else code
    return {"date": record["created_utc"], "device": record.get("device"), "hostname": record.get("hostname"),
            "commit": code.get("commit"), "dirty": code.get("dirty"), "numbers_commit": numbers_code.get("commit"),
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


def _run_inputs(run_dir: Path) -> tuple[dict, pd.DataFrame, dict]:
    """The run's effective config, claims.csv and numbers.json; DataError naming what is missing."""
    config_path, claims_path, numbers_path = run_dir / "config.yaml", run_dir / "claims.csv", run_dir / "numbers.json"
    for path, what in ((config_path, "the run's effective config"), (claims_path, "run the workflow's `claims` target"),
                       (numbers_path, "run the workflow's `numbers` target")):
        if not path.is_file():
            raise DataError(f"{path}: missing ({what}; is {run_dir} a finished run?)")
    return (parse_yaml(config_path.read_text()), pd.read_csv(claims_path, keep_default_na=False),
            json.loads(numbers_path.read_text()))


def _facts_lines(run_dir: Path, command: str, facts: Mapping, conditions: str = "") -> list[str]:
    cpu = cpu_model()
    machine = f"{facts['device']} on host {facts['hostname']}" + (f" ({cpu}, read when this page was generated)" if cpu else "")
    commit = f"{facts['commit']}" + (" with uncommitted changes" if facts["dirty"] else "")
    if facts.get("numbers_commit") and facts["numbers_commit"] != facts["commit"]:
        commit += f" (claims); numbers.json and everything before it: commit {facts['numbers_commit']}"
    return [f"- Command: `{command}`",
            f"- Date (claims.csv written, UTC): {facts['date']}",
            f"- Machine: {machine}; torch {facts['torch']}",
            f"- Code: commit {commit}",
            f"- Time: {facts['span_s'] / 60:.1f} min from the first job's start to the last job's end "
            f"({facts['jobs']} jobs, {facts['job_s'] / 60:.1f} job-minutes; timings.md of the run has the rest)"
            + (f"; {conditions}" if conditions else "")]


#: The README's block of the embedded default's results (`readme_block`).
README_BEGIN = ("<!-- default-run: generated by `python scripts/tools/findings_doc.py results/default --readme README.md`; "
                "tests/test_findings_doc.py checks its worlds against config.yaml -->")
README_END = "<!-- end default-run -->"


def readme_block(run_dir: str | os.PathLike, command: str, conditions: str = "") -> str:
    """The README's account of one run of the embedded default, every sentence from its
    artifacts: where and when it ran, which world poses which question (`worlds_section`) and
    the verdicts (`claims_section`, without the rules: claims.md of the run has them)."""
    run_dir = Path(run_dir)
    config, claims, numbers = _run_inputs(run_dir)
    facts = run_facts(run_dir)
    lines = [f"A run of the embedded default, `{config['run']}` (generated from its artifacts):", "",
             *_facts_lines(run_dir, command, facts, conditions), "",
             "Which world poses which question (Bayes error and floor ± SE over the world's samples):", "",
             worlds_section(config, numbers, claims), "",
             f"Verdicts: {counts_text(claims.to_dict('records'))}"
             + f" (`results/{config['run']}/claims.md` has each row's value, interval and rule):", "",
             "| finding | this run | verdict |", "|---|---|---|"]
    lines += [f"| `{r['id']}`: {markdown_cell(r['finding'])} | {markdown_cell(r['this run'])} | **{verdict_cell(r)}** |"
              for r in claims.to_dict("records")]
    return "\n".join(lines) + "\n"


def readme_worlds(text: str) -> dict[str, tuple[float, float, str]]:
    """{world: (tau, T, prior)} of a README block written by `readme_block`: what
    tests/test_findings_doc.py compares with config.yaml's worlds."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].startswith("`") and cells[1] not in ("τ", "---"):
            out[cells[0].strip("`")] = (float(cells[1]), float(cells[2]), cells[3])
    return out


def findings_page(run_dir: str | os.PathLike, doc: str | os.PathLike, command: str,
                  figure_dir_name: str = "findings", conditions: str = "") -> tuple[str, dict[Path, Path]]:
    """The page's Markdown for the run in `run_dir` (``results/<run>``) to be written at `doc`,
    and the figure copies it links: ``{source PNG: destination}`` with destinations in
    ``<doc's folder>/<figure_dir_name>/``. `command` is the command that made the run."""
    run_dir, doc = Path(run_dir), Path(doc)
    config, claims, numbers = _run_inputs(run_dir)
    text = [
        f"# Findings of the run `{config['run']}`",
        "",
        "Generated from the run's artifacts by `scripts/tools/findings_doc.py`; do not edit by hand. The "
        "numbers describe the world this run built (see the config), not the paper's worlds; the paper's "
        "value stands beside each.",
        "",
        *_facts_lines(run_dir, command, run_facts(run_dir), conditions),
        "",
        "## Which world poses which question",
        "",
        worlds_section(config, numbers, claims),
        "",
        "## The paper's findings against this run",
        "",
        *([f"![claims]({figure_dir_name}/claims.png)", ""] if (run_dir / "claims.png").is_file() else []),
        claims_section(claims),
        "",
        "## Figures",
        "",
        "Each caption is the run's own (its `.caption.rst`): what the figure shows, then what this run's data "
        "say beside the paper's value.",
    ]
    copies: dict[Path, Path] = {}
    if (run_dir / "claims.png").is_file():
        copies[run_dir / "claims.png"] = doc.parent / figure_dir_name / "claims.png"
    for fig in paper_figures(run_dir, config):
        dest = doc.parent / figure_dir_name / f"{fig.paper_id}-{fig.png.name}"
        copies[fig.png] = dest
        caption = " ".join(fig.caption.read_text().split())
        text += ["", f"### {fig.paper_id}: `{config['paper'][fig.paper_id]}`", "",
                 f"![{fig.paper_id}]({figure_dir_name}/{dest.name})", "", caption]
    return "\n".join(text) + "\n", copies


def write_findings_page(run_dir: str | os.PathLike, doc: str | os.PathLike, command: str,
                        conditions: str = "") -> list[Path]:
    """Write the page at `doc` and its figure copies (each atomically); returns the files written.
    `conditions`: what the time was measured under (e.g. other work on the machine), shown
    after it."""
    text, copies = findings_page(run_dir, doc, command, conditions=conditions)
    written = []
    for src, dest in copies.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(dest) as tmp:
            shutil.copyfile(src, tmp)
        written.append(dest)
    with atomic_output(doc) as tmp:
        Path(tmp).write_text(text)
    return [*written, Path(doc)]
