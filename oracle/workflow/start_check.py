"""The start-of-run check, wired to Snakemake: once a run's (or dry run's) DAG is built, every job
Snakemake would not run is checked through its outputs' records (`oracle.workflow.provenance.
stale`): what was made under other params is forced (with everything after it), a missing output
beside its record is rebuilt, and a run that would overwrite another run's artifacts behind a
link stops with one line. `snakemake --report` over results that are not this config's stops
with one line; a dry run ends with its one-screen plan (`oracle.workflow.plan.dry_run`).

Snakemake's objects are read only through `oracle.workflow.engine`; the Snakefile calls
`install(workflow, config, run_dir, paper_targets)` in the main process.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from oracle.errors import OracleError
from oracle.workflow import engine

__all__ = ["install"]


def _fail(exc: OracleError) -> None:
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    raise SystemExit(1) from None


class _StartCheck:
    """The checks of one invocation: `workflow` (Snakemake's), the run's validated `config`,
    its folder `run_dir` (results/<run>)."""

    def __init__(self, workflow: Any, config: Mapping, run_dir: str) -> None:
        self.workflow, self.config, self.run_dir = workflow, config, run_dir
        self.dry_run_plan: list[str] = []  # printed once Snakemake's own dry-run output has ended

    def planned(self, jobs: list) -> list:
        """Snakemake's jobs as the plain values `stale` reads."""
        from oracle.workflow.provenance import stale
        from oracle.workflow.provenance.params import job_params

        # an alias or `all` has no script and writes no record, so it has no params to compare
        return [stale.PlannedJob(rule=engine.job_rule(j), needrun=engine.needs_run(self.workflow, j),
                                 outputs=engine.job_outputs(j, temp=False),
                                 params=job_params(engine.job_params(j)) if engine.job_has_script(j) else None,
                                 inputs=engine.job_inputs(j)) for j in jobs]

    def stale_reasons(self, plan_now: list) -> dict:
        from oracle.workflow.provenance import stale

        return stale.stale_reasons(plan_now, settings=engine.params_trigger(self.workflow))

    @staticmethod
    def write_params_out(jobs: list) -> None:
        """For the audit (`oracle.workflow.provenance.params.workflow_params`): every job's params
        by output, to the file the environment names, when it names one."""
        from oracle.workflow.provenance.params import PARAMS_OUT, write_params_out

        if os.environ.get(PARAMS_OUT):
            write_params_out(((engine.job_outputs(j), engine.job_params(j)) for j in jobs if engine.job_has_script(j)),
                             os.environ[PARAMS_OUT])

    @staticmethod
    def same_code(job: Any) -> bool:
        """Whether the outputs of `job` were made by its rule script as it reads now (their
        records' ``code.files``): asked where Snakemake's mtime test would call its code changed."""
        from oracle.workflow.provenance import stale

        try:
            return stale.script_unchanged(engine.job_outputs(job, temp=False), engine.job_script(job))
        except OracleError:  # an unreadable record: Snakemake's own verdict (rerun) stands
            return False

    def on_run_dag(self) -> None:
        try:
            self._check_existing_artifacts()
        except OracleError as exc:  # an unreadable record: one line, as the onstart check says it
            _fail(exc)

    def _check_existing_artifacts(self) -> None:
        from oracle.workflow.provenance import stale

        jobs = engine.dag_jobs(self.workflow)
        self.write_params_out(jobs)
        plan_now = self.planned(jobs)
        reasons = self.stale_reasons(plan_now)
        if reasons:
            print("\n".join(stale.stale_summary(plan_now, reasons)), file=sys.stderr)
            engine.force_rerun(self.workflow, (f for i in reasons for f in engine.job_outputs(jobs[i])))
            plan_now = self.planned(jobs)
        for note in (stale.code_drift_note(plan_now), stale.package_drift_note(plan_now)):
            if note:
                print(note, file=sys.stderr)
        if error := stale.overwrite_error(plan_now, self.run_dir):
            print(error, file=sys.stderr)
            raise SystemExit(1)
        if engine.dry_run(self.workflow):
            self.dry_run_plan.extend(self._dry_run_plan())

    def _dry_run_plan(self) -> list[str]:
        """The lines of the dry run's plan: each job to run with the resources it asks for and the
        group job it runs in."""
        from oracle.experiments import kinds
        from oracle.workflow.plan import dry_run
        from oracle.workflow.plan import resources as res
        from oracle.workflow.plan.disk import row_bytes
        from oracle.workflow.plan.needed_files import missing_files

        local = set(res.local_rules(self.config, kinds()))
        jobs = engine.pending_jobs(self.workflow)
        index = {job: i for i, job in enumerate(jobs)}
        requests = []
        for job in jobs:
            f = engine.job_request_fields(job)
            requests.append(dry_run.job_request(self.config, f["rule"], f["snakefile"], f["group"], f["resources"],
                                                f["wildcards"], local))
        edges = [(index[job], index[dep]) for job in jobs for dep in engine.dependencies(self.workflow, job)
                 if dep in index]
        missing = [f"{m.label} {m.path} (config key {m.key})" for m in missing_files(self.config)]
        return dry_run.plan_summary(requests, edges, group_components=engine.group_components(self.workflow),
                                    row_bytes=row_bytes(self.config), missing=missing,
                                    projection=dry_run.projection_for(self.config))

    def on_report_dag(self) -> None:
        """`--report` over results that are not this config's (a job still to run, or outputs made
        under other params) stops with one line instead of reporting them."""
        from oracle.workflow.provenance import stale

        try:
            plan_now = self.planned(engine.dag_jobs(self.workflow))
            error = stale.report_error(plan_now, self.stale_reasons(plan_now))
        except OracleError as exc:
            error = f"{type(exc).__name__}: {exc}"
        if error:
            print(f"Error: {error}", file=sys.stderr)
            raise SystemExit(1)

    def after_execute(self) -> None:
        if self.dry_run_plan:
            print("\n".join(self.dry_run_plan), file=sys.stderr)


def install(workflow: Any, config: Mapping, run_dir: str, paper_targets: Mapping[str, list[str]]) -> engine.Hooks:
    """Install the start check on `workflow` (`engine.install`), a paper id named as a target
    (`snakemake --force fig2`) standing for its artifact's files (`paper_targets`). Returns the
    hooks, whose `verify` the Snakefile's onstart calls before any job runs; a Snakemake without
    the names the hooks need stops the run in one line."""
    check = _StartCheck(workflow, config, run_dir)
    try:
        return engine.install(workflow, on_run_dag=check.on_run_dag, on_report_dag=check.on_report_dag,
                              after_execute=check.after_execute,
                              targets=lambda targets: engine.expand_targets(targets, paper_targets),
                              same_code=check.same_code)
    except OracleError as exc:
        _fail(exc)
        raise  # unreachable: _fail exits
