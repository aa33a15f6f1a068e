"""Rule `experiment_table`: one table of an experiment, from its data files ->
<kind>/<experiment>/tables/<artifact>.{csv,md,tex} (oracle.experiments.<kind>.table)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from pathlib import Path

import pandas as pd

from oracle.experiments import kind_module
from oracle.report.tables import write_table
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    frame, float_format = kind_module(sm.wildcards.kind).table(sm.wildcards.artifact, data, sm.params.spec)
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption, float_format=float_format)
    print(frame.to_string())
    record_job(sm, started)
