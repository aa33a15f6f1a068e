"""Rule `claims`: numbers.json and the config's experiments -> claims.csv and claims.md, one row
per finding of the paper with this run's value, its uncertainty, a verdict under a stated rule,
its margin and the paper's own verdict (`oracle.report.claims_doc`), and claims.{pdf,png} with
its caption: the same as a forest plot (`oracle.report.claims_figure`)."""

from oracle.workflow.jobs import run_job


def main(sm):
    import json
    from pathlib import Path

    import pandas as pd

    from oracle.report.captions import write_caption
    from oracle.report.claims_doc import claims_markdown, claims_rows
    from oracle.report.claims_figure import claims_caption, claims_forest
    from oracle.report.figures import PrintWidths, use_print_widths
    from oracle.report.tables import write_all

    rows = claims_rows(json.loads(Path(sm.input.numbers).read_text()), sm.params.experiments, sm.params.judged_on)
    frame = pd.DataFrame(rows)
    write_all({Path(sm.output.csv): frame.to_csv(index=False, lineterminator="\n").encode("utf-8"),
               Path(sm.output.md): claims_markdown(rows, "The paper's findings against this run").encode("utf-8")})
    frame = pd.read_csv(sm.output.csv, keep_default_na=False)
    with use_print_widths(PrintWidths.from_config(sm.params.figures)):  # the venue's widths (config figures)
        claims_forest(frame, Path(sm.output.pdf).with_suffix(""))
    write_caption(sm.output.caption, claims_caption(frame))
    print({r["id"]: r["verdict"] for r in rows})


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
