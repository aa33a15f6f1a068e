# Experiment kind `shift` (oracle/experiments/shift.py; paper section 4.3, appendix F): one
# classifier per (arch, configuration, seed), each trained on a shifted training set (class
# prior by multinomial counts, clipped noise, or a world variant) and scored on the baseline
# world's test set. Its data, from the classifiers' metrics and histories, the exact-KL checks
# of its variant worlds and the oracle's posterior shift at its noise levels:
#   shift/<experiment>/data/runs.csv             one row per classifier
#   shift/<experiment>/data/configurations.csv   one row per configuration (Tables 7-9, Figure 3)
# Its tables, figures and numbers come from rules/experiments.smk.


rule shift_collect:
    input:
        unpack(lambda wildcards: shift_inputs(wildcards.experiment)),
    output:
        runs=f"{RUN}/shift/{{experiment}}/data/runs.csv",
        configurations=f"{RUN}/shift/{{experiment}}/data/configurations.csv",
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment),
    log:
        f"{LOGS}/shift/{{experiment}}/collect.log",
    benchmark:
        f"{BENCHMARKS}/shift_collect/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_collect.py"
