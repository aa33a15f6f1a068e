"""Rule `world_numbers`: one world's constants -> numbers/world.<world>.json (aleatoric floor,
Bayes error and accuracy, I(X;Y), the closed-form Bayes error of an analytic world)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.io.atomic import write_json_atomic
    from oracle.measures.world_constants import world_numbers

    numbers = world_numbers(json.loads(Path(sm.input.constants).read_text()), sm.input.constants)
    write_json_atomic(sm.output[0], numbers)
    print({k: v["value"] for k, v in numbers.items()})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
