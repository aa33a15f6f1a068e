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
        config_keys=declared_keys("report"),
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
