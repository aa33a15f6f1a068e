"""Rule `collect_metrics`: every classifier metrics.json of an experiment -> one CSV row each."""

from oracle import experiments as ex
from oracle.io.atomic import atomic_output

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive

with ex.script_job(sm.log[0], sm.threads) as started:
    df = ex.collect_metrics(sm.input.metrics)
    with atomic_output(sm.output[0]) as tmp:
        df.to_csv(tmp, index=False)
    print(f"{len(df)} classifier runs")
    ex.record_job(sm, started)
