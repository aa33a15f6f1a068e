"""Rule `validation_table`: validation/metrics.json -> validation/tables/<artifact>.{csv,md,tex,caption.rst}:
``checks`` (paper Table 3) or ``summary`` (Table 4); metric names carry their feature space; the
caption: the artifact's description and the finding computed from the metrics."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.report.captions import full_caption, write_caption
    from oracle.report.tables import write_table
    from oracle.validation.artifacts import validation_table
    from oracle.validation.findings import findings

    metrics = json.loads(Path(sm.input.metrics).read_text())
    frame = validation_table(sm.wildcards.artifact, metrics, sm.params.dataset_name)
    finding = findings(sm.wildcards.artifact, metrics)
    caption = full_caption(sm.params.caption, finding)
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption, note=finding,
                label=f"validation:{sm.wildcards.artifact}", widths_in=sm.params.figures)
    write_caption(sm.output[-1], caption)
    print(caption)
    print(frame.to_string())


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
