# Stage `data`: real images -> results/<run>/data/{train,test}.h5 (uint8 [n, C, H, W] + labels,
# class names, a fixed split). The raw data root is a parameter, not an input: the DAG builds
# without the data present, and scripts/data.py fails with the path and the expected layout.


rule data:
    output:
        train=f"{RUN}/data/train.h5",
        test=f"{RUN}/data/test.h5",
    params:
        data=config["data"],
        seed=config["seed"],
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
