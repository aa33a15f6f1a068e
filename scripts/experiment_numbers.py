"""Rule `experiment_numbers`: an experiment's in-text numbers from its data files ->
numbers/<experiment>.json (oracle.experiments.<kind>.numbers; keys without the experiment
prefix, which the merge into numbers.json adds)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import pandas as pd

    from oracle.experiments import kind_module
    from oracle.io.atomic import write_json_atomic

    spec = sm.params.spec
    paths = dict(sm.input.items())
    data = {name: pd.read_csv(path) for name, path in paths.items()}
    numbers = kind_module(spec["kind"]).numbers(data, spec, paths)
    write_json_atomic(sm.output[0], numbers)
    for key, entry in numbers.items():
        print(f"{key}: {entry['value']} {entry['unit']}")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
