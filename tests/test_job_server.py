"""The local job server runs a script as an inline run would: same outputs, streams, working
directory, environment and exit status; a killed client takes its job with it. Only its own
user can reach it (issue 19: one test per attack)."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from oracle.errors import ConfigError
from oracle.workflow.jobs import server as js

PRELOAD = ("numpy",)  # the protocol does not depend on what is preloaded; numpy keeps it quick
SYSTEM_PYTHON = "/usr/bin/python3"  # another user's interpreter: stdlib only, readable by all

SCRIPT = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import numpy as np
    from oracle.workflow.jobs import server as job_server

    out = Path(sys.argv[1])
    with open(sys.argv[1] + ".runs", "a") as runs:
        runs.write(f"{os.getpid()}\\n")
    rng = np.random.default_rng(int(sys.argv[2]))
    out.write_text(repr(rng.standard_normal(5).tolist()) + os.environ.get("MARK", "") + os.getcwd())
    print("to stdout", os.environ.get(job_server.CHILD_ENV, "inline"))
    print("to stderr", file=sys.stderr)
    if sys.argv[3] == "raise":
        raise RuntimeError("boom")
    if sys.argv[3] in ("sleep", "setsid"):
        if sys.argv[3] == "setsid":  # a grandchild in a session of its own: PR_SET_PDEATHSIG misses it
            import subprocess
            grandchild = subprocess.Popen(["sleep", "300"], start_new_session=True)
            Path(sys.argv[1] + ".grandchild").write_text(str(grandchild.pid))
        server = os.environ.get("ORACLE_JOB_SERVER_PID", str(os.getppid()))
        Path(sys.argv[1] + ".pid").write_text(f"{os.getpid()} {server}")
        import time
        time.sleep(60)
    if sys.argv[3] == "alloc":
        block = np.ones(64 << 17)  # 64 MiB touched
    sys.exit(int(sys.argv[3]) if sys.argv[3].isdigit() else 0)
""")

# the test client: run_in_server itself (idle seconds from $IDLE)
CLIENT = textwrap.dedent("""
    import os, sys
    from oracle.workflow.jobs.server import run_in_server
    sys.exit(run_in_server(sys.argv[2:], preload=("numpy",), idle_s=float(os.environ.get("IDLE", "20")),
                           directory=sys.argv[1]) & 0xFF)
""")

# a rule script's hand-off: delegate, then the inline run when it returns
DELEGATE = textwrap.dedent("""
    import runpy, sys
    from oracle.workflow.jobs import server as js
    js.delegate(sys.argv[2:], usage_path=sys.argv[3] + ".usage.json", preload=("numpy",), directory=sys.argv[1])
    print("running inline", file=sys.stderr)
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
""")


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "job.py").write_text(SCRIPT)
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "delegate.py").write_text(DELEGATE)
    (tmp_path / "work").mkdir()
    return tmp_path


def _run(scripts: Path, mode: str, out: str, *args: str, timeout: float = 120, directory: Path | None = None,
         **env: str) -> subprocess.CompletedProcess:
    directory = directory or scripts
    cmd = {"inline": [sys.executable, str(scripts / "job.py"), out, *args],
           "server": [sys.executable, str(scripts / "client.py"), str(directory), str(scripts / "job.py"), out, *args],
           "delegate": [sys.executable, str(scripts / "delegate.py"), str(directory), str(scripts / "job.py"), out,
                        *args]}[mode]
    return subprocess.run(cmd, cwd=scripts / "work", capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "MARK": "|m|", js.SWITCH_ENV: "on", **env})


def _wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _gone(pid: int) -> bool:
    try:
        return "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


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


def test_delegate_records_the_childs_usage(scripts: Path) -> None:
    done = _run(scripts, "delegate", "u.txt", "1", "alloc")
    assert done.returncode == 0, done.stderr
    assert "running inline" not in done.stderr and done.stdout == "to stdout 1\n"
    usage = json.loads((scripts / "work" / "u.txt.usage.json").read_text())
    assert usage["max_rss_mib"] >= 64 and usage["user_s"] + usage["system_s"] > 0 and usage["wall_s"] > 0


def test_killed_client_kills_its_job(scripts: Path) -> None:
    work = scripts / "work"
    proc = subprocess.Popen([sys.executable, str(scripts / "client.py"), str(scripts), str(scripts / "job.py"),
                             "c.txt", "1", "sleep"], cwd=work)
    pid_file = work / "c.txt.pid"
    assert _wait(pid_file.exists, 60)
    child = int(pid_file.read_text().split()[0])
    assert child != proc.pid  # the job runs in the server's child, not in the client
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait(lambda: _gone(child), 10)


def test_server_switch_is_the_environment() -> None:
    assert js.server_wanted({})  # auto
    assert js.server_wanted({js.SWITCH_ENV: "auto"})
    assert not js.server_wanted({js.SWITCH_ENV: "auto", "SLURM_JOB_ID": "12"})
    assert js.server_wanted({js.SWITCH_ENV: "on", "SLURM_JOB_ID": "12"})
    assert not js.server_wanted({js.SWITCH_ENV: "on", js.CHILD_ENV: "1"})
    assert not js.server_wanted({js.SWITCH_ENV: "OFF"})
    with pytest.raises(ConfigError, match="ORACLE_JOB_SERVER='yes please'"):
        js.server_wanted({js.SWITCH_ENV: "yes please"})
    assert js.idle_seconds({}) == 120 and js.idle_seconds({js.IDLE_ENV: "2.5"}) == 2.5
    with pytest.raises(ConfigError, match="ORACLE_JOB_SERVER_IDLE='-1'"):
        js.idle_seconds({js.IDLE_ENV: "-1"})
    assert js.socket_path(PRELOAD) != js.socket_path(("numpy", "torch"))


def test_the_socket_is_keyed_on_the_server_code(tmp_path, monkeypatch) -> None:
    """Issue 38 case 7: two checkouts sharing one venv shared one socket (the key was the Python
    executable and the preload list), so the jobs of both ran in whichever's server loop started
    first. An edited server loop gets a socket of its own."""
    copies = [tmp_path / f.name for f in js.SERVER_CODE]
    for src, dst in zip(js.SERVER_CODE, copies):
        dst.write_bytes(src.read_bytes())
    assert js.server_code_sha(copies) == js.server_code_sha()
    same = js.socket_path(PRELOAD, tmp_path)
    copies[1].write_text(copies[1].read_text() + "\n# another checkout's server loop\n")
    monkeypatch.setattr(js, "SERVER_CODE", tuple(copies))
    assert js.socket_path(PRELOAD, tmp_path) != same


def test_a_config_with_the_old_job_server_key_says_where_it_went() -> None:
    from oracle.workflow.plan.config import validate_config

    root = Path(__file__).resolve().parents[1]
    with pytest.raises(ConfigError, match="'job_server' is gone.*ORACLE_JOB_SERVER"):
        validate_config({"job_server": {"enabled": False}}, root / "config.schema.yaml")


#: Rule scripts that run inline on purpose (``server=False``): the flow trains for minutes with
#: its own thread count (and relaunches itself under torchrun), and `data` is the run's first
#: job, which would wait for the server's imports on the path to the flow.
INLINE_SCRIPTS = {"oracle_train.py", "data.py"}
#: Rule scripts that are one call of a named entry point of the library, which enters through
#: `run_job` itself (where a job decides more than its body: oracle_train's torchrun launch).
ENTRY_POINTS = {"oracle_train.py": "oracle.workflow.jobs.oracle_train.train_oracle"}


def _run_job_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "run_job"]


def _entry_point_call(root: Path, name: str, tree: ast.Module) -> ast.Call:
    """The script is ``from <module> import <entry>`` and ``<entry>(snakemake)``: the one
    run_job call of that library function."""
    module, _, entry = ENTRY_POINTS[name].rpartition(".")
    body = [ast.unparse(n) for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    assert body == [f"from {module} import {entry}", f"{entry}(snakemake)"], (name, body)
    source = ast.parse((root / (module.replace(".", "/") + ".py")).read_text())
    func = next(n for n in source.body if isinstance(n, ast.FunctionDef) and n.name == entry)
    calls = _run_job_calls(func)
    assert len(calls) == 1, ENTRY_POINTS[name]
    return calls[0]


def test_every_rule_script_is_one_run_job_call():
    """Every rule script enters through `run_job`, in the script or in the library entry point
    it calls; one that hands itself to the server has nothing else at module level (no import
    before the hand-off pays for torch & co. in the client), and only the scripts that run
    inline on purpose say server=False."""
    root = Path(__file__).resolve().parents[1]
    rule_files = [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]
    scripts = {name for f in rule_files for name in re.findall(r'"(?:\.\./)?scripts/(\w+\.py)"', f.read_text())}
    assert len(scripts) > 20 and INLINE_SCRIPTS <= scripts and set(ENTRY_POINTS) <= scripts
    for name in sorted(scripts):
        tree = ast.parse((root / "scripts" / name).read_text())
        if name in ENTRY_POINTS:
            calls = [_entry_point_call(root, name, tree)]
        else:
            calls = _run_job_calls(tree)
        assert len(calls) == 1, name
        inline = {k.arg: k.value for k in calls[0].keywords}.get("server")
        if name in INLINE_SCRIPTS:
            assert isinstance(inline, ast.Constant) and inline.value is False, name
            continue
        assert inline is None, name
        body = [ast.unparse(n) for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        assert len(body) == 3 and body[0] == "from oracle.workflow.jobs import run_job", (name, body[:1])
        assert body[1].startswith("def main(sm):") and body[2] == "run_job(snakemake, main)", name


def test_server_outlives_idle_time_while_its_run_lives(scripts: Path) -> None:
    """A job marked with a run's process id keeps the server up past `idle` seconds (the flow
    trains inline for minutes); once that process has ended, the server exits after `idle`."""
    run_py = scripts / "run.py"  # the Snakemake run: the job's client is its child
    run_py.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        os.environ[{js.RUN_ENV!r}] = str(os.getpid())
        done = subprocess.run(sys.argv[1:], cwd={str(scripts / "work")!r})
        print("status", done.returncode, flush=True)
        time.sleep(120)
    """))
    run = subprocess.Popen([sys.executable, str(run_py), sys.executable, str(scripts / "client.py"), str(scripts),
                            str(scripts / "job.py"), "d.txt", "1", "0"], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "IDLE": "1"})
    sock = js.socket_path(PRELOAD, scripts)
    try:
        lines = iter(run.stdout.readline, "")
        assert next(ln for ln in lines if ln.startswith("status")).split() == ["status", "0"]
        time.sleep(4.0)  # well past idle_s = 1
        assert sock.exists(), "the server quit while its run was alive"
    finally:
        run.kill()
        run.wait()
    assert _wait(lambda: not sock.exists(), 30), "the server outlived its run by more than idle_s"


def test_mark_run_names_this_process() -> None:
    env: dict = {}
    js.mark_run(env)
    assert env == {js.RUN_ENV: str(os.getpid())}


# ------------------------------------------------------------------------ issue 19: the attacks

def test_runtime_dir_is_private_and_checked(tmp_path: Path) -> None:
    mine = js.runtime_dir(tmp_path)
    assert mine.parent == tmp_path and (mine.stat().st_mode & 0o777) == 0o700 and mine.stat().st_uid == os.getuid()
    mine.chmod(0o755)
    with pytest.raises(OSError, match="mode 755"):
        js.runtime_dir(tmp_path)
    mine.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    mine.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="not a directory"):
        js.runtime_dir(tmp_path)
    if os.geteuid() == 0:
        mine.unlink()
        mine.mkdir(mode=0o700)
        os.chown(mine, 54321, 54321)
        with pytest.raises(OSError, match="owner uid 54321"):
            js.runtime_dir(tmp_path)


@pytest.fixture
def other_user():
    """A second local user for the attacks (created and removed here; root only)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None or not Path(SYSTEM_PYTHON).exists():
        pytest.skip("needs root, useradd and /usr/bin/python3 to create a second user")
    name = f"oratk{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def shared_base():
    """A world-writable sticky directory like /tmp, where every user can reach a socket."""
    base = Path(tempfile.mkdtemp(prefix="oracle-shared-", dir="/tmp"))
    base.chmod(0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _as_user(user: tuple[int, int], code: str, *args: str) -> subprocess.Popen:
    uid, gid = user
    return subprocess.Popen([SYSTEM_PYTHON, "-c", textwrap.dedent(code), *args], user=uid, group=gid,
                            extra_groups=[], cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


PAYLOAD_REQUEST = """
    import json, socket, sys
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sys.argv[1])
    except OSError as exc:
        print(f"connect refused: {exc}"); sys.exit(0)
    blob = json.dumps({"protocol": int(sys.argv[3]), "argv": [sys.argv[2]], "cwd": "/", "env": {},
                       "sys_path": sys.path}).encode()
    try:
        socket.send_fds(conn, [len(blob).to_bytes(8, "little")], [0, 1, 2])
        conn.sendall(blob)
        conn.settimeout(30)
        print("reply", conn.recv(64))
    except OSError as exc:
        print(f"dropped: {exc}")
"""


def test_another_user_cannot_run_a_payload_even_under_umask_000(scripts: Path, other_user, shared_base) -> None:
    """Attack 1: a server started under umask 000 must not run another user's request."""
    first = subprocess.run([sys.executable, str(scripts / "client.py"), str(shared_base), str(scripts / "job.py"),
                            "e.txt", "1", "0"], cwd=scripts / "work", preexec_fn=lambda: os.umask(0),
                           capture_output=True, text=True, timeout=120, env={**os.environ, "IDLE": "30"})
    assert first.returncode == 0, first.stderr
    sock = js.socket_path(PRELOAD, shared_base)
    marker = shared_base / "pwned"
    payload = shared_base / "payload.py"
    payload.write_text(f"open({str(marker)!r}, 'w').write('ran as uid %d' % __import__('os').getuid())\n")
    payload.chmod(0o644)
    attacker = _as_user(other_user, PAYLOAD_REQUEST, str(sock), str(payload), str(js._PROTOCOL))
    out, err = attacker.communicate(timeout=60)
    time.sleep(1.0)
    assert not marker.exists(), f"another user's payload ran: {marker.read_text()} ({out} {err})"


def test_a_peer_of_another_uid_is_refused(scripts: Path) -> None:
    """Attack 1, with a mocked SO_PEERCRED: the server hangs up on a client of another uid."""
    sock = js.socket_path(PRELOAD, scripts)
    wrapper = scripts / "mocked_server.py"
    wrapper.write_text(textwrap.dedent("""
        import sys
        from pathlib import Path
        from oracle.workflow.jobs import fork_server
        from oracle.workflow.jobs import server as js
        real = js._peer
        js._peer = lambda conn: (lambda p: (p[0], p[1] + 1, p[2]))(real(conn))  # every client: another uid
        fork_server.serve(Path(sys.argv[1]), 20.0, ["numpy"])
    """))
    server = subprocess.Popen([sys.executable, str(wrapper), str(sock)], stdout=subprocess.PIPE, text=True)
    try:
        assert _wait(sock.exists, 60), "the mocked server did not start"
        done = _run(scripts, "server", "f.txt", "1", "0", timeout=60)
        assert done.returncode != 0 and not (scripts / "work" / "f.txt").exists()
        # hung up on before (broken pipe, reset) or after the whole request was sent (JobLost)
        assert re.search(r"JobLost|BrokenPipeError|ConnectionResetError", done.stderr), done.stderr
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert f"refused a client of uid {os.getuid() + 1}" in out


def test_the_client_refuses_a_server_of_another_uid(scripts: Path, monkeypatch) -> None:
    """Attack 2, with a mocked SO_PEERCRED: a socket served by another uid gets nothing."""
    sock = js.socket_path(PRELOAD, scripts)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with js._short(sock) as name:
        listener.bind(name)
    listener.listen(1)
    real = js._peer
    monkeypatch.setattr(js, "_peer", lambda conn: (lambda p: (p[0], p[1] + 1, p[2]))(real(conn)))
    try:
        with pytest.raises(OSError, match=f"served by uid {os.getuid() + 1}"):
            js.run_in_server([str(scripts / "job.py"), "g.txt", "1", "0"], preload=PRELOAD, directory=scripts)
        conn, _ = listener.accept()
        conn.settimeout(5)
        assert conn.recv(64) == b""  # nothing was sent: no environment, no descriptors
        conn.close()
    finally:
        listener.close()


def test_an_impostor_socket_of_another_user_gets_nothing(scripts: Path, other_user, shared_base, tmp_path) -> None:
    """Attack 2: another user bound the socket path before any server ran."""
    scratch = tmp_path / "scratch"  # where this user's socket would be, relative to its base
    scratch.mkdir()
    rel = js.socket_path(PRELOAD, scratch).relative_to(scratch)
    impostor = _as_user(other_user, """
        import os, signal, socket, sys
        from pathlib import Path
        path = Path(sys.argv[1])
        path.parent.mkdir(mode=0o777, parents=True, exist_ok=True)
        if path.parent.stat().st_uid == os.getuid():  # made here: open to all, like /tmp
            os.chmod(path.parent, 0o777)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        os.chmod(path, 0o777)
        s.listen(1)
        waiting = True
        def done(signum, frame):  # the test's job has finished: no client will come any more
            if waiting:
                print("no client"); sys.exit(0)
        signal.signal(signal.SIGUSR1, done)
        print("bound", flush=True)
        s.settimeout(60)
        try:
            conn, _ = s.accept()
        except OSError:
            print("no client"); sys.exit(0)
        waiting = False
        data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        for fd in fds[1:]:  # the client's stdout and stderr
            os.write(fd, b"pwned by the impostor\\n")
        print("got", len(data), "bytes and", len(fds), "descriptors")
    """, str(shared_base / rel))
    assert impostor.stdout.readline().strip() == "bound"
    done = _run(scripts, "delegate", "h.txt", "1", "0", directory=shared_base)
    impostor.send_signal(signal.SIGUSR1)  # instead of waiting out its accept timeout
    out, err = impostor.communicate(timeout=90)
    assert "pwned" not in done.stdout + done.stderr, out
    assert out.strip() == "no client", out + err
    assert done.returncode == 0 and "running inline" in done.stderr and "not a private directory" in done.stderr


def test_a_planted_symlink_is_never_followed(scripts: Path) -> None:
    """Attack 3: symbolic links at the lock and log paths must not truncate or append to
    their targets; the job then runs inline."""
    sock = js.socket_path(PRELOAD, scripts)
    victim = scripts / "victim"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    Path(f"{sock}.lock").symlink_to(victim)
    Path(f"{sock}.log").symlink_to(victim)
    done = _run(scripts, "delegate", "i.txt", "1", "0")
    assert victim.read_text() == "secret\n"
    assert done.returncode == 0 and "running inline" in done.stderr, done.stderr


def test_a_silent_client_does_not_block_the_others(scripts: Path) -> None:
    """Attack 4: a client that connects and sends nothing; later jobs run, and the silent one
    is dropped after the request timeout."""
    from oracle.workflow.jobs import fork_server

    assert _run(scripts, "server", "j.txt", "1", "0").returncode == 0  # the server is up
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with js._short(js.socket_path(PRELOAD, scripts)) as name:
        silent.connect(name)
    try:
        t0 = time.monotonic()
        done = _run(scripts, "server", "k.txt", "1", "0", timeout=30)
        assert done.returncode == 0 and time.monotonic() - t0 < fork_server.REQUEST_TIMEOUT_S
        silent.settimeout(fork_server.REQUEST_TIMEOUT_S + 5)
        assert silent.recv(8) == b""  # hung up on
    finally:
        silent.close()


@pytest.mark.parametrize("run_pid", ["1", "other"])
def test_a_forged_run_pid_does_not_keep_the_server_up(scripts: Path, run_pid: str) -> None:
    """Attack 5: ORACLE_RUN_PID of a process that is not the client's Snakemake run (init, a
    stranger) does not keep the server past its idle time."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = run_pid if run_pid == "1" else str(stranger.pid)
        done = _run(scripts, "server", "l.txt", "1", "0", IDLE="1", **{js.RUN_ENV: pid})
        assert done.returncode == 0, done.stderr
        sock = js.socket_path(PRELOAD, scripts)
        assert _wait(lambda: not sock.exists(), 15), "a forged run pid kept the server alive"
    finally:
        stranger.kill()
        stranger.wait()


def _start_delegated(scripts: Path, out: str, mode: str) -> tuple[subprocess.Popen, int, int]:
    """A rule script's hand-off running `mode` (sleep, setsid) in the server: (its client, the
    job's pid, the server's pid), once the job has started."""
    work = scripts / "work"
    proc = subprocess.Popen([sys.executable, str(scripts / "delegate.py"), str(scripts), str(scripts / "job.py"),
                             out, "1", mode], cwd=work, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, js.SWITCH_ENV: "on"})
    assert _wait((work / f"{out}.pid").exists, 60)
    child, server = map(int, (work / f"{out}.pid").read_text().split())
    return proc, child, server


def test_killing_the_server_kills_its_job_and_it_is_not_rerun(scripts: Path) -> None:
    """Attack 6: the server dies mid-job: its child dies with it, and the client fails the job
    rather than running it a second time inline."""
    work = scripts / "work"
    proc, child, server = _start_delegated(scripts, "m.txt", "sleep")
    assert server != proc.pid
    os.kill(server, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and "not rerun inline" in err, err
    assert _wait(lambda: _gone(child), 10), "the job outlived its server"
    assert len((work / "m.txt.runs").read_text().splitlines()) == 1, "the job ran twice"


def test_a_stopped_server_is_reported_by_the_waiting_client(scripts: Path) -> None:
    """Issue 38 case 7: a job server stopped with SIGSTOP hung the run with no message. The
    client waiting for its job says, in one line, that the server is stopped and what to do,
    and again when it runs; the job then ends as it would have."""
    import threading

    proc, child, server = _start_delegated(scripts, "s.txt", "sleep")
    assert js.process_state(server) in ("S", "R")
    os.kill(server, signal.SIGSTOP)
    watchdog = threading.Timer(30, proc.kill)  # a client that says nothing would block the reads below
    watchdog.start()
    try:
        assert _wait(lambda: js.process_state(server) == "T", 10)
        said = (ln for ln in iter(proc.stderr.readline, "") if ln.startswith("job server"))  # not the job's
        line = next(said)  # within STALL_CHECK_S
        assert line.startswith(f"job server: its process {server} is stopped (SIGSTOP) and makes no progress") \
            and f"kill -CONT {server}" in line, line
        os.kill(server, signal.SIGCONT)
        assert next(said) == f"job server: process {server} runs again\n"
    finally:
        watchdog.cancel()
        os.kill(server, signal.SIGCONT)
        proc.kill()
        proc.wait()
    assert _wait(lambda: _gone(child), 10)
    assert js.process_state(2 ** 22 + 7) is None  # no such process (above pid_max's default)


# ----------------------------------------------------------------------------- issue 31, case 7
@pytest.mark.parametrize("kill", ["server", "client"])
def test_every_descendant_of_a_job_dies_with_it(scripts: Path, kill: str) -> None:
    """A job's grandchild in a session of its own (setsid) dies when the server is killed with
    SIGKILL, or when the job's client goes away: the job's leader is a subreaper."""
    work = scripts / "work"
    proc, child, server = _start_delegated(scripts, "g.txt", "setsid")
    grandchild = int((work / "g.txt.grandchild").read_text())
    try:
        assert not _gone(grandchild)
        os.kill(server if kill == "server" else proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) != 0  # not communicate(): a surviving grandchild holds its stderr open
        assert _wait(lambda: _gone(child), 10), "the job outlived its server"
        assert _wait(lambda: _gone(grandchild), 10), "the job's setsid grandchild outlived it"
    finally:
        with contextlib.suppress(OSError):
            os.kill(grandchild, signal.SIGKILL)


@pytest.mark.parametrize("nofile", [64, 24])
def test_a_flood_of_connections_under_a_low_descriptor_limit_leaves_the_server_and_its_job_alive(
        scripts: Path, nofile: int) -> None:
    """1,020 connections of the same user under `ulimit -n 64` (pending requests bounded) or
    `ulimit -n 24` (accept runs out of descriptors): the server (which inherits the limit from
    the client that starts it) keeps running, its running job finishes, a later job runs, and
    its log stays short."""
    import resource

    work = scripts / "work"
    limit = f"import resource; resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile})); "
    runner = scripts / "limited.py"
    runner.write_text(limit + "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')\n")
    proc = subprocess.Popen([sys.executable, str(runner), str(scripts / "delegate.py"), str(scripts),
                             str(scripts / "job.py"), "f.txt", "1", "0"], cwd=work, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, js.SWITCH_ENV: "on"})
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    sock = js.socket_path(PRELOAD, scripts)
    long_job, job_pid, server = _start_delegated(scripts, "h.txt", "sleep")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    flood = []
    try:
        with js._short(sock) as name:
            for _ in range(1020):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.setblocking(False)
                with contextlib.suppress(BlockingIOError, ConnectionRefusedError, OSError):
                    c.connect(name)
                flood.append(c)
        time.sleep(2)
        assert not _gone(server) and not _gone(job_pid), "the flood ended the server or its job"
    finally:
        for c in flood:
            c.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    os.kill(job_pid, signal.SIGTERM)  # the long job ends; its client gets its status
    _, err = long_job.communicate(timeout=30)
    assert long_job.returncode != 0 and "not rerun inline" not in err, err
    later = _run(scripts, "delegate", "z.txt", "1", "0")
    assert later.returncode == 0 and "running inline" not in later.stderr, later.stderr
    log = Path(f"{sock}.log").read_text()
    assert len(log.splitlines()) < 60, log[-3000:]


def test_a_job_whose_snakemake_is_killed_is_ended_by_the_server(scripts: Path) -> None:
    """Issue 49: after kill -9 of snakemake alone its job clients lived on and their jobs wrote
    outputs and records that no run tracked, beside the next run's writers. The server ends a
    job whose run (`mark_run`: pid and start time) is gone within seconds."""
    work = scripts / "work"
    run_py = scripts / "run.py"  # the Snakemake run: the job's client is its child
    run_py.write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time
        os.environ[{js.RUN_ENV!r}] = str(os.getpid())
        client = subprocess.Popen(sys.argv[1:], cwd={str(work)!r})
        print(client.pid, flush=True)
        time.sleep(300)
    """))
    run = subprocess.Popen([sys.executable, str(run_py), sys.executable, str(scripts / "delegate.py"), str(scripts),
                            str(scripts / "job.py"), "k.txt", "1", "sleep"], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, js.SWITCH_ENV: "on"})
    client = int(run.stdout.readline())
    try:
        assert _wait((work / "k.txt.pid").exists, 60)
        child = int((work / "k.txt.pid").read_text().split()[0])
        assert not _gone(child) and not _gone(client)
        run.kill()  # kill -9 of snakemake alone: its client lives on
        run.wait()
        killed = time.monotonic()
        assert _wait(lambda: _gone(child), 10), "the job outlived its Snakemake run"
        assert time.monotonic() - killed < 10
        assert _wait(lambda: _gone(client), 10), "the client did not end with its job"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(client, signal.SIGKILL)
    assert len((work / "k.txt.runs").read_text().splitlines()) == 1


def test_ctrl_c_of_a_waiting_client_is_one_line_and_ends_its_job(scripts: Path) -> None:
    """Ctrl-C printed a KeyboardInterrupt traceback per waiting job client: now one line. (The
    client gets SIGINT's default action back: a test run in the background inherits it ignored.)"""
    work = scripts / "work"
    proc = subprocess.Popen([sys.executable, str(scripts / "delegate.py"), str(scripts), str(scripts / "job.py"),
                             "i.txt", "1", "sleep"], cwd=work, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, js.SWITCH_ENV: "on"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert _wait((work / "i.txt.pid").exists, 60)
    child = int((work / "i.txt.pid").read_text().split()[0])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.strip()][-1] == js.INTERRUPTED
    assert _wait(lambda: _gone(child), 10), "the job outlived its interrupted client"


def test_ctrl_c_of_a_job_run_inline_is_one_line(tmp_path: Path) -> None:
    """A job run inline (the flow's training, a job with the server off) interrupted by Ctrl-C:
    status 130 and one line, no traceback."""
    script = tmp_path / "inline.py"
    script.write_text(textwrap.dedent("""
        from oracle.workflow.jobs import script_job
        with script_job(None, log_path=None):
            raise KeyboardInterrupt
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130 and done.stderr.strip() == js.INTERRUPTED, done.stderr
