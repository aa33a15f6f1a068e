# Experiment kind `difficulty` (oracle/experiments/difficulty.py; the Bayes-error-of-flows seed):
# Bayes error, aleatoric floor and I(X;Y) of world variants against their base temperature tau,
# from each world's constants (rules/samples.smk); no classifier is trained.
#   difficulty/<experiment>/data/curve.csv   one row per world
# Its tables, figures and numbers come from rules/experiments.smk.


rule difficulty_collect:
    input:
        unpack(lambda wildcards: difficulty_inputs(wildcards.experiment)),
    output:
        curve=f"{RUN}/difficulty/{{experiment}}/data/curve.csv",
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment),
    log:
        f"{LOGS}/difficulty/{{experiment}}/collect.log",
    benchmark:
        f"{BENCHMARKS}/difficulty_collect/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_collect.py"
