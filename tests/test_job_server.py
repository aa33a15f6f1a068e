"""The local job server runs a script as an inline run would: same outputs, streams, working
directory, environment and exit status; a killed client takes its job with it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from oracle.workflow import job_server as js

PRELOAD = ("numpy",)  # the protocol does not depend on what is preloaded; numpy keeps it quick

SCRIPT = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import numpy as np
    from oracle.workflow import job_server

    out = Path(sys.argv[1])
    rng = np.random.default_rng(int(sys.argv[2]))
    out.write_text(repr(rng.standard_normal(5).tolist()) + os.environ.get("MARK", "") + os.getcwd())
    print("to stdout", os.environ.get(job_server._CHILD_ENV, "inline"))
    print("to stderr", file=sys.stderr)
    if sys.argv[3] == "raise":
        raise RuntimeError("boom")
    if sys.argv[3] == "sleep":
        Path(sys.argv[1] + ".pid").write_text(str(os.getpid()))
        import time
        time.sleep(60)
    sys.exit(int(sys.argv[3]))
""")

CLIENT = textwrap.dedent("""
    import sys
    from oracle.workflow.job_server import run_in_server
    sys.exit(run_in_server(sys.argv[2:], preload=("numpy",), idle_s=20.0, directory=sys.argv[1]) & 0xFF)
""")


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "job.py").write_text(SCRIPT)
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "work").mkdir()
    return tmp_path


def _run(scripts: Path, mode: str, out: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(scripts / "job.py"), out, *args] if mode == "inline" else \
        [sys.executable, str(scripts / "client.py"), str(scripts), str(scripts / "job.py"), out, *args]
    return subprocess.run(cmd, cwd=scripts / "work", capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MARK": "|m|"})


@pytest.mark.parametrize("status", ["0", "3", "raise"])
def test_server_run_equals_inline_run(scripts: Path, status: str) -> None:
    inline = _run(scripts, "inline", "a.txt", "7", status)
    served = _run(scripts, "server", "b.txt", "7", status)
    assert served.returncode == inline.returncode == {"0": 0, "3": 3, "raise": 1}[status]
    work = scripts / "work"
    assert (work / "a.txt").read_text() == (work / "b.txt").read_text()
    assert "|m|" in (work / "b.txt").read_text() and str(work) in (work / "b.txt").read_text()
    assert inline.stdout == "to stdout inline\n" and served.stdout == "to stdout 1\n"
    assert served.stderr.startswith("to stderr\n") and inline.stderr.startswith("to stderr\n")
    if status == "raise":
        assert "RuntimeError: boom" in served.stderr and "Traceback" in served.stderr


def test_killed_client_kills_its_job(scripts: Path) -> None:
    work = scripts / "work"
    proc = subprocess.Popen([sys.executable, str(scripts / "client.py"), str(scripts), str(scripts / "job.py"),
                             "c.txt", "1", "sleep"], cwd=work)
    pid_file = work / "c.txt.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    child = int(pid_file.read_text())
    assert child != proc.pid  # the job runs in the server's child, not in the client
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()


def test_server_wanted() -> None:
    assert js.server_wanted({"job_server": {"enabled": "auto"}}, {})
    assert not js.server_wanted({"job_server": {"enabled": "auto"}}, {"SLURM_JOB_ID": "12"})
    assert not js.server_wanted({"job_server": {"enabled": True}}, {js._CHILD_ENV: "1"})
    assert not js.server_wanted({"job_server": {"enabled": False}}, {})
    assert not js.server_wanted({}, {})
    assert js.socket_path(PRELOAD) != js.socket_path(("numpy", "torch"))


#: Rule scripts that run inline on purpose: the flow trains for minutes with its own thread
#: count (and relaunches itself under torchrun), and `data` is the run's first job, which would
#: wait for the server's imports on the path to the flow.
INLINE_SCRIPTS = {"oracle_train.py", "data.py"}


def test_every_rule_script_hands_itself_to_the_server_first():
    """A rule script that forgets `delegate` silently pays its imports on every local job; one
    that calls it after other imports pays them too."""
    root = Path(__file__).resolve().parents[1]
    rule_files = [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]
    scripts = {name for f in rule_files for name in re.findall(r'"(?:\.\./)?scripts/(\w+\.py)"', f.read_text())}
    assert len(scripts) > 20 and INLINE_SCRIPTS <= scripts
    for name in sorted(scripts - INLINE_SCRIPTS):
        statements = [ln for ln in (root / "scripts" / name).read_text().splitlines()
                      if ln.startswith(("import ", "from ", "delegate("))]
        assert statements[0] == "from oracle.workflow.job_server import delegate", name
        assert statements[1].startswith("delegate(snakemake)"), name


def test_server_outlives_idle_time_while_its_run_lives(scripts: Path) -> None:
    """A job marked with a run's process id keeps the server up past `idle` seconds (the flow
    trains inline for minutes); once that process has ended, the server exits after `idle`."""
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    client = textwrap.dedent("""
        import sys
        from oracle.workflow.job_server import run_in_server
        sys.exit(run_in_server(sys.argv[2:], preload=("numpy",), idle_s=1.0, directory=sys.argv[1]) & 0xFF)
    """)
    (scripts / "short_idle.py").write_text(client)
    try:
        done = subprocess.run([sys.executable, str(scripts / "short_idle.py"), str(scripts), str(scripts / "job.py"),
                               "d.txt", "1", "0"], cwd=scripts / "work", capture_output=True, text=True, timeout=120,
                              env={**os.environ, js._RUN_ENV: str(run.pid)})
        assert done.returncode == 0, done.stderr
        sock = js.socket_path(PRELOAD, scripts)
        time.sleep(4.0)  # well past idle_s = 1
        assert sock.exists(), "the server quit while its run was alive"
    finally:
        run.kill()
        run.wait()
    deadline = time.monotonic() + 30
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sock.exists(), "the server outlived its run by more than idle_s"


def test_mark_run_names_this_process() -> None:
    env: dict = {}
    js.mark_run(env)
    assert env == {js._RUN_ENV: str(os.getpid())}
