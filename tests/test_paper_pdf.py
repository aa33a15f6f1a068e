"""The reproduced paper as one PDF (oracle.report.paper_pdf, rule paper_pdf, `snakemake paper`):
the claims table with the paper's statement beside this run's value, every figure and table with
its caption, compiled by a real pdflatex (skipped without one unless ORACLE_REQUIRE_LATEX=1, as
CI sets it). Slow: the target on a smoke run (tests/test_html_report.py's run of the Gaussian
smoke config)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from table_formats import pdflatex
from test_html_report import figure_file

from oracle.errors import DataError
from oracle.report.captions import write_caption
from oracle.report.html_report import report_items
from oracle.report.paper_pdf import compile_pdf, paper_latex
from oracle.report.tables import write_csv_markdown, write_table

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def run(tmp_path):
    """A run folder: claims (csv and figure), one experiment with a figure and a table."""
    r = tmp_path / "results" / "r"
    figure_file(r / "claims", "Every interval the rules compared.")
    write_csv_markdown(pd.DataFrame({"id": ["power_law"], "paper": ["KL ∝ N^-alpha, alpha 0.14 (Table 2)"],
                                     "this run": ["alpha 0.42 ± 0.05"], "verdict": ["supported"]}),
                       r / "claims.csv", r / "claims.md", "The paper's findings")
    figure_file(r / "scaling" / "s" / "figures" / "panels", "Loss against N_train & 100% of it. This run: 0.42.")
    write_table(pd.DataFrame({"Arch": ["a_b"], "N": [100], "Accuracy (%)": [91.2]}), r / "scaling" / "s" / "tables" / "acc",
                "Accuracy", note="This run: 91.2%. The paper: 97-98% (Table 1).")
    write_caption(r / "scaling" / "s" / "tables" / "acc.caption.rst", "Accuracy against Bayes.")
    exp = [{"name": "s", "kind": "scaling", "artifacts": [
        {"name": "acc", "type": "table", "stem": str(r / "scaling/s/tables/acc")},
        {"name": "panels", "type": "figure", "stem": str(r / "scaling/s/figures/panels")}]}]
    return r, report_items(str(r), str(r / "claims"), exp, [], None, {"s/panels": ["Figure 2"]})


def test_the_paper_pdf_holds_the_claims_every_figure_and_table(run):
    exe = pdflatex()
    r, sections = run
    tex = paper_latex(sections, r / "claims.csv", "Run r: a title", "Built from commit abc.", run_dir=r,
                      facts={"Commit": "abc"})
    # the paper's statement beside this run's value, escaped for pdflatex (no Unicode input)
    assert r"KL \ensuremath{\propto} N\textasciicircum{}-alpha" in tex and r"\ensuremath{\pm} 0.05" in tex
    assert r"\input{scaling/s/tables/acc.tex}" in tex and "{scaling/s/figures/panels.pdf}" in tex
    # one numbering: the paper's id and the name head the caption, LaTeX's counter is not printed
    assert r"\renewcommand{\paperitem}{Figure 2 \ensuremath{\cdot} s/panels}" in tex
    assert r"\long\def\@makecaption#1#2" in tex and "#1" not in tex.split(r"\@makecaption#1#2", 1)[1].split("\n")[0]
    # the table's finding is a paragraph after it, not in the float
    assert "This run: 91.2\\%. The paper: 97-98\\%" in tex
    # the title page: the run, the commit and the verdict counts (oracle.report.verdicts)
    assert "Commit" in tex and "supported 1, contradicted 0, unresolved 0, not posed 0, not run 0" in tex
    # the paper's own verdict column ("–" in a claims.csv from before it)
    assert r"\textbf{On the paper's numbers}" in tex and r"supported & -- \\" in tex
    pages = compile_pdf(tex, r / "paper.pdf", r)
    assert (r / "paper.pdf").read_bytes().startswith(b"%PDF") and pages >= 3, exe  # title, claims, experiment
    assert not list(r.glob(".paper.pdf.*"))  # written atomically: no partial file left
    assert not (r / "paper.log").exists()  # a log is left only where the paper failed


def test_every_figure_goes_in_at_its_drawn_size(run):
    """No figure is scaled: \\includegraphics without a size (a figure prints at the size it was
    drawn at, its text at the points it was drawn with), in a text as wide as config
    figures.width_in; a figure drawn wider than that is refused by name."""
    r, sections = run
    tex = paper_latex(sections, r / "claims.csv", "t", run_dir=r, text_width_in=5.5)
    graphics = re.findall(r"\\includegraphics(\[[^]]*\])?\{([^}]*)\}", tex)
    assert graphics and all(opts == "" for opts, _ in graphics), graphics
    assert "textwidth=5.5in" in tex
    with pytest.raises(DataError, match=r"claims\.pdf: drawn 3\.30 in wide, wider than the paper's text width 3 in"):
        paper_latex(sections, r / "claims.csv", "t", run_dir=r, text_width_in=3.0)


def test_an_overfull_box_or_a_float_too_large_fails_the_paper(run):
    """The paper refuses what would lose content, naming the first problem and the log."""
    pdflatex()
    r, _ = run
    wide = ("\\documentclass{article}\\begin{document}\\noindent\\rule{400pt}{1pt}\\par"
            "\\noindent\\rule{347pt}{1pt}\\end{document}")
    with pytest.raises(DataError, match=r"lose content: Overfull \\hbox \(55\.0pt too wide\) in paper\.tex "
                                        r"\(and 1 more\).*paper\.log") as err:
        compile_pdf(wide, r / "paper.pdf", r)
    assert "\n" not in str(err.value) and not (r / "paper.pdf").exists() and (r / "paper.log").exists()
    tall = "\\documentclass{article}\\begin{document}\\begin{table}\\rule{1pt}{900pt}\\end{table}\\end{document}"
    with pytest.raises(DataError, match=r"Float too large for page by [\d.]+pt"):
        compile_pdf(tall, r / "paper.pdf", r)
    # a figure scaled away from its drawn size (its text with it) is refused too
    scaled = ("\\documentclass{article}\\usepackage{graphicx}\\begin{document}"
              "\\includegraphics[width=0.5\\linewidth]{scaling/s/figures/panels.pdf}\\end{document}")
    with pytest.raises(DataError, match=r"panels\.pdf printed at 0\.72 of its drawn width"):
        compile_pdf(scaled, r / "paper.pdf", r)
    compile_pdf(scaled.replace("[width=0.5\\linewidth]", ""), r / "paper.pdf", r)
    # within TeX's rounding (<= 1 pt) is no loss
    compile_pdf("\\documentclass{article}\\begin{document}\\noindent\\rule{345.5pt}{1pt}\\end{document}",
                r / "paper.pdf", r)


def test_numbers_tex_paths_work_from_a_manuscript_outside_the_repository(run, tmp_path):
    """numbers.tex's \\paper<Id> paths start at the folder numbers.tex was input from, so a
    manuscript elsewhere includes the figure and the table through them."""
    import subprocess as sp

    from oracle.report.numbers import numbers_tex

    r, _ = run
    paper = {"fig2": str(r / "scaling/s/figures/panels"), "table1": str(r / "scaling/s/tables/acc")}
    (r / "numbers.tex").write_text(numbers_tex({"n": {"value": 3}}, paper, run_dir=str(r)))
    assert str(tmp_path) not in (r / "numbers.tex").read_text()  # no absolute path: the run folder moves
    manuscript = tmp_path / "elsewhere" / "ms"
    manuscript.mkdir(parents=True)
    (manuscript / "ms.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs,graphicx}\\begin{document}\n"
        f"\\input{{{os.path.relpath(r, manuscript)}/numbers.tex}}\n"
        "N is \\numN. \\includegraphics{\\paperFigTwo}\\input{\\paperTableOne}\n\\end{document}\n")
    proc = sp.run([pdflatex(), "-interaction=nonstopmode", "-halt-on-error", "ms.tex"], cwd=manuscript,
                  capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "panels.pdf" in proc.stdout and "acc.tex" in proc.stdout


def test_a_missing_artifact_or_pdflatex_is_one_line_naming_it(run, monkeypatch):
    r, sections = run
    (r / "scaling/s/figures/panels.pdf").unlink()
    with pytest.raises(DataError, match=r"panels\.pdf: not found") as err:
        paper_latex(sections, r / "claims.csv", "t", run_dir=r)
    assert "\n" not in str(err.value)
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(DataError, match="pdflatex not found") as err:
        compile_pdf("\\documentclass{article}\\begin{document}x\\end{document}", r / "p.pdf", r)
    assert "\n" not in str(err.value) and not (r / "p.pdf").exists()


def test_a_latex_error_names_the_log_and_leaves_no_pdf(run):
    pdflatex()
    r, _ = run
    with pytest.raises(DataError, match=r"pdflatex failed on the paper PDF: .*Undefined control sequence.*paper\.log"):
        compile_pdf("\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}", r / "paper.pdf", r)
    assert not (r / "paper.pdf").exists() and (r / "paper.log").exists()


@pytest.mark.slow
def test_snakemake_paper_compiles_the_smoke_runs_pdf(gaussian_smoke):
    """`snakemake paper` on a finished smoke run builds paper.pdf with one page per figure at least
    and every table of the run included, every figure at its drawn size, no overfull box over
    1 pt and no float too large (the rule fails on either), names it in the end-of-run summary,
    and nothing else reruns."""
    pdflatex()
    smoke_results = gaussian_smoke  # the session's Gaussian smoke run (tests/conftest.py)
    work = smoke_results.parents[1]
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                           str(work), "--cores", "1", "paper", "--configfile", str(REPO / "tests/smoke/gaussian.yaml")],
                          cwd=work, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M)
    assert sorted(ran) == ["paper", "paper_pdf"], ran
    pdf = (smoke_results / "paper.pdf").relative_to(work)
    assert re.search(rf"^  paper: +{re.escape(str(pdf))}  \(\d+ pages", proc.stdout, re.M), proc.stdout[-2000:]
    tex = (smoke_results / "paper.tex").read_text()
    figures = [p for p in smoke_results.rglob("*.pdf") if p.name != "paper.pdf"]
    tables = [p for p in smoke_results.rglob("tables/*.tex") if not p.name.endswith((".column.tex", ".note.tex"))]
    log = (smoke_results / "logs" / "paper_pdf.log").read_text()
    pages = int(re.search(r"paper\.pdf: (\d+) pages", log).group(1))
    assert pages >= len(figures) and len(tables) > 0
    assert all(f"{p.relative_to(smoke_results).as_posix()}" in tex for p in [*figures, *tables])
    assert not re.search(r"\\includegraphics\[", tex)  # no figure scaled
    assert "Verdicts" in tex and "Commit" in tex
