"""The reproduced paper as one PDF: a title page (the run, the commit, the verdict counts), the
run's claims table (the paper's statement beside this run's value and verdict), then every
experiment's and the validation's figures and tables with their captions, in the report's order
(`oracle.report.html_report.report_items`), compiled by pdflatex.

`paper_latex(sections, claims_csv, title, ...)` writes the document: a plain ``article`` whose
text width is the width figures are drawn at (config ``figures.width_in``), with booktabs,
graphicx and longtable, its figures and tables in reading order (not floating: each stands under
its section heading, its finding right under it). Each figure goes in at its drawn size (no
scaling: its text prints at the size it was drawn with); each table is the run's own generated
.tex (its caption and label inside; a long one continues in further floats,
`oracle.report.tables`), its finding (``<stem>.note.tex``) a paragraph after it. One numbering:
every caption starts with the paper's id and the artifact's name ("Figure 2 · scaling/..."),
LaTeX's own "Table 3:" is not printed. Paths are relative to the run folder, where `compile_pdf`
runs pdflatex. Every text goes through `oracle.report.tables.latex_escape` (no Unicode input).

`compile_pdf` refuses what would lose content: an overfull box wider than `OVERFULL_PT` (a row
or figure cut at the margin), a float too large for its page (rows off the page) or a figure
printed at another size than it was drawn at, naming the first in one line.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from oracle.errors import DataError
from oracle.io.atomic import atomic_output
from oracle.report.captions import CAPTION_SUFFIX, read_caption
from oracle.report.html_report import Section
from oracle.report.tables import latex_escape
from oracle.report.verdicts import counts_text

#: The claims table's columns in the PDF: (claims.csv column, heading, share of the line width); the
#: paper's verdict is the rule on its printed numbers (`oracle.report.claims_doc.claims_rows`), "–"
#: in a claims.csv from before that column.
CLAIM_COLUMNS = (("id", "Claim", 0.14), ("paper", "The paper", 0.25), ("this run", "This run", 0.31),
                 ("verdict", "Verdict", 0.12), ("paper verdict", "On the paper's numbers", 0.12))
_OPTIONAL = {"paper verdict"}
#: The widest overfull box (pt) the paper accepts: TeX's rounding, not content cut off.
OVERFULL_PT = 1.0
#: The scales a figure may print at, against the size it was drawn at (its text sizes with it).
SCALE_RANGE = (0.95, 1.05)
#: The page: US letter wide, at least 9 in of text height (taller where a figure with its caption
#: needs it: a figure is never scaled); the text width is the figures' drawn width.
PAGE_WIDTH_IN, TEXT_HEIGHT_IN = 8.5, 9.0


def _breakable(latex: str) -> str:
    """A cell of a narrow paragraph column: identifiers may break after ``_`` and lists after commas."""
    return latex.replace(r"\_", r"\_\allowbreak{}").replace(",", r",\allowbreak{}").replace("/", r"/\allowbreak{}")


def _text(text: str) -> str:
    """Running text (a caption, a note) as LaTeX: escaped, a path may break after each ``/``."""
    return latex_escape(text).replace("/", r"/\allowbreak{}")


def _claims_rows(claims_csv: str | os.PathLike) -> list[dict]:
    with open(claims_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    missing = [c for c, _, _ in CLAIM_COLUMNS if rows and c not in rows[0] and c not in _OPTIONAL]
    if missing:
        raise DataError(f"{claims_csv}: no column(s) {missing} (expected the claims table of oracle.report.claims)")
    return rows


def _claims_table(rows: list[dict]) -> list[str]:
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{{w}\linewidth}}" for _, _, w in CLAIM_COLUMNS)
    head = " & ".join(rf"\textbf{{{h}}}" for _, h, _ in CLAIM_COLUMNS) + r" \\"
    lines = [r"{\small\setlength{\tabcolsep}{3pt}", rf"\begin{{longtable}}{{{spec}}}", r"\toprule", head, r"\midrule",
             r"\endhead"]
    lines += [" & ".join(_breakable(latex_escape(r.get(c) or "–")) for c, _, _ in CLAIM_COLUMNS) + r" \\ \midrule"
              for r in rows]
    return [*lines, r"\bottomrule", r"\end{longtable}", "}"]


def _figure_size_in(pdf: Path) -> tuple[float, float]:
    """(width, height) in inches a figure was drawn at: its PDF's MediaBox."""
    from oracle.report.figures import pdf_facts

    facts = pdf_facts(pdf.read_bytes())
    return facts["width_in"], facts["height_in"]


def _note(path: Path) -> str:
    """The finding of a table's note file without its comment lines ("" when it has none)."""
    if not path.is_file():
        return ""
    return " ".join(ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.lstrip().startswith("%")).strip()


def paper_latex(sections: Sequence[Section], claims_csv: str | os.PathLike, title: str, note: str = "",
                run_dir: str | os.PathLike = ".", *, text_width_in: float = 6.8,
                facts: Mapping[str, str] | None = None) -> str:
    """The LaTeX source of the paper PDF (module docstring). `sections`: the report's sections
    (their first, the claims, becomes the claims table of `claims_csv` and the claims figure);
    each item's stem is a path (relative to the working folder, as the report's), which must
    hold its .tex (tables) or .pdf (figures) and caption file; the document names them relative
    to `run_dir`, where `compile_pdf` compiles it. `text_width_in`: the text width, the width the
    run's figures are drawn at (config ``figures.width_in``); `facts`: lines of the title page
    ({"Commit": ...}), after the run and before the verdict counts (`oracle.report.verdicts`).
    DataError naming a missing file, or a figure drawn wider than the text."""
    run_dir = Path(run_dir).resolve()

    def existing(stem: str, suffix: str) -> Path:
        path = Path(f"{stem}.{suffix}")
        if not path.is_file():
            raise DataError(f"{path}: not found (an artifact the paper PDF includes; build the run first)")
        return path

    def rel(path: Path) -> str:
        return Path(os.path.relpath(path.resolve(), run_dir)).as_posix()

    rows = _claims_rows(claims_csv)
    if PAGE_WIDTH_IN - text_width_in < 1.0:
        raise DataError(f"figures.width_in = {text_width_in} in: the paper PDF's letter page holds at most "
                        f"{PAGE_WIDTH_IN - 1:g} in of text")
    # every figure at its drawn size: the text is as tall as the tallest figure with its caption
    height_in = TEXT_HEIGHT_IN
    for item in (i for sec in sections for i in sec.items if i.kind == "figure"):
        pdf = existing(item.stem, "pdf")
        size = _figure_size_in(pdf)
        if size[0] > text_width_in + 0.01:
            raise DataError(f"{pdf}: drawn {size[0]:.2f} in wide, wider than the paper's text width "
                            f"{text_width_in:g} in (config figures.width_in): redraw it or widen the text")
        caption = read_caption(existing(item.stem, CAPTION_SUFFIX)) if item.caption else ""
        lines = 1 + len(caption) * 0.07 / text_width_in  # \small: about 14 characters an inch, 12 pt a line
        height_in = max(height_in, size[1] + 0.45 + lines * 12 / 72.27)
    paper_height = height_in + 2.0
    out = [r"\documentclass[10pt]{article}",
           rf"\usepackage[paperwidth={PAGE_WIDTH_IN:g}in,paperheight={paper_height:.2f}in,textwidth={text_width_in:g}in,"
           rf"textheight={height_in:.2f}in]{{geometry}}",
           r"\usepackage{booktabs,graphicx,longtable,array}", r"\usepackage[hidelinks]{hyperref}",
           r"\setlength{\LTcapwidth}{\textwidth}", r"\sloppy", r"\raggedbottom",
           # one numbering: the paper's id and the artifact's name head each caption, not LaTeX's counter
           r"\newcommand{\paperitem}{}", r"\makeatletter",
           r"\long\def\@makecaption#1#2{\vskip\abovecaptionskip{\small\textbf{\paperitem.}\enskip#2\par}"
           r"\vskip\abovecaptionskip}",
           # in reading order: a figure or table stands where the text names it, its finding right
           # under it, its section heading above it (a block taller than the page is an overfull box)
           *(rf"\renewenvironment{{{env}}}[1][]{{\par\bigskip\noindent\begin{{minipage}}{{\linewidth}}"
             rf"\def\@captype{{{env}}}}}{{\end{{minipage}}\par\bigskip}}" for env in ("figure", "table")),
           r"\makeatother",
           rf"\title{{{latex_escape(title)}}}", r"\date{}", r"\begin{document}", r"\maketitle",
           r"\begin{center}\begin{tabular}{@{}ll@{}}"]
    lines = {"Run": run_dir.name, **(facts or {}), "Verdicts": counts_text(rows)}
    out += [rf"\textbf{{{latex_escape(k)}}} & \parbox[t]{{0.7\textwidth}}{{\raggedright {latex_escape(v)}}} \\"
            for k, v in lines.items()]
    out.append(r"\end{tabular}\end{center}")
    if note:
        out.append(_text(note) + "\n")
    out.append(r"\clearpage")
    for i, section in enumerate(sections):
        out.append(rf"\section{{{latex_escape(section.title)}}}")
        if section.note:
            out.append(_text(section.note) + "\n")
        for item in section.items:
            if i == 0 and item.kind == "table":  # the claims: a long table of their own
                out += _claims_table(rows)
                continue
            out.append(rf"\renewcommand{{\paperitem}}{{{latex_escape(item.label)}}}")
            if item.kind == "table":
                out.append(rf"\input{{{rel(existing(item.stem, 'tex'))}}}")
                if finding := _note(Path(f"{item.stem}.note.tex")):
                    finding = finding.replace("/", r"/\allowbreak{}")
                    out.append(rf"\par{{\small\noindent\textit{{{latex_escape(item.label)}:}} {finding}\par}}" + "\n")
            else:
                pdf = existing(item.stem, "pdf")
                caption = read_caption(existing(item.stem, CAPTION_SUFFIX)) if item.caption else ""
                # at its drawn size: no width, so its text prints at the points it was drawn with
                out += [r"\begin{figure}[tp]", r"\centering", rf"\includegraphics{{{rel(pdf)}}}",
                        rf"\caption{{{_text(caption)}}}", r"\end{figure}"]
        out.append(r"\clearpage")
    out.append(r"\end{document}")
    return "\n".join(out) + "\n"


def layout_problems(log: str) -> list[str]:
    """What a pdflatex log says was lost, one line each: every overfull box wider than
    `OVERFULL_PT` and every float too large for its page, with the input file it was read from
    (the last ``(<file>.tex`` the log opened before it), and every figure included at another
    size than it was drawn at (outside `SCALE_RANGE`: graphicx's ``<file.pdf, id=.., W x H>``
    against its ``Requested size``)."""
    problems, current, drawn = [], "paper.tex", None
    for line in log.splitlines():
        if m := re.search(r"<([^<>,]+\.pdf), id=\d+, ([\d.]+)pt x ([\d.]+)pt>", line):
            drawn = (m.group(1), float(m.group(2)))
        elif (m := re.search(r"Requested size: ([\d.]+)pt x", line)) and drawn is not None:
            scale = float(m.group(1)) / drawn[1]
            if not SCALE_RANGE[0] <= scale <= SCALE_RANGE[1]:
                problems.append(f"{drawn[0]} printed at {scale:.2f} of its drawn width")
            drawn = None
        for opened in re.findall(r"\(([^()\s]+\.tex)", line):
            current = "paper.tex" if Path(opened).name == "paper.tex" else opened.removeprefix("./")
        if m := re.search(r"Overfull \\[hv]box \(([\d.]+)pt too (?:wide|high)\)", line):
            if float(m.group(1)) > OVERFULL_PT:
                problems.append(f"{m.group(0)} in {current}")
        elif m := re.search(r"Float too large for page by ([\d.]+)pt", line):
            problems.append(f"{m.group(0)} in {current}")
    return problems


def compile_pdf(tex: str, out_pdf: str | os.PathLike, run_dir: str | os.PathLike, runs: int = 2) -> int:
    """Compile LaTeX source `tex` (paths relative to `run_dir`) with pdflatex, `runs` passes (the
    second resolves references), into `out_pdf` (written atomically); returns its page count (as
    pdflatex reports it). DataError (one line) when pdflatex is not installed, the compilation
    fails or its log shows lost content (`layout_problems`), naming the log that says why (copied
    beside `out_pdf`); no PDF is written then."""
    exe = shutil.which("pdflatex")
    if exe is None:
        raise DataError("pdflatex not found: the paper PDF needs a TeX installation with booktabs and longtable "
                        "(Debian: texlive-latex-recommended; scripts/ci/install_latex.sh)")
    out_pdf = Path(out_pdf)
    run_dir = Path(run_dir).resolve()
    log = out_pdf.with_suffix(".log")
    with tempfile.TemporaryDirectory(prefix="paper-pdf-") as tmp:
        src = Path(tmp) / "paper.tex"
        src.write_text(tex, encoding="utf-8")
        # max_print_line: a log line per message, not wrapped at 79 columns (`layout_problems` reads it)
        env = dict(os.environ, TEXINPUTS=f"{run_dir}{os.pathsep}", openout_any="p", max_print_line="100000")
        for _ in range(runs):
            proc = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", f"-output-directory={tmp}",
                                   src.name], cwd=run_dir, env=env, capture_output=True, timeout=600)
            if proc.returncode != 0:
                shutil.copyfile(Path(tmp) / "paper.log", log) if (Path(tmp) / "paper.log").exists() else None
                first = next((ln for ln in proc.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("!")),
                             "see the log")
                raise DataError(f"pdflatex failed on the paper PDF: {first.lstrip('! ')} (log: {log})")
        if problems := layout_problems((Path(tmp) / "paper.log").read_text(encoding="utf-8", errors="replace")):
            shutil.copyfile(Path(tmp) / "paper.log", log)
            raise DataError(f"the paper PDF would lose content: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") + f" (log: {log})")
        pages = re.search(r"Output written on .*?\((\d+) pages?", proc.stdout.decode("utf-8", "replace"), re.S)
        with atomic_output(out_pdf) as part:
            shutil.copyfile(Path(tmp) / "paper.pdf", part)
    return int(pages.group(1)) if pages else 0
