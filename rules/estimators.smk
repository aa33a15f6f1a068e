# Experiment kind `estimators` (oracle/experiments/estimators.py; the MaNo seed): the classifiers
# of another experiment predicted on shifted test sets (noisy copies of their world's test set,
# world variants), label-free accuracy estimates scored against the true and the Bayes accuracy.
# Its data, from those predictions (logits) and metrics, the exact-KL checks of its variants and
# its noisy sets' constants:
#   estimators/<experiment>/data/estimates.csv   one row per (model, set, method)
#   estimators/<experiment>/data/scores.csv      R^2, Spearman rho, MAE per (model, method, target)
#   estimators/<experiment>/data/sets.csv        one row per evaluation set
# Its tables, figures and numbers come from rules/experiments.smk.


rule estimators_collect:
    input:
        unpack(lambda wildcards: estimators_inputs(wildcards.experiment)),
    output:
        estimates=f"{RUN}/estimators/{{experiment}}/data/estimates.csv",
        scores=f"{RUN}/estimators/{{experiment}}/data/scores.csv",
        sets=f"{RUN}/estimators/{{experiment}}/data/sets.csv",
    params:
        spec=lambda wildcards: EXPERIMENTS[wildcards.experiment],
        config_keys=lambda wildcards: keys.experiment_keys(config, wildcards.experiment),
    log:
        f"{LOGS}/estimators/{{experiment}}/collect.log",
    benchmark:
        f"{BENCHMARKS}/estimators_collect/{{experiment}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/experiment_collect.py"
