"""The local job server records each child's peak memory where the client asks
(oracle.report.timings: ``<log>.rss.json``), for the run's timing table."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from oracle.report.timings import read_rss_records, rss_record_path

JOB = textwrap.dedent("""
    import numpy as np
    block = np.ones(200 * 2**20 // 8)  # 200 MiB touched by the job itself
    print(float(block.sum()))
""")

CLIENT = textwrap.dedent("""
    import sys
    from oracle.workflow.job_server import run_in_server
    rss = {"path": sys.argv[3], "rule": "big_job"}
    sys.exit(run_in_server([sys.argv[2]], preload=("numpy",), idle_s=5.0, directory=sys.argv[1], rss=rss) & 0xFF)
""")


def test_server_records_child_peak_memory(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "client.py").write_text(CLIENT)
    logs = tmp_path / "logs"
    logs.mkdir()
    where = rss_record_path(logs / "big.log")
    proc = subprocess.run([sys.executable, str(tmp_path / "client.py"), str(tmp_path), str(tmp_path / "job.py"),
                           str(where)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    mb = read_rss_records(logs)["big_job"]
    assert mb > 200.0  # the child's own block counts; the client's memory (no numpy block) would not
