"""Rule `validation_nn_distances`: validation/metrics.json -> validation/figures/nn_distances
(paper Figure 4: nearest-neighbour distances with the memorization threshold)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.validation.artifacts import nn_distances_figure

    nn_distances_figure(json.loads(Path(sm.input.metrics).read_text()), Path(sm.output[0]).with_suffix(""))


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
