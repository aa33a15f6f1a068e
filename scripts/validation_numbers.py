"""Rule `validation_numbers`: validation/metrics.json -> numbers/validation.json (FID or FD under
its feature space's name, IS, coverage, memorization, diversity, stability, BPD)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json
from pathlib import Path

from oracle.io.atomic import write_json_atomic
from oracle.validation.artifacts import validation_numbers
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    numbers = validation_numbers(json.loads(Path(sm.input.metrics).read_text()), sm.input.metrics)
    write_json_atomic(sm.output[0], numbers)
    print({k: v["value"] for k, v in numbers.items()})
    record_job(sm, started)
