# Stage `data`: real images -> results/<run>/data/{train,test}.h5 (uint8 [n, C, H, W] + labels,
# class names, a fixed split). The raw data root is a parameter, not an input: the DAG builds
# without the data present, and scripts/data.py fails with the path and the expected layout.
# The records of both files hash the raw files read (oracle.io.raw_files): the audit chain of
# every number ends there. Once the class count is known, the worlds' priors are checked
# against it here, before any flow is trained.
#
# `params:` (every rule that writes an artifact, in every stage): all its script reads of the
# config. The provenance records keep the params a job ran with; the start-of-run check and
# the audit compare them with the params Snakemake computes for the same job now
# (oracle.workflow.provenance.params), so a rule's params are the one statement of what its
# artifacts depend on besides their inputs and code.


rule data:
    output:
        train=DATA_TRAIN,
        test=DATA_TEST,
    params:
        data=config["data"],
        seed=config["seed"],
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
