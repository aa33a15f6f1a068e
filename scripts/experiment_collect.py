"""Rule `<kind>_collect` (one per registered kind, rules/experiments.smk): an experiment's data files from its inputs ->
<kind>/<experiment>/data/<data>.csv, computed by oracle.experiments.<kind>.collect."""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.experiments import kind_module
    from oracle.io.atomic import atomic_output

    spec = sm.params.spec
    inputs = {name: list(files) if not isinstance(files, str) else [files] for name, files in sm.input.items()}
    frames = kind_module(spec["kind"]).collect(spec, inputs)
    for name, frame in frames.items():
        with atomic_output(getattr(sm.output, name)) as tmp:
            frame.to_csv(tmp, index=False)
        print(f"{name}: {len(frame)} rows")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
