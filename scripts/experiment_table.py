"""Rule `experiment_table`: one table of an experiment, from its data files ->
<kind>/<experiment>/tables/<artifact>.{csv,md,tex,caption.rst} (oracle.experiments.<kind>.table;
the caption: the artifact's description and the finding computed from the same data)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    import pandas as pd

    from oracle.experiments import artifact_findings, kind_module
    from oracle.report.captions import full_caption, write_caption
    from oracle.report.tables import write_table

    data = {name: pd.read_csv(path) for name, path in sm.input.items()}
    frame = kind_module(sm.wildcards.kind).table(sm.wildcards.artifact, data, sm.params.spec)
    finding = artifact_findings(sm.wildcards.kind, sm.wildcards.artifact, data, sm.params.spec)
    caption = full_caption(sm.params.caption, finding)
    # the .tex caption says what the table shows; the finding (this run, the paper) is a note under it
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption, note=finding,
                label=f"{sm.wildcards.experiment}:{sm.wildcards.artifact}", widths_in=sm.params.figures)
    write_caption(sm.output[-1], caption)
    print(caption)
    print(frame.to_string())


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
