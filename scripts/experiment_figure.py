"""Rule `experiment_figure`: one figure of an experiment, from its data files ->
<kind>/<experiment>/figures/<artifact>.{pdf,png} (oracle.experiments.<kind>.figure)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    import pandas as pd

    from oracle.experiments import kind_module

    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    kind_module(sm.wildcards.kind).figure(sm.wildcards.artifact, data, sm.params.spec, Path(sm.output[0]).with_suffix(""))


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
