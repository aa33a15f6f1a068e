# Stage `data`: real images -> results/<run>/data/{train,test}.h5 (uint8 [n, C, H, W] + labels,
# class names, a fixed split). The raw data root is a parameter, not an input: the DAG builds
# without the data present, and scripts/data.py fails with the path and the expected layout.
# The records of both files hash the raw files read (oracle.experiments.raw_data_inputs): the
# audit chain of every number ends there.
#
# `params: config_keys` (every rule that writes an artifact, in every stage): the config keys
# the rule's artifacts depend on, declared once, by the rule. Their provenance records keep the
# run config at those keys and `python -m oracle.workflow.audit` compares them with the run's config
# (syntax: oracle.workflow.provenance.parse_config_key).

from oracle import experiments as ex


rule data:
    output:
        train=f"{RUN}/data/train.h5",
        test=f"{RUN}/data/test.h5",
    params:
        data=config["data"],
        seed=config["seed"],
        config_keys=["data", "seed"],
    log:
        f"{RUN}/logs/data.log",
    benchmark:
        f"{RUN}/benchmarks/data.tsv"
    resources:
        **oc.rule_resources(config, "data"),
    threads: oc.rule_threads(config, "data")
    conda:
        ENV
    script:
        "../scripts/data.py"
