# The run's timing table: after every other target of `all` (RUN_TARGETS, oracle.workflow.plan.paths),
# the benchmark file of each job (benchmarks/<rule>.tsv or benchmarks/<rule>/<wildcards>.tsv)
# summed per rule, with the run's wall time and critical path (from the provenance records) under
# it. The benchmark files are globbed by the script: they are written after their job ends, and
# this rule has no benchmark of its own, so it cannot wait on itself.

rule timings:
    input:
        RUN_TARGETS,
    output:
        csv=report(TIMINGS_CSV, caption="../report/timings.rst", category="Timings"),
        md=report(TIMINGS_MD, caption="../report/timings.rst", category="Timings"),
    params:
        benchmarks=BENCHMARKS,
        run=lambda wildcards, output: os.path.dirname(output.csv),  # provenance records: jobs and inputs
        logs=LOGS,  # <log>.rss.json: peak memory of the job server's children
    log:
        f"{LOGS}/timings.log",
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/timings.py"
