"""Rule `experiment_numbers`: an experiment's in-text numbers from its data files ->
numbers/<experiment>.json (oracle.experiments.<kind>.numbers; keys without the experiment
prefix, which the merge into numbers.json adds)."""

from oracle.workflow.job_server import delegate

delegate(snakemake)  # noqa: F821 - a local run hands this script to the job server

import pandas as pd

from oracle.experiments import kind_module
from oracle.io.atomic import write_json_atomic
from oracle.workflow.jobs import record_job, script_job

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with script_job(sm) as started:
    spec = sm.params.spec
    paths = dict(sm.input.items())
    data = {name: pd.read_csv(path) for name, path in paths.items()}
    numbers = kind_module(spec["kind"]).numbers(data, spec, paths)
    write_json_atomic(sm.output[0], numbers)
    for key, entry in numbers.items():
        print(f"{key}: {entry['value']} {entry['unit']}")
    record_job(sm, started)
