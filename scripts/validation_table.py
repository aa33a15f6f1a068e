"""Rule `validation_table`: validation/metrics.json -> validation/tables/<artifact>.{csv,md,tex}:
``checks`` (paper Table 3) or ``summary`` (Table 4); metric names carry their feature space."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.report.tables import write_table
    from oracle.validation.artifacts import validation_table

    metrics = json.loads(Path(sm.input.metrics).read_text())
    frame = validation_table(sm.wildcards.artifact, metrics, sm.params.dataset_name)
    write_table(frame, Path(sm.output[0]).with_suffix(""), caption=sm.params.caption)
    print(frame.to_string())


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
