"""Interrupting a real run (issue 49), on a copy of the session's smoke run with its classifiers
forced to retrain: Ctrl-C (SIGINT to the run's process group) prints no traceback, and after
kill -9 of snakemake alone its jobs (clients and the server's children) end within seconds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _job_pids(work: Path, snakemake: int) -> list[int]:
    """Live processes working in `work` other than Snakemake itself: its jobs' clients and the
    job server's children (forked from the server, they keep its command line, but each changes
    into the job's working directory)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == snakemake:
            continue
        try:
            cwd = os.readlink(proc / "cwd")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and cwd == str(work):
            out.append(int(proc.name))
    return out


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def _start(work: Path, configfile: Path, log: Path) -> subprocess.Popen:
    with log.open("w") as handle:
        return subprocess.Popen([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"),
                                 "-d", str(work), "--cores", "2", "--configfile", str(configfile),
                                 "--forcerun", "train_classifier"], cwd=work, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow
def test_ctrl_c_prints_no_traceback_and_kill_9_of_snakemake_ends_its_jobs(smoke_run, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(smoke_run.workdir, work, symlinks=True)
    configfile = work / "config.yaml"

    log = tmp_path / "ctrl-c.log"
    run = _start(work, configfile, log)
    assert _wait(lambda: _job_pids(work, run.pid), 300), log.read_text()[-3000:]
    time.sleep(2)
    os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    run.wait(timeout=300)
    text = log.read_text()
    assert "rule train_classifier" in text
    assert run.returncode != 0, text[-3000:]
    # no traceback through the project's code; a Ctrl-C that lands while Snakemake's generated
    # script preamble is still importing (before any line of ours runs) is Python's default, and
    # a job starting at that instant is a matter of timing
    ours = [block for block in text.split("Traceback (most recent call last):")[1:]
            if str(REPO / "oracle") in block.split("KeyboardInterrupt")[0] or "run_job(" in block]
    assert not ours, text[-3000:]
    assert _wait(lambda: not _job_pids(work, run.pid), 30)

    subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d", str(work),
                    "--unlock", "--configfile", str(configfile)], cwd=work, capture_output=True, timeout=300)
    run = _start(work, configfile, tmp_path / "kill.log")
    try:
        assert _wait(lambda: _job_pids(work, run.pid), 300)
        time.sleep(2)
        os.kill(run.pid, signal.SIGKILL)  # snakemake alone: its job clients live on
        run.wait()
        killed = time.monotonic()
        assert _wait(lambda: not _job_pids(work, run.pid), 15), _job_pids(work, run.pid)
        print(f"jobs ended {time.monotonic() - killed:.1f} s after kill -9 of snakemake")
    finally:
        for pid in _job_pids(work, run.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
