# The tables, figures and numbers of every experiment kind, from the kind's data files
# (rules/<kind>.smk) and its module's functions (oracle.experiments.<kind>: table, figure,
# numbers):
#   <kind>/<experiment>/tables/<artifact>.{csv,md,tex}
#   <kind>/<experiment>/figures/<artifact>.{pdf,png}
#   numbers/<experiment>.json
# Each artifact is named by content; `paper:` in the config maps the paper's numbering onto
# them, and each paper id is a named target (`snakemake fig2`).


rule experiment_table:
    input:
        unpack(lambda wildcards: experiment_data(wildcards.experiment)),
    output:
        table_outputs(TABLE, "{experiment}"),
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        caption=artifact_caption,
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment) + ["paper"],
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
        figure_outputs(FIGURE, "{experiment}"),
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        caption=artifact_caption,
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment) + ["paper"],
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
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment),
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


for _pid, _files in PAPER_TARGETS.items():

    rule:
        name:
            _pid
        input:
            paper_target_input(_pid, _files),
        localrule: True
