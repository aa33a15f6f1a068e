"""The reproduced paper as one PDF: the run's claims table (the paper's statement beside this
run's value and verdict), then every experiment's and the validation's figures and tables with
their captions, in the report's order (`oracle.report.html_report.report_items`), compiled by
pdflatex.

`paper_latex(sections, claims_csv, title, note)` writes the document: a plain ``article`` with
booktabs, graphicx and longtable, each table the run's own generated .tex (its caption and label
inside), each figure its .pdf with its caption file's text. Paths in the document are relative to
the run folder, where `compile_pdf` runs pdflatex. Every text goes through
`oracle.report.tables.latex_escape` (no Unicode input needed).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from oracle.errors import DataError
from oracle.io.atomic import atomic_output
from oracle.report.captions import CAPTION_SUFFIX, read_caption
from oracle.report.html_report import Section
from oracle.report.tables import latex_escape
from oracle.report.verdicts import counts_text

#: The claims table's columns in the PDF: (claims.csv column, heading, width); the paper's verdict
#: is the rule on its printed numbers (`oracle.report.claims_doc.claims_rows`), "–" in a claims.csv
#: from before that column.
CLAIM_COLUMNS = (("id", "Claim", "2.3cm"), ("paper", "The paper", "4.1cm"), ("this run", "This run", "5.2cm"),
                 ("verdict", "Verdict", "1.7cm"), ("paper verdict", "On the paper's numbers", "1.7cm"))
_OPTIONAL = {"paper verdict"}
#: Floats LaTeX may hold unplaced before it stops (its limit is 18): a page break flushes them first.
_FLOATS_PER_FLUSH = 8


def _claims_table(claims_csv: str | os.PathLike) -> list[str]:
    with open(claims_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c, _, _ in CLAIM_COLUMNS if rows and c not in rows[0] and c not in _OPTIONAL]
    if missing:
        raise DataError(f"{claims_csv}: no column(s) {missing} (expected the claims table of oracle.report.claims)")
    spec = "".join(f"p{{{w}}}" for _, _, w in CLAIM_COLUMNS)
    head = " & ".join(rf"\textbf{{{h}}}" for _, h, _ in CLAIM_COLUMNS) + r" \\"
    # the one verdict count of every output of the run, the uncounted checks named beside it
    lines = [latex_escape(f"Verdicts: {counts_text(rows)}.") + "\n",
             r"{\small", rf"\begin{{longtable}}{{{spec}}}", r"\toprule", head, r"\midrule", r"\endhead"]
    lines += [" & ".join(latex_escape(r.get(c) or "–") for c, _, _ in CLAIM_COLUMNS) + r" \\ \midrule"
              for r in rows]
    return [*lines, r"\bottomrule", r"\end{longtable}", "}"]


def paper_latex(sections: Sequence[Section], claims_csv: str | os.PathLike, title: str, note: str = "",
                run_dir: str | os.PathLike = ".") -> str:
    """The LaTeX source of the paper PDF (module docstring). `sections`: the report's sections
    (their first, the claims, becomes the claims table of `claims_csv` and the claims figure);
    each item's stem is a path (relative to the working folder, as the report's), which must
    hold its .tex (tables) or .pdf (figures) and caption file; the document names them relative
    to `run_dir`, where `compile_pdf` compiles it. DataError naming a missing file."""
    run_dir = Path(run_dir).resolve()

    def existing(stem: str, suffix: str) -> Path:
        path = Path(f"{stem}.{suffix}")
        if not path.is_file():
            raise DataError(f"{path}: not found (an artifact the paper PDF includes; build the run first)")
        return path

    def rel(stem: str, suffix: str) -> str:
        return Path(os.path.relpath(existing(stem, suffix).resolve(), run_dir)).as_posix()

    out = [r"\documentclass[11pt]{article}", r"\usepackage[margin=2.2cm]{geometry}",
           r"\usepackage{booktabs,graphicx,longtable,array}", r"\usepackage[hidelinks]{hyperref}",
           r"\setlength{\LTcapwidth}{\textwidth}",
           rf"\title{{{latex_escape(title)}}}", r"\date{}", r"\begin{document}", r"\maketitle"]
    if note:
        out.append(latex_escape(note) + "\n")
    floats = 0
    for i, section in enumerate(sections):
        out.append(rf"\section{{{latex_escape(section.title)}}}")
        if section.note:
            out.append(latex_escape(section.note) + "\n")
        for item in section.items:
            if i == 0 and item.kind == "table":  # the claims: a long table of their own
                out += _claims_table(claims_csv)
                continue
            if item.kind == "table":
                out.append(rf"\input{{{rel(item.stem, 'tex')}}}")
            else:
                caption = read_caption(existing(item.stem, CAPTION_SUFFIX)) if item.caption else ""
                out += [r"\begin{figure}[p]", r"\centering",
                        rf"\includegraphics[width=\linewidth,height=0.78\textheight,keepaspectratio]"
                        rf"{{{rel(item.stem, 'pdf')}}}",
                        rf"\caption{{\textbf{{{latex_escape(item.label)}.}} {latex_escape(caption)}}}",
                        r"\end{figure}"]
            floats += 1
            if floats % _FLOATS_PER_FLUSH == 0:
                out.append(r"\clearpage")
        out.append(r"\clearpage")
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def compile_pdf(tex: str, out_pdf: str | os.PathLike, run_dir: str | os.PathLike, runs: int = 2) -> int:
    """Compile LaTeX source `tex` (paths relative to `run_dir`) with pdflatex, `runs` passes (the
    second resolves references), into `out_pdf` (written atomically); returns its page count (as
    pdflatex reports it). DataError (one line) when pdflatex is not installed or the compilation
    fails, naming the log that says why (copied beside `out_pdf`)."""
    exe = shutil.which("pdflatex")
    if exe is None:
        raise DataError("pdflatex not found: the paper PDF needs a TeX installation with booktabs and longtable "
                        "(Debian: texlive-latex-recommended; scripts/ci/install_latex.sh)")
    out_pdf = Path(out_pdf)
    run_dir = Path(run_dir).resolve()
    with tempfile.TemporaryDirectory(prefix="paper-pdf-") as tmp:
        src = Path(tmp) / "paper.tex"
        src.write_text(tex, encoding="utf-8")
        env = dict(os.environ, TEXINPUTS=f"{run_dir}{os.pathsep}", openout_any="p")
        for _ in range(runs):
            proc = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", f"-output-directory={tmp}",
                                   src.name], cwd=run_dir, env=env, capture_output=True, timeout=600)
            if proc.returncode != 0:
                log = out_pdf.with_suffix(".log")
                shutil.copyfile(Path(tmp) / "paper.log", log) if (Path(tmp) / "paper.log").exists() else None
                first = next((ln for ln in proc.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("!")),
                             "see the log")
                raise DataError(f"pdflatex failed on the paper PDF: {first.lstrip('! ')} (log: {log})")
        pages = re.search(r"Output written on .*?\((\d+) pages?", proc.stdout.decode("utf-8", "replace"), re.S)
        with atomic_output(out_pdf) as part:
            shutil.copyfile(Path(tmp) / "paper.pdf", part)
    return int(pages.group(1)) if pages else 0
