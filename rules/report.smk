# The run's report, results/<run>/report.html: one self-contained page that opens with the
# paper's claims (forest plot and table), then shows every experiment's and the validation's
# figures with their captions under them and tables rendered as tables, and the timings last
# (oracle.report.html_report). Made after the timings it shows, the last job of a run.


rule report:
    input:
        RUN_TARGETS,
        claims=f"{CLAIMS_FIGURE}.png",
        claims_caption=f"{CLAIMS_FIGURE}.{CAPTION_SUFFIX}",
        timings=TIMINGS_MD,
        timings_csv=TIMINGS_CSV,
        constants=[w["constants"] for w in report_contents()["worlds"]],
    output:
        REPORT_HTML,
    params:
        contents=report_contents(),
    log:
        f"{LOGS}/report.log",
    benchmark:
        f"{BENCHMARKS}/report.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/report.py"


# The reproduced paper as one PDF, results/<run>/paper.pdf (`snakemake paper`; not part of `all`:
# it needs pdflatex): the claims table with the paper's statement beside this run's value and
# verdict, then every figure and table of the report with its caption (oracle.report.paper_pdf),
# at the text width of config `figures.width_in`; an overfull box or a float too large fails it.
rule paper_pdf:
    input:
        RUN_TARGETS,
        claims=f"{CLAIMS_FIGURE}.pdf",
        claims_caption=f"{CLAIMS_FIGURE}.{CAPTION_SUFFIX}",
        claims_csv=CLAIMS_CSV,
    output:
        pdf=PAPER_PDF,
        tex=PAPER_TEX,
    params:
        contents=report_contents(),
        figures=config["figures"],
    log:
        f"{LOGS}/paper_pdf.log",
    benchmark:
        f"{BENCHMARKS}/paper_pdf.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/paper_pdf.py"


rule paper:
    input:
        PAPER_PDF,
