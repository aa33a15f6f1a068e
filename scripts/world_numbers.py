"""Rule `world_numbers`: one world's constants -> numbers/world.<world>.json (aleatoric floor,
Bayes error and accuracy, I(X;Y), the closed-form Bayes error of an analytic world)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json
from pathlib import Path

from oracle.io.atomic import write_json_atomic
from oracle.measures.world_constants import world_numbers
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    numbers = world_numbers(json.loads(Path(sm.input.constants).read_text()), sm.input.constants)
    write_json_atomic(sm.output[0], numbers)
    print({k: v["value"] for k, v in numbers.items()})
    record_job(sm, started)
