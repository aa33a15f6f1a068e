"""Rule `experiment_figure`: one figure of an experiment, from its data files ->
<kind>/<experiment>/figures/<artifact>.{pdf,png,caption.rst} (oracle.experiments.<kind>.figure;
the caption: the artifact's description and the finding computed from the same data)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    import pandas as pd

    from oracle.experiments import artifact_findings, kind_module
    from oracle.report.captions import full_caption, write_caption
    from oracle.report.figures import PrintWidths, use_print_widths

    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    with use_print_widths(PrintWidths.from_config(sm.params.figures)):  # the venue's widths (config figures)
        kind_module(sm.wildcards.kind).figure(sm.wildcards.artifact, data, sm.params.spec,
                                              Path(sm.output[0]).with_suffix(""))
    caption = full_caption(sm.params.caption, artifact_findings(sm.wildcards.kind, sm.wildcards.artifact, data,
                                                                sm.params.spec))
    write_caption(sm.output[-1], caption)
    print(caption)


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
