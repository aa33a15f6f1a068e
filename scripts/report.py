"""Rule `report`: every table, figure and caption of the run, the claims and the timings ->
results/<run>/report.html (oracle.report.html_report: the claims first, each figure with its
caption, tables as tables; one self-contained page)."""

from oracle.workflow.jobs import run_job


def main(sm):
    from pathlib import Path

    from oracle.report.html_report import report_intro, report_items, run_facts, world_rows, write_report
    from oracle.report.timings import job_intervals, wall_time
    from oracle.workflow.provenance import read_record

    c, run = sm.params.contents, Path(sm.output[0]).parent.as_posix()
    stem = lambda path: Path(path).with_suffix("").as_posix()  # noqa: E731 - claims.png -> claims
    sections = report_items(run, stem(sm.input.claims), c["experiments"], c["validation"], stem(sm.input.timings),
                            c["paper_labels"])
    claims_csv = f"{stem(sm.input.claims)}.csv"
    facts = run_facts(read_record(claims_csv), claims_csv, wall_time(job_intervals(f"{run}/benchmarks"))["last_s"])
    path = write_report(sections, sm.output[0], *report_intro(run), facts=facts, worlds=world_rows(c["worlds"]))
    print(f"{path}: {sum(len(s.items) for s in sections)} tables and figures in {len(sections)} sections")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
