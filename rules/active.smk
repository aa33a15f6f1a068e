# Experiment kind `active` (oracle/experiments/active/, oracle/classifiers/active_learning.py): pool-based
# active learning with the exact epistemic uncertainty of every pool sample known.
#   active/<experiment>/runs/<arch>/round0/seed<s>/round0.pt   round 0 of every strategy of that
#       (arch, seed), trained once: the model on the initial labelled set, its record and every
#       score of the pool (each strategy selects its first batch from them)
#   active/<experiment>/runs/<arch>/<strategy>/seed<s>/rounds.json   one run: per round the
#       labels used, test accuracy, exact epistemic KL (mean, se), the selected sample rows and
#       the Spearman correlations of every score with the exact KL(p || q) and H(p) over the pool
#   active/<experiment>/data/rounds.csv, correlations.csv         every run, one row per round
#       (and per score and exact part)
# A run keeps its finished rounds in resume/ next to rounds.json, so a killed job resumes at its
# last finished round with the same selections; the folder is removed once rounds.json exists.
# Its data (<kind>_collect), tables, figures and numbers come from rules/experiments.smk.


rule active_round_zero:
    input:
        samples=lambda wildcards: world_samples(EXPERIMENTS[wildcards.experiment]["world"]),
        splits=lambda wildcards: world_splits(EXPERIMENTS[wildcards.experiment]["world"]),
        pretrained=pretrained_input,
    output:
        round_zero=ACTIVE_ROUND_ZERO,
    params:
        spec=lambda wildcards: plan.run_spec(EXPERIMENTS[wildcards.experiment]),
        arch=lambda wildcards: plan.arch_build_spec(config, wildcards.arch),
        device=config["device"],
    log:
        f"{LOGS}/active/{{experiment}}/{{arch}}/round0/seed{{seed}}.log",
    benchmark:
        f"{BENCHMARKS}/active_round_zero/{{experiment}}/{{arch}}/seed{{seed}}.tsv"
    resources:
        **res.rule_resources(config, "classifiers") | {"runtime": active_round_zero_runtime},
    threads: res.rule_threads(config, "classifiers")
    conda:
        ENV
    script:
        "../scripts/active_round_zero.py"


rule active_learning:
    input:
        samples=lambda wildcards: world_samples(EXPERIMENTS[wildcards.experiment]["world"]),
        splits=lambda wildcards: world_splits(EXPERIMENTS[wildcards.experiment]["world"]),
        pretrained=pretrained_input,
        round_zero=ACTIVE_ROUND_ZERO,
    output:
        rounds=ACTIVE_ROUNDS,
    wildcard_constraints:
        strategy=one_of(kind_module("active").STRATEGIES),
    params:
        # what its runs are trained from (no display labels or reporting settings: those
        # change its tables, not its runs)
        spec=lambda wildcards: plan.run_spec(EXPERIMENTS[wildcards.experiment]),
        arch=lambda wildcards: plan.arch_build_spec(config, wildcards.arch),
        device=config["device"],
    log:
        f"{LOGS}/active/{{experiment}}/{{arch}}/{{strategy}}/seed{{seed}}.log",
    benchmark:
        f"{BENCHMARKS}/active_learning/{{experiment}}/{{arch}}/{{strategy}}/seed{{seed}}.tsv"
    resources:
        **res.rule_resources(config, "classifiers") | {"runtime": active_runtime},
    threads: res.rule_threads(config, "classifiers")
    conda:
        ENV
    script:
        "../scripts/active_learning.py"
