# The exact-posterior oracle workflow: paper "What lies beneath the curve?" end to end.
#
#   snakemake --cores all                                        # embedded default (config.yaml)
#   snakemake --cores all --configfile presets/afhq256.yaml      # a paper preset
#   snakemake --cores all fig2                                   # one paper artifact (config `paper:`)
#   snakemake --cores all --profile slurm --configfile ...       # on a SLURM cluster
#
# Every artifact lives under results/<run>/<stage or experiment kind>/...; rules/common.smk
# spells every path and says which rules file makes it. Named targets: data, oracle, samples,
# splits, classifiers, experiments, numbers, validation, and every paper id of `paper:`.

import os
import sys
import time

from snakemake.utils import min_version

RUN_STARTED = time.time()  # the end-of-run summary's wall time: before the config checks (timm)

from oracle.workflow import engine
from oracle.workflow.plan import config as oc
from oracle.workflow.jobs import server as job_server

# the lowest Snakemake release this workflow is tested with (oracle.workflow.engine.TESTED)
min_version(engine.TESTED[0])


# A --configfile replaces the embedded default instead of being merged into it: a preset is a
# complete config, and a mapping such as classifiers.archs must not inherit the default's tiny
# test models. --config key=value still overrides single keys on top of either.
if not engine.configfiles_given(workflow):

    configfile: os.path.join(workflow.basedir, "config.yaml")


# config.schema.yaml with every experiment kind's entry schema (oracle/experiments/<kind>/schema.yaml)
SCHEMA = oc.full_schema(os.path.join(workflow.basedir, "config.schema.yaml"))
# One-line ConfigError naming the key first (no stack: Snakemake would print one under it); then
# the schema's defaults are filled in, and every check a job makes on its config runs now
# (NaN, memory and steps included: oracle.workflow.plan.budget), before any output is deleted.
# timm names and pretrained files: once per invocation (the names from a per-timm-version cache,
# oracle.classifiers.timm_names), so a misspelled architecture fails now, not when its job starts
# after hours of flow training
with oc.one_line_errors():
    oc.validate_config(config, SCHEMA)
    oc.fill_defaults(config, SCHEMA)
    oc.check_config(config)
    if engine.is_main_process(workflow):
        if _note := engine.version_note():
            print(_note, file=sys.stderr)
        oc.check_classifier_archs(config)
        # a `pretrained:` weights file that is not there: refused now, dry run or not, unless
        # ORACLE_PLAN_ONLY=1 asks a dry run to plan without it (`onstart` refuses a run anyway)
        oc.check_pretrained_files(config, allow_missing=oc.plan_only())
if engine.is_main_process(workflow):
    # raw data and weights the user must still put in place: listed by every invocation (a dry
    # run plans without them); `onstart` refuses a run whose jobs would read one
    if _missing := oc.missing_files(config):
        print(oc.missing_files_text(_missing), file=sys.stderr)
    # the local job server stays up while this run lives (oracle.workflow.jobs.server)
    job_server.mark_run()


# The run's own report is results/<run>/report.html (rules/report.smk). `snakemake --report
# FILE` builds Snakemake's report of the workflow (rule graph, runtimes, each job's parameters):
# this text heads it; tables and figures are marked with the helpers of rules/common.smk.
report: "report/workflow.rst"


# Every job imports the `oracle` package of this checkout, whichever environment runs it
# (the venv, a --use-conda environment, a cluster node re-reading this file).
oc.prepend_pythonpath(workflow.basedir)


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/oracle.smk"
include: "rules/validation.smk"
include: "rules/samples.smk"
include: "rules/splits.smk"
include: "rules/classifiers.smk"
include: "rules/experiments.smk"
# a kind's own jobs (tests/test_experiment_kinds.py: every rules/<kind>.smk is included here)
include: "rules/active.smk"
include: "rules/numbers.smk"
include: "rules/timings.smk"
include: "rules/report.smk"


# The aggregate targets and the effective config, and the cheap analysis rules (tables, figures,
# numbers, claims, each kind's collect) run where Snakemake runs instead of as cluster jobs of
# their own, unless resources.analysis.local is false: a login node's CPU is the site's policy
# (docs/slurm.md, "Analysis rules"). One list: oracle.workflow.plan.resources.local_rules.
engine.mark_local(workflow, res.local_rules(config, kinds()))


# Before any job runs: the raw data and weights the jobs about to run read are there
# (oracle.workflow.plan.needed_files), and their inputs are checked
# (oracle.workflow.provenance.input_identity) before Snakemake removes any of their outputs: a corrupt or foreign shard
# stops the run here, not after the valid files built from the old shards were deleted.
onstart:
    from oracle.errors import ConfigError, OracleError
    from oracle.workflow.plan.disk import disk_problem
    from oracle.workflow.provenance.input_identity import check_pending_inputs

    # Snakemake's lock is taken: who holds it, for the message a second run gets (engine.lock_holder_text)
    engine.note_lock_holder()
    # `--touch` runs no job, so no input is read: nothing to check (and touched outputs have no records)
    _pending = [] if engine.touch_run(workflow) else engine.pending_jobs(workflow)
    try:
        # the start check ran on this DAG (a Snakemake release that moved its hook stops here)
        if START_CHECK is not None:
            START_CHECK.verify()
        # pretrained weights not there: a run refuses them whatever ORACLE_PLAN_ONLY says (it plans only)
        oc.check_pretrained_files(config)
        # raw data or weights a job to run would read but that are not there: refused in one line
        oc.check_needed_files(config, (engine.job_rule(job) for job in _pending))
        check_pending_inputs([engine.job_inputs(job) for job in _pending],
                             [f for job in _pending for f in engine.job_outputs(job)], config)
        # sample shards the disk cannot hold (oracle.workflow.plan.disk): refused before any job
        if any(engine.job_rule(job) == "sample_shard" for job in _pending) and (_disk := disk_problem(config, RUN)):
            raise ConfigError(_disk)
    except OracleError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


# Results copied without Snakemake's metadata (a fresh clone, a deleted .snakemake, a linked
# results folder) are checked through their records once the DAG is built, before Snakemake
# decides that nothing is to be done: what differs reruns (oracle.workflow.start_check, oracle.workflow.provenance.stale).
from oracle.workflow import start_check

START_CHECK = start_check.install(workflow, config, RUN, PAPER_TARGETS) if engine.is_main_process(workflow) else None


rule all:
    input:
        RUN_TARGETS,
        TIMINGS_CSV,
        TIMINGS_MD,
        REPORT_HTML,
    default_target: True


rule effective_config:
    output:
        EFFECTIVE_CONFIG,
    params:
        config=config,
    log:
        f"{LOGS}/effective_config.log",
    benchmark:
        f"{BENCHMARKS}/effective_config.tsv"
    resources:
        **res.rule_resources(config, "analysis"),
    threads: 1
    conda:
        "envs/oracle.yaml"
    script:
        "scripts/effective_config.py"


# The end of a run: its wall time, where results, report and timings are, its headline numbers.
onsuccess:
    from oracle.report.summary import run_summary

    print(run_summary(RUN, time.time() - RUN_STARTED), flush=True)
