# Experiment kind `scaling` (oracle/experiments/scaling.py): its data, from the metrics of
# every classifier of the experiment on its world's test set
#   scaling/<experiment>/data/runs.csv   one row per classifier (accuracy, decomposition, ECE)
#   scaling/<experiment>/data/fits.csv   power laws KL ~ N^-alpha, ECE ~ N^-alpha per (arch, seed), per arch
#   scaling/<experiment>/data/reliability.csv   per-bin calibration data (reliability diagrams)
# Its tables, figures and numbers come from rules/experiments.smk.


rule scaling_collect:
    input:
        metrics=lambda wildcards: experiment_metrics(wildcards.experiment),
    output:
        runs=f"{RUN}/scaling/{{experiment}}/data/runs.csv",
        fits=f"{RUN}/scaling/{{experiment}}/data/fits.csv",
        reliability=f"{RUN}/scaling/{{experiment}}/data/reliability.csv",
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment),
    log:
        f"{LOGS}/scaling/{{experiment}}/collect.log",
    benchmark:
        f"{BENCHMARKS}/scaling_collect/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_collect.py"
