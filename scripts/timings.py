"""Rule `timings`: every benchmark file of the run -> timings.csv and timings.md (per rule:
jobs, total and largest wall seconds, largest resident set in MB; slowest rule first).

It runs after every other target of `all`, so the benchmark folder then holds a file for each
job of the run (the files are globbed here: a rule cannot name its own benchmark as input).
"""

from oracle.workflow.jobs import run_job


def main(sm):
    from oracle.report.tables import write_csv_markdown
    from oracle.report.timings import timings_table
    from oracle.workflow.job_server import server_configured

    served = server_configured()  # then benchmarks measured each job's client, not its work
    df = timings_table(sm.params.benchmarks, memory=not served)
    memory = ("memory not measured: the local job server ran the jobs (ORACLE_JOB_SERVER=off measures it)"
              if served else "peak resident memory (MB)")
    write_csv_markdown(df, sm.output.csv, sm.output.md, float_format=".1f",
                       caption=f"Where the run's time went: wall seconds per rule; {memory}")
    total = df[df["rule"] == "total"]
    print(f"{len(df) - len(total)} rules, {int(total['jobs'].sum())} jobs, {float(total['total_s'].sum()):.0f} s in all")


run_job(snakemake, main)  # noqa: F821 - injected by Snakemake's script directive
