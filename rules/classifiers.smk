# Stage `classifiers`: one training job per model and one prediction job per (model, evaluation
# set). A model is named by what determines its weights (oracle.workflow.plan.model_of): its
# world, arch, condition (N<n>-<labels>-<hash of the kind's whole training spec: labels, recipe,
# a shift's prior and noise>) and seed, so experiments asking for the same classifier (scaling's
# N = 1,000 and difficulty's learner on the same world) share one job and read the same files.
#   classifiers/<world>/<arch>/<condition>/seed<s>/model.pt      the trained model (a temporary
#                                                  file when classifiers.keep_models is false)
#   .../history.json                               per-epoch loss, lr and, on curve_size rows of
#                                                  the world's test set, accuracy and epistemic KL
#   .../predictions/<evalset>.h5                   logits and log q(y|x) on the evaluation set's
#                                                  test rows (a world's, or a noisy copy of them)
#   .../metrics/<evalset>.json                     accuracy, decomposition (nats), calibration
# What a model trains on comes from the kind of the first experiment that asks for it
# (oracle.experiments.<kind>.training_spec; equal for every other, by its name). Jobs share the
# group "classifiers" so a cluster profile can bundle many short jobs into one submission
# (--group-components classifiers=K); with resources.classifiers.bundle_max_n, jobs of larger N
# go to "classifiers_large" and are submitted alone; with runtime_scales_with_n a job's time
# limit grows with its N. A model's curve_size is 0 unless an experiment reads its training curve.

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
        f"{LOGS}/classifiers/{{world}}/{{arch}}/{{condition}}/seed{{seed}}/train.log",
    benchmark:
        f"{BENCHMARKS}/train_classifier/{{world}}/{{arch}}/{{condition}}/seed{{seed}}.tsv"
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
        f"{LOGS}/classifiers/{{world}}/{{arch}}/{{condition}}/seed{{seed}}/predict-{{evalset}}.log",
    benchmark:
        f"{BENCHMARKS}/predict_classifier/{{world}}/{{arch}}/{{condition}}/seed{{seed}}/{{evalset}}.tsv"
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
