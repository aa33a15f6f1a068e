"""A locked working directory: Snakemake's LockException suggested --unlock without saying whether
the run holding the lock still lives (issue 49). The message names the holder's pid and whether it
runs, before suggesting --unlock (oracle.workflow.engine.lock_holder_text)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from oracle.workflow import engine

REPO = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_holder_is_named_alive_or_gone(tmp_path):
    holder = tmp_path / "locks" / "oracle-holder.json"
    assert "did not leave its process id" in engine.lock_holder_text(holder)
    engine.note_lock_holder(holder)  # this process: alive
    recorded = json.loads(holder.read_text())
    assert recorded["pid"] == os.getpid() and recorded["host"] == socket.gethostname()
    text = engine.lock_holder_text(holder)
    assert f"process {os.getpid()}, which is still running" in text and "do not --unlock" in text
    dead = _dead_pid()
    holder.write_text(json.dumps({**recorded, "pid": dead}))
    text = engine.lock_holder_text(holder)
    assert f"process {dead}, which is no longer running" in text and "snakemake --unlock" in text
    # the same pid reused by another process (another start time) is not the holder
    holder.write_text(json.dumps({**recorded, "start": recorded["start"] - 1}))
    assert "no longer running" in engine.lock_holder_text(holder)
    holder.write_text(json.dumps({**recorded, "host": recorded["host"] + "-elsewhere"}))
    assert "cannot be told from here" in engine.lock_holder_text(holder)


def test_a_run_in_a_locked_folder_says_who_holds_it_in_one_line(tmp_path):
    """A stale lock of a killed run (its holder file beside Snakemake's lock file): the run stops
    with one line naming the dead pid, no traceback, nothing written."""
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("results/smoke/data/train.h5\n")
    dead = _dead_pid()
    (locks / engine.LOCK_HOLDER.name).write_text(json.dumps({"pid": dead, "start": 1, "host": socket.gethostname()}))
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                           str(tmp_path), "--cores", "1", "--configfile", str(REPO / "tests" / "smoke" / "config.yaml")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if "LockException" in ln or "cannot be locked" in ln]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-2000:]
    assert f"process {dead}, which is no longer running" in lines[0] and "--unlock" in lines[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "results").exists()
