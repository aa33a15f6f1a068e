"""Rule `experiment_figure`: one figure of an experiment, from its data files ->
<kind>/<experiment>/figures/<artifact>.{pdf,png} (oracle.experiments.<kind>.figure)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

from pathlib import Path

import pandas as pd

from oracle.experiments import kind_module
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    kind_module(sm.wildcards.kind).figure(sm.wildcards.artifact, data, sm.params.spec, Path(sm.output[0]).with_suffix(""))
    record_job(sm, started)
