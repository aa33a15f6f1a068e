"""Rule `timings`: every benchmark file of the run -> timings.csv and timings.md (per rule:
jobs, job-seconds summed and largest, largest resident set in MB; slowest rule first), and
under the table the run's wall time and its critical path (oracle.report.timings).

It runs after every other target of `all`, so the benchmark folder then holds a file for each
job of the run (the files are globbed here: a rule cannot name its own benchmark as input).
"""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.report.tables import write_csv_markdown
    from oracle.report.timings import (critical_path, job_intervals, provenance_jobs, read_rss_records,
                                       time_jobs_by_benchmarks, timing_notes, timings_table, wall_time)
    from oracle.workflow.jobs.server import server_configured

    served = server_configured()  # then benchmarks measured each job's client, not its work
    # no record at all: a server that records no memory, so no rule's benchmark can be trusted
    df = timings_table(sm.params.benchmarks, memory=not served,
                       rss=(read_rss_records(sm.params.logs) or None) if served else None)
    memory = ("peak resident memory (MiB): of each job's process forked by the local job server, or, for rules "
              "that run inline (data, flow training), Snakemake's benchmark" if served else "peak resident memory (MiB)")
    jobs = {name: job for name, job in provenance_jobs(sm.params.run).items() if job["rule"] != sm.rule}
    time_jobs_by_benchmarks(jobs, sm.params.benchmarks)
    path_s, chain = critical_path(jobs)
    notes = timing_notes(df, wall_time(job_intervals(sm.params.benchmarks)), path_s, chain, jobs)
    write_csv_markdown(df, sm.output.csv, sm.output.md, float_format=".1f", notes=notes,
                       caption=f"Where the run's time went: job-seconds per rule (wall seconds of its jobs, summed "
                               f"and largest); {memory}")
    print(notes)


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
