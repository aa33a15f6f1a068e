"""Rule `effective_config`: the config this run used (after schema defaults) -> results/<run>/config.yaml."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import yaml

from oracle.workflow.jobs import record_job, script_job
from oracle.io.atomic import atomic_output

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    cfg = dict(sm.params.config)
    with atomic_output(sm.output[0]) as tmp:
        tmp.write_text("# the effective config of this run (written by the workflow)\n"
                       + yaml.safe_dump(cfg, sort_keys=False, default_flow_style=None))
    record_job(sm, started, seed=cfg.get("seed"))
