"""Rule `claims`: numbers.json and the config's experiments -> claims.csv and claims.md, one row
per finding of the paper with this run's value, its uncertainty and a verdict under a stated
rule (`oracle.report.claims`), and claims.{pdf,png} with its caption: the same as a forest plot
(`oracle.report.claims_figure`)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    import pandas as pd

    from oracle.report.claims import claims
    from oracle.report.verdicts import counts_text
    from oracle.report.tables import write_csv_markdown

    rows = claims(json.loads(Path(sm.input.numbers).read_text()), sm.params.experiments)
    write_csv_markdown(pd.DataFrame(rows), sm.output.csv, sm.output.md,
                       "The paper's findings against this run's numbers (verdict under each row's rule)",
                       notes=f"Verdicts: {counts_text(rows)}.",
                       csv_only=("checks",))
    from oracle.report.captions import write_caption
    from oracle.report.claims_figure import claims_caption, claims_forest

    frame = pd.read_csv(sm.output.csv, keep_default_na=False)
    claims_forest(frame, Path(sm.output.pdf).with_suffix(""))
    write_caption(sm.output.caption, claims_caption(frame))
    print({r["id"]: r["verdict"] for r in rows})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
