# Every experiment kind's data, tables, figures and numbers, from its package
# (oracle/experiments/<kind>/: collect_inputs in its planning half; collect, table, figure and
# numbers in its reporting half):
#   <kind>/<experiment>/data/<data>.csv                one per name of the kind's DATA
#   <kind>/<experiment>/tables/<artifact>.{csv,md,tex,caption.rst}
#   <kind>/<experiment>/figures/<artifact>.{pdf,png,caption.rst}
#   numbers/<experiment>.json
# Each artifact is named by content; `paper:` in the config maps the paper's numbering onto
# them, and each paper id is a named target (`snakemake fig2`). A kind with jobs of its own
# adds rules/<kind>.smk (rules/active.smk).


# <kind>_collect, one per registered kind: its data files from what its collect_inputs names.
for _kind, _mod in kinds().items():

    rule:
        name:
            res.collect_rule(_kind)
        input:
            unpack(lambda wildcards: collect_inputs(wildcards.experiment)),
        output:
            **{d: f"{RUN}/{_kind}/{{experiment}}/data/{d}.csv" for d in _mod.DATA},
        params:
            spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        log:
            f"{LOGS}/{_kind}/{{experiment}}/collect.log",
        benchmark:
            f"{BENCHMARKS}/{_kind}_collect/{{experiment}}.tsv"
        resources:
            **res.rule_resources(config, "analysis"),
        threads: 1
        conda:
            ENV
        script:
            "../scripts/experiment_collect.py"


rule experiment_table:
    input:
        unpack(lambda wildcards: experiment_data(wildcards.experiment)),
    output:
        table_outputs(TABLE),
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        caption=artifact_caption,
        figures=config["figures"],
    log:
        f"{LOGS}/{{kind}}/{{experiment}}/tables/{{artifact}}.log",
    benchmark:
        f"{BENCHMARKS}/experiment_table/{{kind}}/{{experiment}}/{{artifact}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_table.py"


rule experiment_figure:
    input:
        unpack(lambda wildcards: experiment_data(wildcards.experiment)),
    output:
        figure_outputs(FIGURE),
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        caption=artifact_caption,
        figures=config["figures"],  # the widths it is drawn at: a change redraws it
    log:
        f"{LOGS}/{{kind}}/{{experiment}}/figures/{{artifact}}.log",
    benchmark:
        f"{BENCHMARKS}/experiment_figure/{{kind}}/{{experiment}}/{{artifact}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_figure.py"


rule experiment_numbers:
    input:
        unpack(lambda wildcards: experiment_data(wildcards.experiment)),
    output:
        EXPERIMENT_NUMBERS,
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
    log:
        f"{LOGS}/numbers/{{experiment}}.log",
    benchmark:
        f"{BENCHMARKS}/experiment_numbers/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_numbers.py"


rule experiments:
    input:
        EXPERIMENT_TARGETS,


# One target per paper id of `paper:` (fig2, table1). A run or dry run builds its files in its
# place (oracle.workflow.engine.expand_targets), so `--force fig2` forces exactly those files;
# the alias keeps the id a valid target for every other command (--list-target-rules, --summary).
for _pid, _files in PAPER_TARGETS.items():

    rule:
        name:
            _pid
        input:
            _files,
        localrule: True
