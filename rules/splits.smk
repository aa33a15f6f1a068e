# Stage `splits`: one fixed oracle test set + nested training subsets per N and seed (indices
# into samples/all.h5 only) -> splits/splits.h5.

SPLITS = f"{RUN}/splits/splits.h5"


rule make_splits:
    input:
        samples=SAMPLES,
    output:
        SPLITS,
    params:
        test_size=config["splits"]["test_size"],
        sizes=oc.all_sizes(config),
        seeds=config["splits"]["seeds"],
        seed=config["seed"],
        # every N of any experiment is in the file (oc.all_sizes)
        config_keys=["splits.test_size", "splits.sizes", "splits.seeds", "seed"]
        + [
            f"{ex.experiment_key(e['name'])}.sizes"
            for e in config["classifiers"]["experiments"]
            if "sizes" in e
        ],
    log:
        f"{RUN}/logs/splits.log",
    benchmark:
        f"{RUN}/benchmarks/splits.tsv"
    resources:
        **oc.rule_resources(config, "splits"),
    threads: oc.rule_threads(config, "splits")
    conda:
        ENV
    script:
        "../scripts/splits.py"


rule splits:
    input:
        SPLITS,
