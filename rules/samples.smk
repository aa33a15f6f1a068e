# Stage `samples`, per world (worlds: in the config): S independent shard jobs (one GPU each)
# draw x ~ p(x|y), y ~ pi from the frozen model under the world's (pi, T, tau), the world's
# label y ~ p_T(y|x) (DESIGN rule 8), and log p(x|k) for every class k at the stored x
# -> samples/<world>/shard-XXXX.h5; merge_samples joins them as an HDF5 virtual dataset (no
# copy) -> samples/<world>/all.h5; world_constants -> samples/<world>/constants.json: the
# world's aleatoric floor, Bayes error/accuracy and I(X;Y) over all its samples (+- SE), and
# the closed-form Bayes error of an analytic world beside its Monte Carlo estimate.


rule sample_shard:
    input:
        world=ORACLE,
    output:
        SHARD,
    params:
        world=lambda wildcards: WORLDS[wildcards.world],
        samples=config["samples"],
        device=config["device"],
    log:
        f"{LOGS}/samples/{{world}}/shard-{{shard}}.log",
    benchmark:
        f"{BENCHMARKS}/sample_shard/{{world}}/shard-{{shard}}.tsv"
    resources:
        **res.rule_resources(config, "samples"),
    threads: res.rule_threads(config, "samples")
    conda:
        ENV
    script:
        "../scripts/sample_shard.py"


rule merge_samples:
    input:
        shards=lambda wildcards: expand(SHARD, world=wildcards.world,
                                        shard=plan.shard_ids(WORLDS[wildcards.world]["n_shards"])),
    output:
        SAMPLES,
    log:
        f"{LOGS}/samples/{{world}}/merge.log",
    benchmark:
        f"{BENCHMARKS}/merge_samples/{{world}}.tsv"
    resources:
        **res.rule_resources(config, "splits"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/merge_samples.py"


rule world_constants:
    input:
        samples=SAMPLES,
        # the model the samples were drawn from: an analytic world's closed-form Bayes error
        world=ORACLE,
    output:
        CONSTANTS,
    params:
        world_kind=plan.world_kind(config),
    log:
        f"{LOGS}/samples/{{world}}/constants.log",
    benchmark:
        f"{BENCHMARKS}/world_constants/{{world}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: res.rule_threads(config, "analysis")
    conda:
        ENV
    script:
        "../scripts/world_constants.py"


rule samples:
    input:
        SAMPLE_TARGETS,


# Derived from a world's samples, where an experiment asks for them (not in `samples`):
# noisy_test_set -> samples/<world>/noise<sigma>/test.h5: the world's test rows with
# x' = clip(x + eps, -1, 1), eps ~ N(0, sigma^2) (seeded from the world's seed), log p(x'|k)
# recomputed by the frozen model at the stored x' (DESIGN rule 2), the clean rows' labels;
# constants.json beside it: the oracle's own posterior shift E[KL(p(y|x) || p(y|x'))] and its
# accuracy on x' (oracle.noisy_test_sets). world_divergence -> samples/<world>/kl_from_<reference>.json:
# the exact KL of the world from a reference world with the same densities (prior part +
# D/2 (r^2 - 1 - ln r^2)) beside its Monte Carlo estimate from the model's own log densities.


rule noisy_test_set:
    input:
        samples=SAMPLES,
        splits=SPLITS,
        world=ORACLE,
    output:
        samples=NOISY_SAMPLES,
        constants=NOISY_CONSTANTS,
    params:
        sigma=lambda wildcards: float(wildcards.sigma),
        world_seed=lambda wildcards: WORLDS[wildcards.world]["seed"],
        samples=config["samples"],
        device=config["device"],
    log:
        f"{LOGS}/samples/{{world}}/noise{{sigma}}.log",
    benchmark:
        f"{BENCHMARKS}/noisy_test_set/{{world}}/noise{{sigma}}.tsv"
    resources:
        **res.rule_resources(config, "samples"),
    threads: res.rule_threads(config, "samples")
    conda:
        ENV
    script:
        "../scripts/noisy_test_set.py"


rule world_divergence:
    input:
        samples=SAMPLES,
        world=ORACLE,
    output:
        DIVERGENCE,
    params:
        reference=lambda wildcards: WORLDS[wildcards.reference],
        device=config["device"],
    log:
        f"{LOGS}/samples/{{world}}/kl_from_{{reference}}.log",
    benchmark:
        f"{BENCHMARKS}/world_divergence/{{world}}/kl_from_{{reference}}.tsv"
    resources:
        **res.rule_resources(config, "samples"),
    threads: res.rule_threads(config, "samples")
    conda:
        ENV
    script:
        "../scripts/world_divergence.py"
