# What every stage and experiment file uses, included first by the Snakefile: the run's paths
# and the helpers its rules call with their wildcards, from the library, and the wildcard
# constraints. Where each artifact lives and which rules file makes it:
# oracle/workflow/plan/paths.py (RunPaths); the wildcard helpers: oracle/workflow/plan/rule_params.py.
# What stays here needs Snakemake itself: the report() marks of tables and figures, and the
# start-of-run check's reading of the DAG (every Snakemake internal it touches goes through
# oracle/workflow/engine.py).

import sys

from oracle.experiments import kind_module, kinds
from oracle.report.captions import CAPTION_SUFFIX
from oracle.workflow.plan import config as oc
from oracle.workflow import engine, plan
from oracle.workflow.plan import resources as res
from oracle.workflow.plan.paths import RunPaths, one_of
from oracle.workflow.plan.rule_params import RuleParams

PATHS = RunPaths(config)
PARAMS = RuleParams(config, PATHS)
# Every path template (RUN, SAMPLES, MODEL, LOGS, ...: results/<run>/... with {wildcards}), the
# plan (WORLDS, EXPERIMENTS, RUNS, SPLIT_WORLDS), the target lists (EXPERIMENT_TARGETS, ...), the
# path helpers (world_samples, collect_inputs, artifact_files, ...) and the wildcard helpers
# (training, classifier_runtime, artifact_caption, ...): RunPaths.rule_names, RuleParams.rule_names.
globals().update(PATHS.rule_names(), **PARAMS.rule_names())
PAPER = config.get("paper") or {}
# conda: of the rules in rules/*.smk (relative to those files)
ENV = "../envs/oracle.yaml"


wildcard_constraints:
    world=one_of(WORLDS),
    experiment=one_of(EXPERIMENTS),
    kind=one_of(e["kind"] for e in EXPERIMENTS.values()),
    arch=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    cell=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    # a world's test set, or a noisy copy of it (<world>-noise<sigma>, plan.noisy_set_name)
    evalset=f"(?:{one_of(WORLDS)})(?:{plan.NOISE_TAG}\\d[\\d.e+-]*)?",
    sigma=r"\d[\d.e+-]*",
    reference=one_of(WORLDS),
    shard=r"\d{4}",
    seed=r"\d+",
    artifact=r"[a-z0-9_]+",
    data=r"[a-z0-9_]+",


# ----------------------------------------------------------------------------- rule helpers
# (functions live here: Snakemake's linter wants rules files to hold rules only)


def table_outputs(stem, owner=None):
    """<stem>.csv and <stem>.md (both shown in `snakemake --report`, caption
    report/artifact.rst), .tex and the caption file .caption.rst (last; report/artifact.rst
    includes it): the order scripts rely on. `owner`: see RuleParams.report_category."""
    # (a line may not start with `report(`: Snakemake parses that as the report keyword)
    csv, md = (report(f"{stem}.{s}", caption="../report/artifact.rst", category=report_category(owner),
                      subcategory=report_subcategory(owner)) for s in ("csv", "md"))
    return [csv, md, f"{stem}.tex", f"{stem}.{CAPTION_SUFFIX}"]


def figure_outputs(stem, owner=None):
    """<stem>.pdf, <stem>.png (shown in the report) and the caption file .caption.rst (last).
    `owner`: see RuleParams.report_category."""
    return [f"{stem}.pdf", report(f"{stem}.png", caption="../report/artifact.rst", category=report_category(owner),
                                  subcategory=report_subcategory(owner)), f"{stem}.{CAPTION_SUFFIX}"]


# ----------------------------------------------------------------------------- start-of-run check
def check_existing_artifacts():
    """Every job of the DAG that Snakemake would not run, checked through its outputs' records
    (oracle.workflow.provenance.stale): what was made under other settings is forced (with everything
    after it), a missing output beside its record is rebuilt, and a run that would overwrite
    another run's artifacts behind a link stops with one line."""
    from oracle.errors import OracleError

    try:
        _check_existing_artifacts()
    except OracleError as exc:  # an unreadable record: one line, as the onstart check says it
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _planned(jobs):
    """Snakemake's jobs as the plain values oracle.workflow.provenance.stale reads."""
    from oracle.workflow.provenance import stale
    from oracle.workflow.provenance.params import job_params

    # an alias or `all` has no script and writes no record, so it has no params to compare
    return [stale.PlannedJob(rule=engine.job_rule(j), needrun=engine.needs_run(workflow, j),
                             outputs=engine.job_outputs(j, temp=False),
                             params=job_params(engine.job_params(j)) if engine.job_has_script(j) else None,
                             inputs=engine.job_inputs(j)) for j in jobs]


def _write_params_out(jobs):
    """For the audit (oracle.workflow.provenance.params.workflow_params): every job's params
    by output, to the file the environment names, when it names one."""
    import os

    from oracle.workflow.provenance.params import PARAMS_OUT, write_params_out

    if os.environ.get(PARAMS_OUT):
        write_params_out(((engine.job_outputs(j), engine.job_params(j)) for j in jobs if engine.job_has_script(j)),
                         os.environ[PARAMS_OUT])


def _stale_reasons(plan_now):
    from oracle.workflow.provenance import stale

    return stale.stale_reasons(plan_now, settings=engine.params_trigger(workflow))


def _check_existing_artifacts():
    from oracle.workflow.provenance import stale

    jobs = engine.dag_jobs(workflow)
    _write_params_out(jobs)

    def planned():
        return _planned(jobs)

    plan_now = planned()
    reasons = _stale_reasons(plan_now)
    if reasons:
        print("\n".join(stale.stale_summary(plan_now, reasons)), file=sys.stderr)
        engine.force_rerun(workflow, (f for i in reasons for f in engine.job_outputs(jobs[i])))
        plan_now = planned()
    for note in (stale.code_drift_note(plan_now), stale.package_drift_note(plan_now)):
        if note:
            print(note, file=sys.stderr)
    if error := stale.overwrite_error(plan_now, RUN):
        print(error, file=sys.stderr)
        raise SystemExit(1)
    if engine.dry_run(workflow):
        DRY_RUN_PLAN.extend(dry_run_plan())


#: The dry run's plan, printed once Snakemake's own dry-run output has ended.
DRY_RUN_PLAN = []


def dry_run_plan():
    """The lines of the dry run's one-screen plan (oracle.workflow.plan.dry_run): each job to run
    with the resources it asks for and the group job it runs in."""
    from oracle.workflow.plan import dry_run
    from oracle.workflow.plan.disk import row_bytes
    from oracle.workflow.plan.needed_files import missing_files

    local = set(res.local_rules(config, kinds()))
    jobs = engine.pending_jobs(workflow)
    index = {job: i for i, job in enumerate(jobs)}
    requests = []
    for job in jobs:
        f = engine.job_request_fields(job)
        requests.append(dry_run.job_request(config, f["rule"], f["snakefile"], f["group"], f["resources"],
                                            f["wildcards"], local))
    edges = [(index[job], index[dep]) for job in jobs for dep in engine.dependencies(workflow, job) if dep in index]
    missing = [f"{m.label} {m.path} (config key {m.key})" for m in missing_files(config)]
    return dry_run.plan_summary(requests, edges, group_components=engine.group_components(workflow),
                                row_bytes=row_bytes(config), missing=missing)


def check_report_inputs():
    """`snakemake --report` over results that are not this config's (a job still to run, or
    outputs made under other settings) stops with one line instead of reporting them."""
    from oracle.errors import OracleError
    from oracle.workflow.provenance import stale

    try:
        plan_now = _planned(engine.dag_jobs(workflow))
        error = stale.report_error(plan_now, _stale_reasons(plan_now))
    except OracleError as exc:
        error = f"{type(exc).__name__}: {exc}"
    if error:
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1)


def _print_dry_run_plan():
    if DRY_RUN_PLAN:
        print("\n".join(DRY_RUN_PLAN), file=sys.stderr)


def install_start_check():
    """Run `check_existing_artifacts` right after a run's (or dry run's) DAG is built and
    `check_report_inputs` after `--report`'s, print the dry run's plan at its end, and let a
    paper id named as a target (`snakemake --force fig2`) stand for its artifact's files
    (oracle.workflow.engine, the one module that touches Snakemake's internals). Returns the
    hooks, whose `verify` the onstart handler calls before any job runs."""
    from oracle.errors import OracleError

    try:
        return engine.install(workflow, on_run_dag=check_existing_artifacts, on_report_dag=check_report_inputs,
                              after_execute=_print_dry_run_plan,
                              targets=lambda targets: engine.expand_targets(targets, PAPER_TARGETS))
    except OracleError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
