"""The run's timing table from Snakemake benchmark files (oracle.report.timings)."""

import math

import pandas as pd
import pytest

from oracle.errors import DataError
from oracle.report.tables import write_csv_markdown
from oracle.report.timings import BENCHMARK_COLUMNS, timings_table

HEADER = "\t".join(BENCHMARK_COLUMNS)


def bench(path, *rows):
    """A benchmark file as Snakemake writes it: the header, then one line per repetition."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "\n" + "".join("\t".join(map(str, r)) + "\n" for r in rows))


def row(seconds, rss):
    return [f"{seconds:.4f}", "0:00:01", rss, 900.5, 100.0, 120.0, 0.5, 1.25, 80.0, 3.5]


def test_timings_per_rule(tmp_path):
    root = tmp_path / "benchmarks"
    bench(root / "train_classifier" / "scaling" / "tiny" / "n50" / "seed0.tsv", row(10.0, 300.0))
    bench(root / "train_classifier" / "scaling" / "tiny" / "n50" / "seed1.tsv", row(30.0, 500.25))
    bench(root / "train_classifier" / "scaling" / "tiny" / "n200" / "seed0.tsv", row(20.0, 400.0))
    bench(root / "numbers.tsv", row(2.0, 150.0))
    # a job that ended before its first sample: Snakemake writes NA for every measured column
    bench(root / "effective_config.tsv", [f"{0.1:.4f}", "0:00:00", *["NA"] * 8])
    # two repetitions of one job: its time is their mean
    bench(root / "sample_shard" / "base" / "shard-0.tsv", row(4.0, 700.0), row(6.0, 650.0))
    df = timings_table(root)
    assert list(df.columns) == ["rule", "jobs", "job_s", "max_job_s", "max_rss_mb"]
    assert list(df["rule"]) == ["train_classifier", "sample_shard", "numbers", "effective_config", "total"]
    t = df.set_index("rule")
    assert t.loc["train_classifier", "jobs"] == 3
    assert t.loc["train_classifier", "job_s"] == pytest.approx(60.0)
    assert t.loc["train_classifier", "max_job_s"] == pytest.approx(30.0)
    assert t.loc["train_classifier", "max_rss_mb"] == pytest.approx(500.25)
    assert t.loc["sample_shard", "job_s"] == pytest.approx(5.0) and t.loc["sample_shard", "max_rss_mb"] == 700.0
    assert math.isnan(t.loc["effective_config", "max_rss_mb"])
    assert t.loc["total", "jobs"] == 6
    assert t.loc["total", "job_s"] == pytest.approx(67.1)
    assert t.loc["total", "max_job_s"] == pytest.approx(30.0) and t.loc["total", "max_rss_mb"] == 700.0

    write_csv_markdown(df, tmp_path / "timings.csv", tmp_path / "timings.md", "timings", float_format=".1f")
    back = pd.read_csv(tmp_path / "timings.csv")
    assert back["job_s"].tolist() == pytest.approx(df["job_s"].tolist())
    md = (tmp_path / "timings.md").read_text()
    assert md.startswith("Table: timings") and "train_classifier" in md
    assert "60.0" in md and "–" in md  # the unsampled memory shows as a dash

    # under the local job server the benchmarks measured each job's client: no memory column
    served = timings_table(root, memory=False)
    assert served["max_rss_mb"].isna().all()
    assert served["job_s"].tolist() == pytest.approx(df["job_s"].tolist())


def test_empty_and_bad_files(tmp_path):
    assert timings_table(tmp_path / "none").empty
    bad = tmp_path / "b" / "data.tsv"
    bad.parent.mkdir()
    bad.write_text("seconds\n1.0\n")
    with pytest.raises(DataError, match=r"data.tsv: benchmark file lacks column"):
        timings_table(tmp_path / "b")


def test_wall_time_is_the_span_and_busy_time_of_the_jobs(tmp_path):
    import os

    from oracle.report.timings import job_intervals, wall_time

    root = tmp_path / "benchmarks"
    # two jobs side by side (0-10 s, 5-20 s), then a gap, then one more (100-130 s): 55 job-seconds
    for name, (start, end) in {"a.tsv": (0, 10), "b/x.tsv": (5, 20), "c.tsv": (100, 130)}.items():
        bench(root / name, row(end - start, 1.0))
        os.utime(root / name, (1e9 + end, 1e9 + end))
    got = wall_time(job_intervals(root))
    assert got["span_s"] == pytest.approx(130.0) and got["busy_s"] == pytest.approx(50.0)
    # the gap of 80 s with no job: c.tsv is the last invocation, alone (a redrawn figure)
    assert got["last_s"] == pytest.approx(30.0) and got["last_jobs"] == 1
    assert wall_time(job_intervals(root), gap_s=100.0)["last_s"] == pytest.approx(130.0)  # one invocation
    assert math.isnan(wall_time([])["span_s"]) and math.isnan(wall_time([])["last_s"])


def test_timing_notes_give_the_last_invocation_and_say_when_older_jobs_count(tmp_path):
    from oracle.report.timings import timing_notes

    table = pd.DataFrame([{"rule": "total", "jobs": 3, "job_s": 55.0, "max_job_s": 30.0, "max_rss_mb": 1.0}])
    notes = timing_notes(table, {"span_s": 130.0, "busy_s": 50.0, "last_s": 30.0, "last_jobs": 1}, 0.0, [])
    assert "Wall time: 30.0 s, the jobs of the last invocation (1 job after" in notes
    assert "over all jobs, 130.0 s" in notes
    one = timing_notes(table, {"span_s": 30.0, "busy_s": 30.0, "last_s": 30.0, "last_jobs": 3}, 0.0, [])
    assert "Wall time: 30.0 s" in one and "Earlier invocations" not in one


def test_recorded_timing_reads_back_what_the_timings_rule_wrote(tmp_path):
    from oracle.report.timings import recorded_timing, timing_notes

    table = pd.DataFrame([{"rule": "train", "jobs": 2, "job_s": 40.0, "max_job_s": 30.0, "max_rss_mb": 1.0},
                          {"rule": "total", "jobs": 2, "job_s": 40.0, "max_job_s": 30.0, "max_rss_mb": 1.0}])
    notes = timing_notes(table, {"span_s": 130.0, "busy_s": 50.0, "last_s": 31.25, "last_jobs": 1}, 0.0, [])
    run = tmp_path / "run"
    run.mkdir()
    write_csv_markdown(table, run / "timings.csv", run / "timings.md", caption="Where the time went", notes=notes)
    got = recorded_timing(run)
    assert got["wall_s"] == pytest.approx(31.2, abs=0.051) and got["job_s"] == pytest.approx(40.0)
    empty = recorded_timing(tmp_path / "none")  # a run without timings: unknown, no error
    assert math.isnan(empty["wall_s"]) and math.isnan(empty["job_s"])
    (run / "timings.md").write_text("- Wall time: soon\n")
    with pytest.raises(DataError, match=r"timings\.md: the line .* holds no number"):
        recorded_timing(run)


def job(rule, seconds, outputs, inputs=(), **wildcards):
    return {"rule": rule, "wildcards": {k: str(v) for k, v in wildcards.items()}, "seconds": seconds,
            "timed_by": "script", "outputs": set(outputs), "inputs": set(inputs)}


def test_critical_path_of_a_constructed_dag():
    from oracle.report.timings import critical_path

    # data -> train (100 s) -> sample x2 (5 s, 30 s) -> merge -> two classifiers -> numbers;
    # an input inside an output directory (ckpt/) links too; an outside input (raw/) links nothing
    jobs = {
        "data": job("data", 2.0, ["r/data.h5"], ["raw/digits.npz"]),
        "train": job("train", 100.0, ["r/oracle"], ["r/data.h5"]),
        "s0": job("sample", 5.0, ["r/s0.h5"], ["r/oracle/flow.pt"]),
        "s1": job("sample", 30.0, ["r/s1.h5"], ["r/oracle/flow.pt"]),
        "merge": job("merge", 1.0, ["r/samples.h5"], ["r/s0.h5", "r/s1.h5"]),
        "fast": job("clf", 3.0, ["r/fast.csv"], ["r/samples.h5"]),
        "slow": job("clf", 20.0, ["r/slow.csv"], ["r/samples.h5"]),
        "numbers": job("numbers", 0.5, ["r/numbers.json"], ["r/fast.csv", "r/slow.csv"]),
        "alone": job("effective_config", 140.0, ["r/config.yaml"]),
    }
    seconds, chain = critical_path(jobs)
    assert chain == ["data", "train", "s1", "merge", "slow", "numbers"]
    assert seconds == pytest.approx(2 + 100 + 30 + 1 + 20 + 0.5)
    assert critical_path({}) == (0.0, [])
    jobs["data"]["inputs"].add("r/numbers.json")
    with pytest.raises(DataError, match="cycle"):
        critical_path(jobs)


def test_critical_path_of_a_job_reached_by_two_routes_is_no_cycle():
    from oracle.report.timings import critical_path

    # a depth-first walk from "end" meets "mid" twice (directly and through "side"): not a cycle
    jobs = {
        "end": job("numbers", 1.0, ["r/end"], ["r/mid", "r/side"]),
        "mid": job("merge", 2.0, ["r/mid"], ["r/root"]),
        "side": job("clf", 4.0, ["r/side"], ["r/mid", "r/root"]),
        "root": job("data", 8.0, ["r/root"]),
    }
    assert critical_path(jobs) == (15.0, ["root", "mid", "side", "end"])


def test_provenance_jobs_and_benchmark_times(tmp_path):
    import json

    from oracle.report.timings import critical_path, provenance_jobs, time_jobs_by_benchmarks, timing_notes

    run = tmp_path / "run"

    def record(artifact, rule, inputs, seconds, **wildcards):
        path = run / f"{artifact}.prov.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"id": f"run/{artifact}", "rule": rule, "wildcards": wildcards,
                                    "inputs": {f"run/{i}": "sha" for i in inputs}, "wall_time_s": seconds}))

    record("samples/base/shard-0001.h5", "sample_shard", [], 1.0, world="base", shard="0001")
    record("clf/seed1/model.pt", "train_classifier", ["samples/base/shard-0001.h5"], 2.0, seed="1")
    record("clf/seed1/history.json", "train_classifier", ["samples/base/shard-0001.h5"], 2.0, seed="1")
    record("clf/seed10/model.pt", "train_classifier", ["samples/base/shard-0001.h5"], 9.0, seed="10")
    jobs = provenance_jobs(run)
    assert sorted(jobs) == ["sample_shard[shard=0001, world=base]", "train_classifier[seed=10]",
                            "train_classifier[seed=1]"]
    assert jobs["train_classifier[seed=1]"]["outputs"] == {"run/clf/seed1/model.pt", "run/clf/seed1/history.json"}

    bench_root = run / "benchmarks"
    bench(bench_root / "sample_shard" / "base" / "shard-0001.tsv", row(4.0, 1.0))
    bench(bench_root / "train_classifier" / "seed1.tsv", row(3.0, 1.0))
    bench(bench_root / "train_classifier" / "seed10.tsv", row(12.0, 1.0))
    time_jobs_by_benchmarks(jobs, bench_root)
    assert {n: (j["seconds"], j["timed_by"]) for n, j in jobs.items()} == {
        "sample_shard[shard=0001, world=base]": (4.0, "benchmark"), "train_classifier[seed=1]": (3.0, "benchmark"),
        "train_classifier[seed=10]": (12.0, "benchmark")}
    seconds, chain = critical_path(jobs)
    assert (seconds, chain) == (16.0, ["sample_shard[shard=0001, world=base]", "train_classifier[seed=10]"])
    table = pd.DataFrame([{"rule": "total", "jobs": 3, "job_s": 19.0, "max_job_s": 12.0, "max_rss_mb": 1.0}])
    notes = timing_notes(table, {"span_s": 17.5, "busy_s": 17.0, "last_s": 17.5, "last_jobs": 3}, seconds, chain, jobs)
    assert "Job-seconds: 19.0 s over 3 jobs" in notes and "Wall time: 17.5 s" in notes
    assert "Critical path" in notes and "16.0 s over 2 jobs" in notes and "timed by their script" not in notes


def test_memory_of_job_server_children(tmp_path):
    import json

    from oracle.report.timings import read_rss_records, usage_record_path

    root = tmp_path / "benchmarks"
    bench(root / "train_classifier" / "seed0.tsv", row(10.0, 60.0))  # the client's memory: not the job's
    bench(root / "train_classifier" / "seed1.tsv", row(10.0, 61.0))
    bench(root / "numbers.tsv", row(1.0, 55.0))
    logs = tmp_path / "logs"
    log0, log1 = logs / "classifiers" / "seed0" / "train.log", logs / "classifiers" / "seed1" / "train.log"
    assert usage_record_path(log0) == logs / "classifiers" / "seed0" / "train.log.usage.json"

    def record(log, mib, rule=None):  # what oracle.workflow.jobs.server.delegate writes
        usage_record_path(log).parent.mkdir(parents=True, exist_ok=True)
        rec = {"max_rss_mib": mib, "user_s": 1.0, "system_s": 0.1, "wall_s": 2.0}
        usage_record_path(log).write_text(json.dumps(rec | ({"rule": rule} if rule else {})))

    record(log0, 512.0, "train_classifier")
    record(log1, 768.0, "train_classifier")
    record(logs / "anonymous.log", 9999.0)  # no rule named: not attributable, skipped
    assert read_rss_records(logs) == {"train_classifier": 768.0}
    t = timings_table(root, memory=False, rss=read_rss_records(logs)).set_index("rule")
    # numbers has no record: its jobs ran inline (like flow training), so its benchmark measured them
    assert t.loc["train_classifier", "max_rss_mb"] == 768.0 and t.loc["numbers", "max_rss_mb"] == 55.0
    assert t.loc["total", "max_rss_mb"] == 768.0
    (logs / "bad.log.usage.json").write_text('{"rule": "x"}')
    with pytest.raises(DataError, match="bad.log.usage.json"):
        read_rss_records(logs)
