"""Rule `validation_nn_distances`: validation/metrics.json -> validation/figures/nn_distances.{pdf,png,caption.rst}
(paper Figure 4: nearest-neighbour distances with the memorization threshold; the caption with
the finding computed from the metrics)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.report.captions import full_caption, write_caption
    from oracle.report.figures import PrintWidths, use_print_widths
    from oracle.validation.artifacts import nn_distances_figure
    from oracle.validation.findings import findings

    metrics = json.loads(Path(sm.input.metrics).read_text())
    with use_print_widths(PrintWidths.from_config(sm.params.figures)):  # the venue's widths (config figures)
        nn_distances_figure(metrics, Path(sm.output[0]).with_suffix(""))
    write_caption(sm.output[-1], full_caption(sm.params.caption, findings(sm.wildcards.artifact, metrics)))


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
