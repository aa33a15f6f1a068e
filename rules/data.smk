# Stage `data`: real images -> results/<run>/data/{train,test}.h5 (uint8 [n, C, H, W] + labels,
# class names, a fixed split). The raw data root is a parameter, not an input: the DAG builds
# without the data present, and scripts/data.py fails with the path and the expected layout.
# The records of both files hash the raw files read (oracle.io.raw_files): the audit chain of
# every number ends there. Once the class count is known, the worlds' priors are checked
# against it here, before any flow is trained.
#
# `params: config_keys` (every rule that writes an artifact, in every stage): the config keys
# the rule's artifacts depend on, declared once per rule in oracle.workflow.plan.rule_keys. Their
# provenance records keep the run config at those keys; the start-of-run check, every job's
# input check and the audit compare the keys that table declares (not the record's own list)
# with the config now.


rule data:
    output:
        train=DATA_TRAIN,
        test=DATA_TEST,
    params:
        data=config["data"],
        seed=config["seed"],
        config_keys=declared_keys("data"),
    log:
        f"{LOGS}/data.log",
    benchmark:
        f"{BENCHMARKS}/data.tsv"
    resources:
        **res.rule_resources(config, "data"),
    threads: res.rule_threads(config, "data")
    conda:
        ENV
    script:
        "../scripts/data.py"
