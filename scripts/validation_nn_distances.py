"""Rule `validation_nn_distances`: validation/metrics.json -> validation/figures/nn_distances
(paper Figure 4: nearest-neighbour distances with the memorization threshold)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json
from pathlib import Path

from oracle.validation.artifacts import nn_distances_figure
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    nn_distances_figure(json.loads(Path(sm.input.metrics).read_text()), Path(sm.output[0]).with_suffix(""))
    record_job(sm, started)
