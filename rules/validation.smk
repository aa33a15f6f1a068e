# Stage `validation`: is the oracle world a faithful stand-in for the real data?
#   validation/metrics.json          FID/FD, IS, coverage, memorization + NN distances, diversity,
#                                    texture, split consistency, posterior stability, BPD
#   validation/feature_net.pt        the domain CNN (only without validation.resnet_weights)
#   tables/table3.*, tables/table4.*, figures/fig4.*, figures/samples_grid.* (per class)
# Local weight files (validation.inception_weights / resnet_weights) are inputs when they exist;
# nothing is downloaded, and a configured but missing file fails with its path.
# Tables 3-4 (CSV) and Figure 4 (PNG) are marked for the report (captions in report/*.rst).

VALIDATION = config["validation"]
VALIDATION_METRICS = f"{RUN}/validation/metrics.json"
VALIDATION_TABLE3 = table_outputs(f"{RUN}/tables/table3", "../report/table3.rst", "Validation")
VALIDATION_TABLE4 = table_outputs(f"{RUN}/tables/table4", "../report/table4.rst", "Validation")
VALIDATION_TABLES = VALIDATION_TABLE3 + VALIDATION_TABLE4
VALIDATION_FIG4 = figure_outputs(f"{RUN}/figures/fig4", "../report/fig4.rst", "Validation")
VALIDATION_GRID = figure_outputs(f"{RUN}/figures/samples_grid", "../report/samples_grid.rst", "Validation")
# what the validation metrics depend on besides their inputs (`enabled` only asks for them)
VALIDATION_KEYS = [f"validation.{k}" for k in VALIDATION if k != "enabled"]


rule validation_metrics:
    input:
        train=rules.data.output.train,
        test=rules.data.output.test,
        samples=SAMPLES,
        flow=ORACLE_FLOW,
        weights=lambda wildcards: oc.existing(
            [VALIDATION["inception_weights"], VALIDATION["resnet_weights"]]
        ),
    output:
        metrics=VALIDATION_METRICS,
        **(
            {}
            if VALIDATION["resnet_weights"]
            else {"feature_net": f"{RUN}/validation/feature_net.pt"}
        ),
    params:
        validation=VALIDATION,
        seed=config["seed"],
        device=config["device"],
        dequant_std=config["oracle"]["train"]["noise_std"],
        dataset_name=config["data"]["kind"],
        config_keys=VALIDATION_KEYS + ["oracle.train.noise_std", "seed", "data.kind"],
    log:
        f"{RUN}/logs/validation/metrics.log",
    benchmark:
        f"{RUN}/benchmarks/validation/metrics.tsv"
    resources:
        **oc.rule_resources(config, "validation"),
    threads: oc.rule_threads(config, "validation")
    conda:
        ENV
    script:
        "../scripts/validation_metrics.py"


rule validation_report:
    input:
        metrics=VALIDATION_METRICS,
    output:
        table3=VALIDATION_TABLE3,
        table4=VALIDATION_TABLE4,
        fig4=VALIDATION_FIG4,
    params:
        dataset_name=config["data"]["kind"],
        config_keys=["data.kind"],
    log:
        f"{RUN}/logs/validation/report.log",
    benchmark:
        f"{RUN}/benchmarks/validation/report.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_report.py"


rule validation_samples_grid:
    input:
        samples=SAMPLES,
        train=rules.data.output.train,
    output:
        VALIDATION_GRID,
    params:
        per_class=8,
        config_keys=[],
    log:
        f"{RUN}/logs/validation/samples_grid.log",
    benchmark:
        f"{RUN}/benchmarks/validation/samples_grid.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/validation_samples_grid.py"


rule validation:
    input:
        VALIDATION_METRICS,
        VALIDATION_TABLES,
        VALIDATION_FIG4,
        VALIDATION_GRID,


VALIDATION_TARGETS.extend([VALIDATION_METRICS, *VALIDATION_TABLES, *VALIDATION_FIG4, *VALIDATION_GRID])
