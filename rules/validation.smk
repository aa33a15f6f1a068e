# Stage `validation` (validation.enabled): is the oracle world a faithful stand-in for the real
# data? Compares the base world's samples with the real images.
#   validation/metrics.json             FID/FD, IS, coverage, memorization + NN distances, diversity,
#                                       texture, split consistency, posterior stability, BPD
#   validation/feature_net.pt           the domain CNN (only without validation.resnet_weights)
#   validation/tables/{checks,summary}  paper Tables 3, 4 (metric names carry their feature space)
#   validation/figures/nn_distances     paper Figure 4
#   validation/figures/samples_grid     real training images beside the first samples of each class (at most 16)
#   numbers/validation.json             its in-text numbers
# Local weight files (validation.inception_weights / resnet_weights) are inputs when they exist;
# nothing is downloaded, and a configured but missing file fails with its path.

VALIDATION = config["validation"]


rule validation_metrics:
    input:
        train=DATA_TRAIN,
        test=DATA_TEST,
        samples=world_samples("base"),
        flow=ORACLE,
        weights=lambda wildcards: oc.existing([VALIDATION["inception_weights"], VALIDATION["resnet_weights"]]),
    output:
        metrics=VALIDATION_METRICS,
        **({} if VALIDATION["resnet_weights"] else {"feature_net": f"{VALIDATION_DIR}/feature_net.pt"}),
    params:
        validation=VALIDATION,
        seed=config["seed"],
        device=config["device"],
        dequant_std=config["oracle"]["train"]["noise_std"],
        dataset_name=config["data"]["kind"],
        # classes per flow pass of the posteriors (stability, BPD), as in the sample shards
        class_batch=config["samples"]["class_batch"],
    log:
        f"{LOGS}/validation/metrics.log",
    benchmark:
        f"{BENCHMARKS}/validation_metrics.tsv"
    resources:
        **res.rule_resources(config, "validation"),
    threads: res.rule_threads(config, "validation")
    conda:
        ENV
    script:
        "../scripts/validation_metrics.py"


rule validation_table:
    input:
        metrics=VALIDATION_METRICS,
    output:
        table_outputs(VALIDATION_TABLE, "validation"),
    wildcard_constraints:
        artifact="checks|summary",
    params:
        dataset_name=config["data"]["kind"],
        caption=validation_caption,
        figures=config["figures"],
    log:
        f"{LOGS}/validation/tables/{{artifact}}.log",
    benchmark:
        f"{BENCHMARKS}/validation_table/{{artifact}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_table.py"


rule validation_nn_distances:
    input:
        metrics=VALIDATION_METRICS,
    output:
        figure_outputs(VALIDATION_FIGURE, "validation"),
    wildcard_constraints:
        artifact="nn_distances",
    params:
        caption=validation_caption,
        figures=config["figures"],  # the widths it is drawn at: a change redraws it
    log:
        f"{LOGS}/validation/figures/{{artifact}}.log",
    benchmark:
        f"{BENCHMARKS}/validation_nn_distances/{{artifact}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_nn_distances.py"


rule validation_samples_grid:
    input:
        samples=world_samples("base"),
        train=DATA_TRAIN,
    output:
        figure_outputs(VALIDATION_FIGURE, "validation"),
    wildcard_constraints:
        artifact="samples_grid",
    params:
        per_class=8,
        max_classes=16,  # rows: 1,000 ImageNet classes would make a 900-inch figure
        caption=validation_caption,
        figures=config["figures"],  # the widths it is drawn at: a change redraws it
    log:
        f"{LOGS}/validation/figures/{{artifact}}.log",
    benchmark:
        f"{BENCHMARKS}/validation_samples_grid/{{artifact}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_samples_grid.py"


rule validation_numbers:
    input:
        metrics=VALIDATION_METRICS,
    output:
        VALIDATION_NUMBERS,
    log:
        f"{LOGS}/numbers/validation.log",
    benchmark:
        f"{BENCHMARKS}/validation_numbers.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_numbers.py"


rule validation:
    input:
        VALIDATION_TARGETS,
