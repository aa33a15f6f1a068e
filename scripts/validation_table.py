"""Rule `validation_table`: validation/metrics.json -> validation/tables/<artifact>.{csv,md,tex}:
``checks`` (paper Table 3) or ``summary`` (Table 4); metric names carry their feature space."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json
from pathlib import Path

from oracle.report.tables import write_table
from oracle.validation.artifacts import validation_table
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    metrics = json.loads(Path(sm.input.metrics).read_text())
    frame, float_format = validation_table(sm.wildcards.artifact, metrics, sm.params.dataset_name)
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption, float_format=float_format)
    print(frame.to_string())
    record_job(sm, started)
