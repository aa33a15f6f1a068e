"""Rule `validation_numbers`: validation/metrics.json -> numbers/validation.json (FID or FD under
its feature space's name, IS, coverage, memorization, diversity, stability, BPD)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.io.atomic import write_json_atomic
    from oracle.validation.artifacts import validation_numbers

    numbers = validation_numbers(json.loads(Path(sm.input.metrics).read_text()), sm.input.metrics)
    write_json_atomic(sm.output[0], numbers)
    print({k: v["value"] for k, v in numbers.items()})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
