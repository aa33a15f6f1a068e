"""Checks of generated tables in the tools they are made for: a Markdown table keeps its column
count in every row, and every .tex table compiles with a real LaTeX engine in a plain `article`
with booktabs. Used by tests/test_table_formats.py (constructed tables) and the smoke-run tests
(every table a run writes)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def markdown_column_counts(text: str) -> list[int]:
    """The number of cells of every row of the Markdown pipe tables in `text` (header, rule and
    body rows), counting only unescaped pipes: a table that renders has one count."""
    counts = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|"):
            counts.append(len(_UNESCAPED_PIPE.findall(line)) - 1)
    return counts


def pdflatex() -> str:
    """The pdflatex binary; the test is skipped without one unless ORACLE_REQUIRE_LATEX=1 (set by
    .ci/run after installing it), where its absence fails."""
    exe = shutil.which("pdflatex")
    if exe is None:
        if os.environ.get("ORACLE_REQUIRE_LATEX") == "1":
            pytest.fail("ORACLE_REQUIRE_LATEX=1 but pdflatex is not on the PATH (scripts/ci/install_latex.sh)")
        pytest.skip("pdflatex not installed (scripts/ci/install_latex.sh installs it)")
    return exe


def compile_tables(tex_files: Iterable[Path], workdir: Path, twocolumn: bool = False) -> tuple[int, str]:
    """Compile every file of `tex_files` in one bare ``article`` with booktabs (each on its own
    page, ``\\input`` as a manuscript would; `twocolumn`: ``[twocolumn]{article}``); returns
    (exit status, the log's error lines and the files), nonzero on the first error
    (``-halt-on-error``)."""
    files = [Path(p).resolve() for p in tex_files]
    body = "\n".join(f"\\clearpage\\input{{{p.as_posix()}}}" for p in files)
    doc = workdir / "tables.tex"
    doc.write_text(f"\\documentclass{'[twocolumn]' if twocolumn else ''}{{article}}\n\\usepackage{{booktabs}}\n"
                   "\\begin{document}\n" + body + "\n\\end{document}\n")
    proc = subprocess.run([pdflatex(), "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("!") or "Error" in line]
    return proc.returncode, "\n".join(errors[:20] + [f"({len(files)} files)"])


def overfull_pt(workdir: Path) -> list[float]:
    """How far (pt) each overfull box of the last `compile_tables` in `workdir` sticks out
    (its log's "Overfull \\hbox (12.3pt too wide)" lines): a table wider than the text."""
    log = (Path(workdir) / "tables.log").read_text(errors="replace")
    return [float(v) for v in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)]


def floats_too_large_pt(workdir: Path) -> list[float]:
    """How far (pt) each float of the last `compile_tables` in `workdir` is too tall for its page
    (its log's "Float too large for page by 172.3pt" lines): a table that runs off the page."""
    log = (Path(workdir) / "tables.log").read_text(errors="replace")
    return [float(v) for v in re.findall(r"Float too large for page by ([\d.]+)pt", log)]


def latex_labels(tex_files: Iterable[Path]) -> list[str]:
    """Every ``\\label{...}`` of `tex_files`, in order (a repeated one breaks \\ref)."""
    return [m for p in tex_files for m in re.findall(r"\\label\{([^}]*)\}", Path(p).read_text())]
