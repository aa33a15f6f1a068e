"""Rule `paper_pdf`: the run's claims, figures and tables with their captions -> results/<run>/paper.tex
and paper.pdf, compiled by pdflatex (oracle.report.paper_pdf; the report's order and labels), at the
text width of config `figures.width_in`."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    from oracle.code_version import code_version
    from oracle.io.atomic import atomic_output
    from oracle.report.html_report import report_intro, report_items
    from oracle.report.paper_pdf import compile_pdf, paper_latex

    c, run = sm.params.contents, Path(sm.output.pdf).parent
    claims = Path(sm.input.claims).with_suffix("").as_posix()
    sections = report_items(run.as_posix(), claims, c["experiments"], c["validation"], None, c["paper_labels"])
    title, intro = report_intro(run.as_posix())
    code = code_version()
    commit = f"{code['commit']}{' (with uncommitted changes)' if code.get('dirty') else ''}"
    tex = paper_latex(sections, sm.input.claims_csv, title, intro, run_dir=run,
                      text_width_in=sm.params.figures["width_in"], facts={"Results": f"{run}/", "Commit": commit})
    with atomic_output(sm.output.tex) as part:
        part.write_text(tex, encoding="utf-8")
    pages = compile_pdf(tex, sm.output.pdf, run)
    figures = sum(i.kind == "figure" for s in sections for i in s.items)
    print(f"{sm.output.pdf}: {pages} pages, {sum(len(s.items) for s in sections)} tables and figures in "
          f"{len(sections)} sections; every figure ({figures}) at its drawn size in a "
          f"{sm.params.figures['width_in']:g} in text width; no overfull box over 1 pt, no float too large")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
