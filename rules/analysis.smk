# Stage `analysis`: classifier metrics + the world's exact constants -> the paper's artifacts.
#   analysis/world.json              aleatoric floor, Bayes error/accuracy, I(X;Y) on the test set
#   analysis/<experiment>/metrics.csv every classifier of an experiment, one row per job
#   analysis/<experiment>/fits.csv    power-law fits KL ~ N^-alpha per (arch, seed) and per arch
#   tables/table1.*, tables/table2.*, figures/fig2.*, figures/fig5.*, numbers.json, numbers.tex
# Tables and figures of the main experiment (analysis.experiment) are named targets:
# `snakemake table1`, `table2`, `fig2`, `fig5`, `numbers`; `analysis` builds them all.
# Tables (CSV) and figures (PNG) are marked for `snakemake --report report.html`, with the
# captions of report/*.rst.

MAIN = config["analysis"]["experiment"]
WORLD = f"{RUN}/analysis/world.json"
METRICS = f"{RUN}/analysis/{{experiment}}/metrics.csv"
FITS = f"{RUN}/analysis/{{experiment}}/fits.csv"
MAIN_METRICS = METRICS.format(experiment=MAIN)
MAIN_FITS = FITS.format(experiment=MAIN)
TABLE_EXT = ["csv", "md", "tex"]
FIGURE_EXT = ["pdf", "png"]
# validation/metrics.json (rules/validation.smk) feeds numbers.json when validation is on
VALIDATION_METRICS = f"{RUN}/validation/metrics.json"
# what every table and figure of the main experiment depends on (labels and order of the archs)
MAIN_KEYS = ex.analysis_config_keys(config, MAIN)


rule world_summary:
    input:
        samples=SAMPLES,
        splits=SPLITS,
        # the world the samples were drawn from: a Gaussian world's closed-form Bayes error
        world=ORACLE_FLOW,
    output:
        WORLD,
    params:
        world_kind=oc.world_kind(config),
        # the constants are functions of the inputs; oracle.world (absent = flow) decides
        # whether the closed form is computed
        config_keys=["oracle.world"] if "world" in config["oracle"] else [],
    log:
        f"{RUN}/logs/analysis/world.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/world.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: oc.rule_threads(config, "analysis")
    conda:
        ENV
    script:
        "../scripts/world_summary.py"


rule collect_metrics:
    input:
        metrics=lambda wildcards: oc.classifier_metrics(config, RUN, [wildcards.experiment]),
    output:
        METRICS,
    wildcard_constraints:
        experiment=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    params:
        experiment=lambda wildcards: oc.experiment_spec(config, wildcards.experiment),
        config_keys=lambda wildcards: ex.experiment_config_keys(config, wildcards.experiment),
    log:
        f"{RUN}/logs/analysis/{{experiment}}/metrics.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/{{experiment}}/metrics.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/collect_metrics.py"


rule scaling_fits:
    input:
        metrics=METRICS,
    output:
        FITS,
    wildcard_constraints:
        experiment=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    params:
        config_keys=[],  # a function of metrics.csv alone
    log:
        f"{RUN}/logs/analysis/{{experiment}}/fits.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/{{experiment}}/fits.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/scaling_fits.py"


rule table1:
    input:
        metrics=MAIN_METRICS,
    output:
        table_outputs(f"{RUN}/tables/table1", "../report/table1.rst"),
    params:
        config_keys=MAIN_KEYS + ["analysis.table1_size"],
        size=config["analysis"]["table1_size"],
        archs=lambda wildcards: [oc.arch_spec(config, a) | {"name": a} for a in oc.experiment_spec(config, MAIN)["archs"]],
    log:
        f"{RUN}/logs/analysis/table1.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/table1.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/table1.py"


rule table2:
    input:
        metrics=MAIN_METRICS,
    output:
        table_outputs(f"{RUN}/tables/table2", "../report/table2.rst"),
    params:
        config_keys=MAIN_KEYS
        + ["analysis.table2_archs", "analysis.table2_sizes"]
        + [ex.arch_key(a) for a in config["analysis"]["table2_archs"] or []],
        archs=lambda wildcards: [
            oc.arch_spec(config, a) | {"name": a}
            for a in (config["analysis"]["table2_archs"] or oc.experiment_spec(config, MAIN)["archs"])
        ],
        sizes=config["analysis"]["table2_sizes"],
    log:
        f"{RUN}/logs/analysis/table2.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/table2.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/table2.py"


rule fig2:
    input:
        metrics=MAIN_METRICS,
    output:
        figure_outputs(f"{RUN}/figures/fig2", "../report/fig2.rst"),
    params:
        config_keys=MAIN_KEYS,
        archs=lambda wildcards: [oc.arch_spec(config, a) | {"name": a} for a in oc.experiment_spec(config, MAIN)["archs"]],
    log:
        f"{RUN}/logs/analysis/fig2.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/fig2.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/fig2.py"


rule fig5:
    input:
        metrics=MAIN_METRICS,
    output:
        figure_outputs(f"{RUN}/figures/fig5", "../report/fig5.rst"),
    params:
        config_keys=MAIN_KEYS,
        archs=lambda wildcards: [oc.arch_spec(config, a) | {"name": a} for a in oc.experiment_spec(config, MAIN)["archs"]],
    log:
        f"{RUN}/logs/analysis/fig5.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/fig5.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/fig5.py"


rule numbers:
    input:
        world=WORLD,
        metrics=MAIN_METRICS,
        fits=MAIN_FITS,
        table1=f"{RUN}/tables/table1.csv",
        validation=VALIDATION_METRICS if config["validation"]["enabled"] else [],
    output:
        json=report(
            f"{RUN}/numbers.json", caption="../report/numbers.rst", category="Numbers"
        ),
        tex=f"{RUN}/numbers.tex",
    params:
        config_keys=MAIN_KEYS + ["analysis.table1_size", "validation.enabled"],
        archs=lambda wildcards: [oc.arch_spec(config, a) | {"name": a} for a in oc.experiment_spec(config, MAIN)["archs"]],
        size=config["analysis"]["table1_size"],
    log:
        f"{RUN}/logs/analysis/numbers.log",
    benchmark:
        f"{RUN}/benchmarks/analysis/numbers.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/paper_numbers.py"


ANALYSIS_TARGETS += (
    rules.table1.output
    + rules.table2.output
    + rules.fig2.output
    + rules.fig5.output
    + rules.numbers.output
    + [METRICS.format(experiment=e["name"]) for e in oc.experiment_specs(config)]
)


rule analysis:
    input:
        ANALYSIS_TARGETS,
