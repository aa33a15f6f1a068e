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
    assert list(df.columns) == ["rule", "jobs", "total_s", "max_s", "max_rss_mb"]
    assert list(df["rule"]) == ["train_classifier", "sample_shard", "numbers", "effective_config", "total"]
    t = df.set_index("rule")
    assert t.loc["train_classifier", "jobs"] == 3
    assert t.loc["train_classifier", "total_s"] == pytest.approx(60.0)
    assert t.loc["train_classifier", "max_s"] == pytest.approx(30.0)
    assert t.loc["train_classifier", "max_rss_mb"] == pytest.approx(500.25)
    assert t.loc["sample_shard", "total_s"] == pytest.approx(5.0) and t.loc["sample_shard", "max_rss_mb"] == 700.0
    assert math.isnan(t.loc["effective_config", "max_rss_mb"])
    assert t.loc["total", "jobs"] == 6
    assert t.loc["total", "total_s"] == pytest.approx(67.1)
    assert t.loc["total", "max_s"] == pytest.approx(30.0) and t.loc["total", "max_rss_mb"] == 700.0

    write_csv_markdown(df, tmp_path / "timings.csv", tmp_path / "timings.md", "timings", float_format=".1f")
    back = pd.read_csv(tmp_path / "timings.csv")
    assert back["total_s"].tolist() == pytest.approx(df["total_s"].tolist())
    md = (tmp_path / "timings.md").read_text()
    assert md.startswith("Table: timings") and "train_classifier" in md
    assert "60.0" in md and "–" in md  # the unsampled memory shows as a dash

    # under the local job server the benchmarks measured each job's client: no memory column
    served = timings_table(root, memory=False)
    assert served["max_rss_mb"].isna().all()
    assert served["total_s"].tolist() == pytest.approx(df["total_s"].tolist())


def test_empty_and_bad_files(tmp_path):
    assert timings_table(tmp_path / "none").empty
    bad = tmp_path / "b" / "data.tsv"
    bad.parent.mkdir()
    bad.write_text("seconds\n1.0\n")
    with pytest.raises(DataError, match=r"data.tsv: benchmark file lacks column"):
        timings_table(tmp_path / "b")
