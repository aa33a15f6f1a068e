"""Rule `numbers`: every part of numbers/ -> numbers.json ("<part>.<key>": value, unit, spread,
the artifact it was read from, description) and numbers.tex (one macro per number, and
\\paper<Id> per paper artifact: its path)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    from oracle.io.atomic import atomic_output, write_json_atomic
    from oracle.report.numbers import merge_numbers, numbers_tex

    numbers = merge_numbers({prefix: json.loads(Path(path).read_text()) for prefix, path in sm.input.items()})
    write_json_atomic(sm.output.json, numbers)
    with atomic_output(sm.output.tex) as tmp:
        tmp.write_text(numbers_tex(numbers, sm.params.paper, run_dir=str(Path(sm.output.tex).parent)))
    print(f"{len(numbers)} numbers from {len(sm.input)} parts")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
