"""Rule `experiment_table`: one table of an experiment, from its data files ->
<kind>/<experiment>/tables/<artifact>.{csv,md,tex} (oracle.experiments.<kind>.table)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    import pandas as pd

    from oracle.experiments import kind_module
    from oracle.report.tables import write_table

    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    frame = kind_module(sm.wildcards.kind).table(sm.wildcards.artifact, data, sm.params.spec)
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption)
    print(frame.to_string())


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
