# Experiment kind `labels` (oracle/experiments/labels.py): hard against soft labels, from the
# metrics and training histories of its classifiers (cells hard-N<n>, soft-N<n>)
#   labels/<experiment>/data/runs.csv          one row per classifier (accuracy, decomposition, calibration)
#   labels/<experiment>/data/curves.csv        per-epoch loss; test accuracy and epistemic KL at curve epochs
#   labels/<experiment>/data/reliability.csv   per-bin calibration data (reliability diagrams)
# Its tables, figures and numbers come from rules/experiments.smk.


rule labels_collect:
    input:
        metrics=lambda wildcards: experiment_metrics(wildcards.experiment),
        histories=lambda wildcards: experiment_histories(wildcards.experiment),
    output:
        runs=f"{RUN}/labels/{{experiment}}/data/runs.csv",
        curves=f"{RUN}/labels/{{experiment}}/data/curves.csv",
        reliability=f"{RUN}/labels/{{experiment}}/data/reliability.csv",
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment) + ["classifiers.curve_size", "classifiers.curve_points"],
    log:
        f"{LOGS}/labels/{{experiment}}/collect.log",
    benchmark:
        f"{BENCHMARKS}/labels_collect/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_collect.py"
