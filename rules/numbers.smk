# The paper's in-text numbers: one part per experiment (rules/experiments.smk), per world and
# for the validation, merged into numbers.json (key "<part>.<name>", each with value, unit,
# spread and the artifact it was read from) and numbers.tex (one LaTeX macro per number, and
# \paper<Id> per paper artifact: its path).


rule world_numbers:
    input:
        constants=CONSTANTS,
    output:
        WORLD_NUMBERS,
    log:
        f"{LOGS}/numbers/world.{{world}}.log",
    benchmark:
        f"{BENCHMARKS}/world_numbers/{{world}}.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/world_numbers.py"


rule numbers:
    input:
        **numbers_parts(),
    output:
        json=report(NUMBERS_JSON, caption="../report/numbers.rst", category="Numbers"),
        tex=NUMBERS_TEX,
    params:
        paper={pid: artifact_stem(*target.split("/", 1)) for pid, target in PAPER.items()},
    log:
        f"{LOGS}/numbers/numbers.log",
    benchmark:
        f"{BENCHMARKS}/numbers.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/merge_numbers.py"


# The paper's findings judged from numbers.json: one row each, with this run's value, its
# uncertainty and a verdict under the rule the row states (oracle.report.claims), and the same as
# a forest plot (oracle.report.claims_figure). Written beside numbers.json, not into it: the
# claims read it.
rule claims:
    input:
        numbers=NUMBERS_JSON,
    output:
        csv=report(CLAIMS_CSV, caption="../report/claims.rst", category="Numbers"),
        md=report(CLAIMS_MD, caption="../report/claims.rst", category="Numbers"),
        pdf=f"{CLAIMS_FIGURE}.pdf",
        png=report(f"{CLAIMS_FIGURE}.png", caption="../report/artifact.rst", category="Numbers"),
        caption=f"{CLAIMS_FIGURE}.{CAPTION_SUFFIX}",
    params:
        experiments={name: {k: spec[k] for k in ("kind", "world") if k in spec}
                     for name, spec in config["experiments"].items()},
        judged_on=config["claims"]["judged_on"],  # a finding judged on a named experiment, not the first of its kind
        figures=config["figures"],  # the widths its forest plot is drawn at: a change redraws it
    log:
        f"{LOGS}/numbers/claims.log",
    benchmark:
        f"{BENCHMARKS}/claims.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        ENV
    script:
        "../scripts/claims.py"
