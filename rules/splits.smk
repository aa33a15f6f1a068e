# Stage `splits`, per world that classifiers train or are tested on: one fixed test set and,
# per training seed, one permutation of the training pool (a training set of size N is its
# first N rows, so sets nest), stratified by the world's label -> splits/<world>.h5 (row
# indices into samples/<world>/all.h5 only).


rule make_splits:
    input:
        samples=SAMPLES,
    output:
        SPLITS,
    params:
        test_size=lambda wildcards: WORLDS[wildcards.world]["test_size"],
        seeds=lambda wildcards: SPLIT_WORLDS[wildcards.world]["seeds"],
        test_seed=lambda wildcards: WORLDS[wildcards.world]["seed"],
    log:
        f"{LOGS}/splits/{{world}}.log",
    benchmark:
        f"{BENCHMARKS}/make_splits/{{world}}.tsv"
    resources:
        **res.rule_resources(config, "splits"),
    threads: res.rule_threads(config, "splits")
    conda:
        ENV
    script:
        "../scripts/splits.py"


rule splits:
    input:
        [world_splits(w) for w in SPLIT_WORLDS],
