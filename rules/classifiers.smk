# Stage `classifiers`: one job per (experiment, arch, N, seed): train on the first N samples of
# the seed's nested subset, evaluate on the fixed oracle test set
# -> classifiers/<experiment>/<arch>/N<N>/seed<seed>/{metrics.json, predictions.h5}.
# Jobs share the group "classifiers" so a cluster profile can bundle many short jobs into one
# submission (--group-components classifiers=K); with resources.classifiers.bundle_max_n, jobs
# of larger N go to "classifiers_large" and are submitted alone. With runtime_scales_with_n a
# job's time limit grows with its N.

CLASSIFIER_DIR = f"{RUN}/classifiers/{{experiment}}/{{arch}}/N{{N}}/seed{{seed}}"


rule classifier:
    input:
        samples=SAMPLES,
        splits=SPLITS,
    output:
        metrics=f"{CLASSIFIER_DIR}/metrics.json",
        predictions=f"{CLASSIFIER_DIR}/predictions.h5",
    wildcard_constraints:
        experiment=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        arch=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
        N=r"\d+",
        seed=r"\d+",
    params:
        experiment=lambda wildcards: oc.experiment_spec(config, wildcards.experiment),
        arch=lambda wildcards: oc.arch_spec(config, wildcards.arch),
        training={
            k: config["classifiers"][k]
            for k in ("epochs", "min_steps", "batch_size", "lr", "weight_decay")
        },
        device=config["device"],
        config_keys=lambda wildcards: ex.classifier_config_keys(
            config, wildcards.experiment, wildcards.arch
        ),
    group:
        lambda wildcards: oc.classifier_group(config, int(wildcards.N))
    log:
        f"{RUN}/logs/classifiers/{{experiment}}/{{arch}}/N{{N}}/seed{{seed}}.log",
    benchmark:
        f"{RUN}/benchmarks/classifiers/{{experiment}}/{{arch}}/N{{N}}/seed{{seed}}.tsv"
    resources:
        **oc.rule_resources(config, "classifiers")
        | {"runtime": lambda wildcards: oc.classifier_runtime(config, int(wildcards.N))},
    threads: oc.rule_threads(config, "classifiers")
    conda:
        ENV
    script:
        "../scripts/classifier.py"


rule classifiers:
    input:
        oc.classifier_metrics(config, RUN),
