"""The few lines a finished run prints: its wall time, where its results, report and timings
are, and its headline numbers (read from numbers.json by key; a key that is absent, e.g. in a
run that made one paper artifact only, is left out)."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Sequence
from pathlib import Path

from oracle.progress import format_seconds

#: Headline numbers: (numbers.json key pattern, most keys shown). Worlds other than ``base``
#: and experiments named otherwise match too; ``base`` comes first, then keys in the order of
#: their dotted parts, so the experiment named as its kind (``scaling.alpha.x``) comes before
#: its variants (``scaling-floor.alpha.x``; as plain strings "-" sorts before ".").
HEADLINES: tuple[tuple[str, int], ...] = (
    ("world.*.bayes_accuracy", 1),
    ("world.*.bayes_error_closed_form", 1),
    ("world.*.aleatoric_floor", 1),
    ("world.*.mutual_information", 1),
    ("*.alpha.*", 2),  # scaling exponents of the epistemic KL, per architecture
    ("*.bayes_gap_min", 1),
)


def headline_numbers(numbers: dict, headlines: Sequence[tuple[str, int]] = HEADLINES) -> list[str]:
    """``key = value unit`` for each headline key present in `numbers` (numbers.json's dict)."""
    lines = []
    for pattern, most in headlines:
        keys = sorted(fnmatch.filter(numbers, pattern), key=lambda k: (".base." not in k, k.split(".")))[:most]
        for key in keys:
            entry = numbers[key]
            value = entry.get("value") if isinstance(entry, dict) else entry
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                unit = entry.get("unit", "") if isinstance(entry, dict) else ""
                lines.append(f"{key} = {value:.4g}{f' {unit}' if unit and unit != '1' else ''}")
    return lines


def claims_line(claims_csv: str | os.PathLike) -> str | None:
    """The verdict count of a claims.csv as every output of a run gives it
    (`oracle.report.verdicts.counts_text`: the counted rows per verdict, the uncounted checks named
    beside them); None when the file cannot be read or has no verdict column."""
    import csv

    try:
        with open(claims_csv, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error):
        return None
    if not rows or "verdict" not in rows[0]:
        return None
    from oracle.report.verdicts import counts_text

    return counts_text(rows)


def paper_line(run: str | os.PathLike) -> str | None:
    """``<run>/paper.pdf  (12 pages)`` when the run has its paper PDF (`snakemake paper`; the page
    count from its job's log, ``<run>/logs/paper_pdf.log``), marked when it is older than the
    claims it shows; None without one."""
    import re

    pdf, claims, log = Path(run) / "paper.pdf", Path(run) / "claims.csv", Path(run) / "logs" / "paper_pdf.log"
    if not pdf.is_file():
        return None
    pages = re.findall(r"paper\.pdf: (\d+) pages", log.read_text(errors="replace")) if log.is_file() else []
    text = f"{pdf}" + (f"  ({pages[-1]} pages, every figure at its drawn size)" if pages else "")
    if claims.is_file() and claims.stat().st_mtime > pdf.stat().st_mtime:
        text += "  (older than claims.csv: `snakemake paper` remakes it)"
    return text


def run_summary(run: str | os.PathLike, wall_s: float, *, numbers: str | os.PathLike | None = None,
                timings: str | os.PathLike | None = None) -> str:
    """The end-of-run text: wall time `wall_s` (seconds, this invocation), the results folder
    `run`, how to make the report, the timing table and the headline numbers (`numbers`:
    default ``<run>/numbers.json``; `timings`: default ``<run>/timings.md``)."""
    run = Path(run)
    numbers = Path(numbers) if numbers is not None else run / "numbers.json"
    timings = Path(timings) if timings is not None else run / "timings.md"
    lines = [f"Run finished in {format_seconds(wall_s)} ({wall_s:.0f} s wall time).",
             f"  results: {run}/",
             f"  report:  {run}/report.html  (open it in a browser: the claims, every figure and table with its caption)"]
    if timings.is_file():
        lines.append(f"  timings: {timings}  (job-seconds per rule, wall time, critical path)")
    if (paper := paper_line(run)) is not None:
        lines.append(f"  paper:   {paper}")
    if (claims := claims_line(run / "claims.csv")) is not None:
        lines.append(f"  claims:  {claims}  ({run}/claims.md)")
    try:
        values = json.loads(numbers.read_text())
    except (OSError, ValueError):
        values = None
    if isinstance(values, dict):
        heads = headline_numbers(values)
        lines.append(f"  numbers: {numbers}  ({len(values)} numbers)" + (":" if heads else ""))
        lines += [f"    {h}" for h in heads]
    return "\n".join(lines)
