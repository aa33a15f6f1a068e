"""Rule `numbers`: every part of numbers/ -> numbers.json ("<part>.<key>": value, unit, spread,
the artifact it was read from, description) and numbers.tex (one macro per number, and
\\paper<Id> per paper artifact: its path)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import json
from pathlib import Path

from oracle.io.atomic import atomic_output, write_json_atomic
from oracle.report.numbers import merge_numbers, numbers_tex
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    numbers = merge_numbers({prefix: json.loads(Path(path).read_text()) for prefix, path in sm.input.items()})
    write_json_atomic(sm.output.json, numbers)
    with atomic_output(sm.output.tex) as tmp:
        tmp.write_text(numbers_tex(numbers, sm.params.paper))
    print(f"{len(numbers)} numbers from {len(sm.input)} parts")
    record_job(sm, started)
