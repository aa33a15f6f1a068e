# Stage `classifiers`: one training job per (experiment, arch, cell, seed) and one prediction
# job per (that classifier, evaluation set).
#   classifiers/<experiment>/<arch>/<cell>/seed<s>/model.pt      the trained model (a temporary
#                                                  file when classifiers.keep_models is false)
#   .../history.json                               per-epoch loss, lr and, on curve_size rows of
#                                                  the world's test set, accuracy and epistemic KL
#   .../predictions/<evalset>.h5                   logits and log q(y|x) on the evaluation set's
#                                                  test rows (a world's, or a noisy copy of them)
#   .../metrics/<evalset>.json                     accuracy, decomposition (nats), calibration
# What a cell trains on comes from its experiment's kind (oracle.experiments.<kind>.
# training_spec). Jobs share the group "classifiers" so a cluster profile can bundle many short
# jobs into one submission (--group-components classifiers=K); with
# resources.classifiers.bundle_max_n, jobs of larger N go to "classifiers_large" and are
# submitted alone; with runtime_scales_with_n a job's time limit grows with its N.

rule train_classifier:
    input:
        samples=lambda wildcards: world_samples(training(wildcards)["world"]),
        splits=lambda wildcards: world_splits(training(wildcards)["world"]),
        pretrained=pretrained_input,
    output:
        model=MODEL if config["classifiers"]["keep_models"] else temp(MODEL),
        history=HISTORY,
    params:
        training=training,
        arch=lambda wildcards: plan.arch_build_spec(config, wildcards.arch),
        device=config["device"],
    group:
        classifier_group
    log:
        f"{LOGS}/classifiers/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}/train.log",
    benchmark:
        f"{BENCHMARKS}/train_classifier/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}.tsv"
    resources:
        **res.rule_resources(config, "classifiers") | {"runtime": classifier_runtime},
    threads: res.rule_threads(config, "classifiers")
    conda:
        ENV
    script:
        "../scripts/train_classifier.py"


rule predict_classifier:
    input:
        unpack(evalset_inputs),
        model=MODEL,
        history=HISTORY,
    output:
        predictions=PREDICTIONS,
        metrics=METRICS,
    params:
        training=training,
        device=config["device"],
    group:
        classifier_group
    log:
        f"{LOGS}/classifiers/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}/predict-{{evalset}}.log",
    benchmark:
        f"{BENCHMARKS}/predict_classifier/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}/{{evalset}}.tsv"
    resources:
        **res.rule_resources(config, "classifiers") | {"runtime": res.prediction_runtime(config)},
    threads: res.rule_threads(config, "classifiers")
    conda:
        ENV
    script:
        "../scripts/predict_classifier.py"


rule classifiers:
    input:
        CLASSIFIER_TARGETS,
