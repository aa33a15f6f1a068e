"""The reproduced paper as one PDF (oracle.report.paper_pdf, rule paper_pdf, `snakemake paper`):
the claims table with the paper's statement beside this run's value, every figure and table with
its caption, compiled by a real pdflatex (skipped without one unless ORACLE_REQUIRE_LATEX=1, as
CI sets it). Slow: the target on a smoke run (tests/test_html_report.py's run of the Gaussian
smoke config)."""

from __future__ import annotations

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
                "Accuracy")
    write_caption(r / "scaling" / "s" / "tables" / "acc.caption.rst", "Accuracy against Bayes.")
    exp = [{"name": "s", "kind": "scaling", "artifacts": [
        {"name": "acc", "type": "table", "stem": str(r / "scaling/s/tables/acc")},
        {"name": "panels", "type": "figure", "stem": str(r / "scaling/s/figures/panels")}]}]
    return r, report_items(str(r), str(r / "claims"), exp, [], None, {"s/panels": ["Figure 2"]})


def test_the_paper_pdf_holds_the_claims_every_figure_and_table(run):
    exe = pdflatex()
    r, sections = run
    tex = paper_latex(sections, r / "claims.csv", "Run r: a title", "Built from commit abc.", run_dir=r)
    # the paper's statement beside this run's value, escaped for pdflatex (no Unicode input)
    assert r"KL \ensuremath{\propto} N\textasciicircum{}-alpha" in tex and r"\ensuremath{\pm} 0.05" in tex
    assert r"\input{scaling/s/tables/acc.tex}" in tex and "{scaling/s/figures/panels.pdf}" in tex
    # the one verdict count, and the paper's own verdict column ("–" in a claims.csv from before it)
    assert "Verdicts: supported 1, contradicted 0, unresolved 0, not posed 0, not run 0." in tex
    assert r"\textbf{On the paper's numbers}" in tex and r"supported & -- \\" in tex
    assert r"\textbf{Figure 2 · s/panels.}".replace("·", r"\ensuremath{\cdot}") in tex
    pages = compile_pdf(tex, r / "paper.pdf", r)
    assert (r / "paper.pdf").read_bytes().startswith(b"%PDF") and pages >= 3, exe  # claims, their figure, experiment
    assert not list(r.glob(".paper.pdf.*"))  # written atomically: no partial file left


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
    and every table of the run included, and nothing else reruns."""
    pdflatex()
    smoke_results = gaussian_smoke  # the session's Gaussian smoke run (tests/conftest.py)
    work = smoke_results.parents[1]
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                           str(work), "--cores", "1", "paper", "--configfile", str(REPO / "tests/smoke/gaussian.yaml")],
                          cwd=work, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ran = re.findall(r"^(?:local)?rule (\w+):", proc.stdout + proc.stderr, re.M)
    assert sorted(ran) == ["paper", "paper_pdf"], ran
    tex = (smoke_results / "paper.tex").read_text()
    figures = [p for p in smoke_results.rglob("*.pdf") if p.name != "paper.pdf"]
    tables = list(smoke_results.rglob("tables/*.tex"))
    pages = int(re.search(r"paper\.pdf: (\d+) pages", (smoke_results / "logs" / "paper_pdf.log").read_text()).group(1))
    assert pages >= len(figures) and len(tables) > 0
    assert all(f"{p.relative_to(smoke_results).as_posix()}" in tex for p in [*figures, *tables])
