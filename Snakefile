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

from oracle.workflow import config as oc
from oracle.workflow import job_server

min_version("9.0")


# A --configfile replaces the embedded default instead of being merged into it: a preset is a
# complete config, and a mapping such as classifiers.archs must not inherit the default's tiny
# test models. --config key=value still overrides single keys on top of either.
if not workflow.overwrite_configfiles:

    configfile: os.path.join(workflow.basedir, "config.yaml")


# config.schema.yaml with every experiment kind's entry schema (oracle/experiments/<kind>/schema.yaml)
SCHEMA = oc.full_schema(os.path.join(workflow.basedir, "config.schema.yaml"))
# One-line ConfigError naming the key first; then the schema's defaults are filled in.
oc.validate_config(config, SCHEMA)
oc.fill_defaults(config, SCHEMA)
oc.check_config(config)
# timm names and pretrained files: once per invocation (timm's import takes seconds), so a
# misspelled architecture fails now, not when its job starts after hours of flow training
if workflow.is_main_process:
    oc.check_classifier_archs(config)
    # the local job server stays up while this run lives (oracle.workflow.job_server)
    job_server.mark_run()


# `snakemake --report report.html`: this text heads the report; tables and figures are marked
# with the helpers of rules/common.smk.
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


localrules:
    all,
    effective_config,
    oracle,
    samples,
    splits,
    classifiers,
    experiments,
    validation,
    timings,


# The inputs of the jobs about to run are checked (oracle.workflow.input_identity) before
# Snakemake removes any of their outputs: a corrupt or foreign shard stops the run here, not
# after the valid files built from the old shards were deleted.
onstart:
    from oracle.errors import OracleError
    from oracle.workflow.input_identity import check_pending_inputs

    # `--touch` runs no job, so no input is read: nothing to check (and touched outputs have no records)
    _pending = [] if workflow.touch else list(workflow.dag.needrun_jobs())
    try:
        check_pending_inputs([(str(f) for f in job.input) for job in _pending],
                             [str(f) for job in _pending for f in job.output], config)
    except OracleError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


# Results copied without Snakemake's metadata (a fresh clone, a deleted .snakemake, a linked
# results folder) are checked through their records once the DAG is built, before Snakemake
# decides that nothing is to be done (oracle.workflow.stale): what was made under other settings
# or from other inputs reruns, a missing output beside its record is rebuilt, and another run's
# artifacts reached through a link are never overwritten. Snakemake has no hook there, so the
# DAG build of this invocation's `execute` is wrapped (what `paper_target_input` relies on too:
# the DAG's set of forced files).
def check_existing_artifacts():
    from snakemake.io import is_flagged
    from snakemake.settings.enums import RerunTrigger

    from oracle.workflow import stale

    dag = workflow.dag
    jobs = list(dag.jobs)

    def planned():
        return [stale.PlannedJob(rule=j.rule.name, needrun=dag.needrun(j),
                                 outputs=tuple(str(f) for f in j.output if not is_flagged(f, "temp")),
                                 config_keys=getattr(j.params, "config_keys", None)) for j in jobs]

    plan_now = planned()
    triggers = workflow.rerun_triggers
    reasons = stale.stale_reasons(plan_now, config, settings=RerunTrigger.PARAMS in triggers,
                                  inputs=RerunTrigger.INPUT in triggers)
    if reasons:
        print("\n".join(stale.stale_summary(plan_now, reasons)), file=sys.stderr)
        dag.forcefiles.update(f for i in reasons for f in jobs[i].output)
        workflow.async_run(dag.update_needrun())
        plan_now = planned()
    count, changed = stale.code_drift(plan_now)
    if count:
        print(f"note: {count} existing output(s) were made by other code ({', '.join(changed[:4])}"
              f"{' ...' if len(changed) > 4 else ''}); they are kept, as Snakemake keeps them: "
              "`snakemake --forcerun <rule>` remakes them, `audit --strict-code` flags them", file=sys.stderr)
    problems = stale.overwrite_problems(plan_now, RUN)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        print(f"DataError: {problems[0]}{more}", file=sys.stderr)
        raise SystemExit(1)


if workflow.is_main_process:
    _execute, _build_dag = workflow.execute, workflow._build_dag

    def _build_dag_checked():
        _build_dag()
        if _checking:
            check_existing_artifacts()

    def _execute_checked(*args, **kwargs):
        _checking.append(True)
        return _execute(*args, **kwargs)

    _checking = []
    workflow._build_dag = _build_dag_checked
    workflow.execute = _execute_checked


rule all:
    input:
        RUN_TARGETS,
        TIMINGS_CSV,
        TIMINGS_MD,
    default_target: True


rule effective_config:
    output:
        f"{RUN}/config.yaml",
    params:
        config=config,
        config_keys=declared_keys("effective_config"),  # the whole config
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
