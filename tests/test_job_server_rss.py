"""The local job server measures each job's child (peak memory, CPU) and `delegate` writes it
where `oracle.report.timings` reads it (``<log>.usage.json``), for the run's timing table."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from oracle.report.timings import read_rss_records, usage_record_path

JOB = textwrap.dedent("""
    import numpy as np
    block = np.ones(200 * 2**20 // 8)  # 200 MiB touched by the job itself
    print(float(block.sum()))
""")

CLIENT = textwrap.dedent("""
    import sys
    from oracle.workflow.jobs.server import delegate
    delegate([sys.argv[2]], usage_path=sys.argv[3], rule="big_job", preload=("numpy",), directory=sys.argv[1])
    sys.exit(3)  # reached only if the job ran inline
""")


def test_server_records_child_peak_memory(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "client.py").write_text(CLIENT)
    logs = tmp_path / "logs"
    logs.mkdir()
    run_dir = Path("/tmp") / f"oracle-rss-test-{os.getpid()}"  # short: AF_UNIX paths are limited to 108 bytes
    run_dir.mkdir(mode=0o700)
    env = dict(os.environ, ORACLE_JOB_SERVER="on", ORACLE_JOB_SERVER_IDLE="5")
    env.pop("ORACLE_JOB_SERVER_CHILD", None)
    try:
        proc = subprocess.run([sys.executable, str(tmp_path / "client.py"), str(run_dir), str(tmp_path / "job.py"),
                               str(usage_record_path(logs / "big.log"))], capture_output=True, text=True,
                              timeout=120, env=env)
    finally:
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    assert proc.returncode == 0, proc.stderr
    mb = read_rss_records(logs)["big_job"]
    assert mb > 200.0  # the child's own block counts; the client's memory (no numpy block) would not
