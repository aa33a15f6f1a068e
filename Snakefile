# The exact-posterior oracle workflow: paper "What lies beneath the curve?" end to end.
#
#   snakemake --cores all                                        # embedded default (config.yaml)
#   snakemake --cores all --configfile presets/afhq256.yaml      # a paper preset
#   snakemake --cores all table2                                 # one artifact (and what it needs)
#   snakemake --cores all --profile slurm --configfile ...       # on a SLURM cluster
#
# Every artifact lives under results/<run>/<stage>/..., made by a rule of rules/<stage>.smk.
# Named targets: data, oracle, samples, splits, classifiers, table1, table2, fig2, fig5,
# numbers, analysis (every table/figure/number), validation (when rules/validation.smk exists).

import os

from snakemake.utils import min_version, validate

from oracle.workflow import config as oc

min_version("9.0")


# A --configfile replaces the embedded default instead of being merged into it: a preset is a
# complete config, and a mapping such as classifiers.archs must not inherit the default's tiny
# test models. --config key=value still overrides single keys on top of either.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config.yaml")


SCHEMA = os.path.join(workflow.basedir, "config.schema.yaml")
# One-line ConfigError naming the key first; Snakemake's validate then fills schema defaults.
oc.validate_config(config, SCHEMA)


validate(config, SCHEMA)
oc.check_config(config)

RUN = f"results/{config['run']}"


# `snakemake --report report.html`: this text heads the report; tables and figures are marked
# with the helpers of rules/report.smk (captions report/<name>.rst) in the stage files.
report: "report/workflow.rst"


REPO = workflow.basedir
# Every job imports the `oracle` package of this checkout, whichever environment runs it
# (the venv, a --use-conda environment, a cluster node re-reading this file).
oc.prepend_pythonpath(REPO)
# conda: of the rules in rules/*.smk (relative to those files)
ENV = "../envs/oracle.yaml"
# Targets filled in by the stage files.
ANALYSIS_TARGETS = []
VALIDATION_TARGETS = []


include: "rules/report.smk"
include: "rules/data.smk"
include: "rules/oracle.smk"
include: "rules/samples.smk"
include: "rules/splits.smk"
include: "rules/classifiers.smk"
include: "rules/analysis.smk"


# The validation stage (Tables 3, 4, Figure 4) lives in rules/validation.smk, which appends
# its artifacts to VALIDATION_TARGETS (built by `all` when validation.enabled) and may use RUN,
# ORACLE_FLOW, SAMPLES, SPLITS, ENV and `oc`. Without that file the workflow runs without it.
VALIDATION_SMK = os.path.join(REPO, "rules", "validation.smk")
if os.path.exists(VALIDATION_SMK) and os.path.getsize(VALIDATION_SMK) > 0:

    include: "rules/validation.smk"


localrules:
    all,
    effective_config,
    oracle,
    samples,
    splits,
    classifiers,
    analysis,


rule all:
    input:
        ANALYSIS_TARGETS,
        VALIDATION_TARGETS if config["validation"]["enabled"] else [],
        f"{RUN}/config.yaml",
    default_target: True


rule effective_config:
    output:
        f"{RUN}/config.yaml",
    params:
        config=config,
        config_keys=list(config),  # the whole config
    log:
        f"{RUN}/logs/effective_config.log",
    benchmark:
        f"{RUN}/benchmarks/effective_config.tsv"
    resources:
        **oc.rule_resources(config, "analysis"),
    threads: 1
    conda:
        "envs/oracle.yaml"
    script:
        "scripts/effective_config.py"
