# Stage `samples`: S independent shard jobs (one GPU each) draw x ~ p(x|y) from the frozen world
# and store log p(x|k) for every class k (DESIGN.md, shard format) -> samples/shard-XXXX.h5;
# merge_samples joins them as an HDF5 virtual dataset (no copy) -> samples/all.h5.

SHARD = f"{RUN}/samples/shard-{{shard}}.h5"
SAMPLES = f"{RUN}/samples/all.h5"


rule sample_shard:
    input:
        flow=ORACLE_FLOW,
    output:
        SHARD,
    wildcard_constraints:
        shard=r"\d{4}",
    params:
        samples=config["samples"],
        oracle=config["oracle"],
        seed=config["seed"],
        device=config["device"],
        config_keys=[
            "samples",
            "oracle.prior",
            "oracle.label_temperature",
            "oracle.base_temperature",
            "seed",
        ],
    log:
        f"{RUN}/logs/samples/shard-{{shard}}.log",
    benchmark:
        f"{RUN}/benchmarks/samples/shard-{{shard}}.tsv"
    resources:
        **oc.rule_resources(config, "samples"),
    threads: oc.rule_threads(config, "samples")
    conda:
        ENV
    script:
        "../scripts/sample_shard.py"


rule merge_samples:
    input:
        shards=expand(SHARD, shard=oc.shard_ids(config)),
    output:
        SAMPLES,
    params:
        config_keys=[],  # a function of the shards alone
    log:
        f"{RUN}/logs/samples/merge.log",
    benchmark:
        f"{RUN}/benchmarks/samples/merge.tsv"
    resources:
        **oc.rule_resources(config, "splits"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/merge_samples.py"


rule samples:
    input:
        SAMPLES,
