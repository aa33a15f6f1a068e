"""A local fork server for workflow scripts: heavy imports once per run, not once per job.

Every Snakemake job of a local run is a fresh Python process, and most of a small job is
imports: torch, timm, pandas, matplotlib and scipy take 5-10 s per process on a 2-core machine,
against 1-10 s of work for an N = 50 classifier or a table. With the server on, a rule's
script (run by Snakemake as usual, with its log, benchmark and provenance) hands itself to a
long-lived server process that has those modules imported; the server forks, and the child runs
the very same script file with the client's argv, working directory, environment, sys.path and
standard streams (passed as file descriptors), so its outputs, logs and exit status are the
ones an inline run gives. Modules of the ``oracle`` package are not kept in the server: every
child imports them fresh from the client's sys.path, so a code change is seen by the next job.

What stays per job: one process per job for Snakemake (the client waits for its child and
exits with its status; killing the client kills the child's process group), one artifact and
one provenance record per output. What differs: Snakemake's ``benchmark:`` files measure the
client, so their CPU time and memory columns do not cover the child (wall time does).

The server is single-threaded (``selectors`` over the listening socket, client sockets and the
children's pidfds), so forking never copies a lock held by another thread, and it never runs a
torch operation itself, so each child initialises its own OpenMP pool. It exits `idle` seconds
after its last job, but not while a Snakemake run that sent it a job is still alive (the
Snakefile marks its jobs with `mark_run`): the flow trains inline for minutes with no job in
the server, and a server that quit then would put its imports on the run's critical path
again. Under SLURM (``SLURM_JOB_ID`` set) scripts run inline: a cluster job
is a process of its own anyway.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_PRELOAD", "delegate", "mark_run", "run_in_server", "server_configured", "server_wanted",
           "socket_path"]

#: Imported once by the server; each is optional (a module that fails to import is skipped).
DEFAULT_PRELOAD = ("numpy", "torch", "torchvision", "timm", "h5py", "scipy.stats", "scipy.optimize",
                   "pandas", "matplotlib.pyplot", "sklearn.linear_model", "snakemake.script")
_CHILD_ENV = "ORACLE_JOB_SERVER_CHILD"
_RUN_ENV = "ORACLE_RUN_PID"
_PROTOCOL = 1
_START_TIMEOUT_S = 300.0


def server_wanted(config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a script should hand itself to the local job server: `server_configured`, and
    not already running inside a server child."""
    return not environ.get(_CHILD_ENV) and server_configured(config, environ)


def server_configured(config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's jobs run in the job server: config ``job_server.enabled`` (true,
    false, or "auto" = on unless inside a SLURM job)."""
    enabled = (config.get("job_server") or {}).get("enabled", False)
    if enabled == "auto":
        return not environ.get("SLURM_JOB_ID")
    return bool(enabled)


def mark_run(environ: os._Environ | dict = os.environ) -> None:
    """Call in the Snakemake main process: its jobs inherit this process's id, and a server
    that ran one of them stays up until this process has ended (then `idle` seconds more)."""
    environ[_RUN_ENV] = str(os.getpid())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has ended; its parent just has not collected it yet
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


def socket_path(preload: Sequence[str], directory: str | os.PathLike | None = None) -> Path:
    """The server's Unix socket: one per (user, Python executable, preload list, protocol)."""
    key = json.dumps([_PROTOCOL, sys.executable, list(preload), os.getuid()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    base = Path(directory) if directory is not None else Path(os.environ.get("TMPDIR", "/tmp"))
    return base / f"oracle-jobs-{os.getuid()}-{digest}.sock"


def delegate(job: Any) -> None:
    """Call first thing in a rule's script with its ``snakemake`` object: when the config
    wants the server (`server_wanted`), run this script there and exit with its status;
    otherwise return and let the script run inline. A server that cannot be reached or
    started falls back to inline with one line on stderr."""
    cfg = job.config.get("job_server") or {}
    if not server_wanted(job.config):
        return
    preload = tuple(cfg.get("preload") or DEFAULT_PRELOAD)
    rss = None  # where the server writes the child's peak memory (oracle.report.timings)
    if len(getattr(job, "log", ()) or ()):
        from oracle.report.timings import rss_record_path

        rss = {"path": os.path.abspath(rss_record_path(job.log[0])), "rule": job.rule}
    try:
        status = run_in_server(sys.argv, preload=preload, idle_s=float(cfg.get("idle_seconds", 120)), rss=rss)
    except OSError as exc:
        print(f"job server unavailable ({exc}); running inline", file=sys.stderr)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if status >= 0 else 1)


def run_in_server(argv: Sequence[str], preload: Sequence[str] = DEFAULT_PRELOAD, idle_s: float = 120.0,
                  directory: str | os.PathLike | None = None, rss: Mapping[str, str] | None = None) -> int:
    """Run the Python script ``argv[0]`` (with ``sys.argv = argv``) in the server, starting it
    if needed; returns the script's exit status (negative: killed by that signal). `rss`
    (``{"path", "rule"}``): the server records the child's peak memory there when it ends."""
    path = socket_path(preload, directory)
    conn = _connect_or_start(path, preload, idle_s)
    with conn:
        request = {"protocol": _PROTOCOL, "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                   "sys_path": list(sys.path), "rss": dict(rss) if rss else None}
        blob = json.dumps(request).encode()
        socket.send_fds(conn, [len(blob).to_bytes(8, "little")], [0, 1, 2])
        conn.sendall(blob)
        reply = b""
        while len(reply) < 8:
            chunk = conn.recv(8 - len(reply))
            if not chunk:
                raise OSError(f"job server at {path} closed the connection before the job ended")
            reply += chunk
    return int.from_bytes(reply, "little", signed=True)


def _connect_or_start(path: Path, preload: Sequence[str], idle_s: float) -> socket.socket:
    conn = _try_connect(path)
    if conn is not None:
        return conn
    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one client starts the server; the others wait here
        conn = _try_connect(path)
        if conn is not None:
            return conn
        path.unlink(missing_ok=True)  # a socket left by a server that died
        log = open(f"{path}.log", "ab")  # noqa: SIM115 - handed to the server process
        subprocess.Popen([sys.executable, "-m", "oracle.workflow.job_server", str(path), str(idle_s), *preload],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                         cwd="/", env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        log.close()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            conn = _try_connect(path)
            if conn is not None:
                return conn
            time.sleep(0.1)
    raise OSError(f"job server did not start within {_START_TIMEOUT_S:.0f} s (log: {path}.log)")


def _try_connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, 8, 3)
    size = int.from_bytes(head, "little")
    blob = b""
    while len(blob) < size:
        chunk = conn.recv(size - len(blob))
        if not chunk:
            raise OSError("client went away mid-request")
        blob += chunk
    return json.loads(blob), list(fds)


def _run_child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the client's process and run its script; never returns."""
    status = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[_CHILD_ENV] = "1"
        sys.path[:] = request["sys_path"]
        for name in [m for m in sys.modules if m == "oracle" or m.startswith("oracle.")]:
            del sys.modules[name]  # imported fresh: the client's code, not the server's
        sys.argv = list(request["argv"])
        sys.stdin, sys.stdout, sys.stderr = (open(i, mode, buffering=1, closefd=False) for i, mode in
                                             ((0, "r"), (1, "w"), (2, "w")))
        import runpy

        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            status = 0
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            status = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - nothing left to report to
                pass
        os._exit(status & 0xFF)


def _record_rss(where: dict | None, rusage: Any) -> None:
    """The child's peak memory to ``where["path"]`` (oracle.report.timings.record_child_rss);
    a failure costs the number, never the job."""
    if not where:
        return
    try:
        from oracle.report.timings import record_child_rss

        record_child_rss(where["path"], rusage, where["rule"])
    except Exception as exc:  # noqa: BLE001 - a measurement, not the job's result
        print(f"peak memory of {where.get('rule')}: {type(exc).__name__}: {exc}", flush=True)


def serve(path: Path, idle_s: float, preload: Sequence[str]) -> None:
    """The server loop (module docstring). Returns after `idle_s` seconds without a job."""
    import importlib

    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - an optional speed-up, never a failure
            print(f"preload {name}: {type(exc).__name__}: {exc}", flush=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    jobs: dict[int, tuple[socket.socket, int]] = {}  # pid -> (client, pidfd)
    rss_to: dict[int, dict] = {}  # pid -> where its peak memory goes (request "rss")
    runs: set[int] = set()  # Snakemake runs that sent a job (mark_run)
    last = time.monotonic()
    print(f"serving {path} (pid {os.getpid()})", flush=True)
    try:
        while jobs or runs or time.monotonic() - last < idle_s:
            for run in [r for r in runs if not _alive(r)]:
                runs.discard(run)
                last = time.monotonic()
            for key, _ in sel.select(timeout=1.0):
                what, pid = key.data
                if what == "accept":
                    conn, _ = listener.accept()
                    try:
                        request, fds = _recv_request(conn)
                    except (OSError, ValueError) as exc:
                        print(f"bad request: {exc}", flush=True)
                        conn.close()
                        continue
                    with contextlib.suppress(KeyError, TypeError, ValueError):
                        runs.add(int(request["env"][_RUN_ENV]))
                    child = os.fork()
                    if child == 0:
                        listener.close()
                        _run_child(request, fds)
                    for fd in fds:
                        os.close(fd)
                    if isinstance(request.get("rss"), dict):
                        rss_to[child] = request["rss"]
                    pidfd = os.pidfd_open(child)
                    jobs[child] = (conn, pidfd)
                    sel.register(pidfd, selectors.EVENT_READ, ("exit", child))
                    sel.register(conn, selectors.EVENT_READ, ("client", child))
                elif pid in jobs:  # a child ended, or its client went away
                    conn, pidfd = jobs[pid]
                    if what == "client":  # the client went away (killed): so does its job
                        with contextlib.suppress(OSError):
                            os.killpg(pid, signal.SIGKILL)
                    _, wstatus, rusage = os.wait4(pid, 0)
                    _record_rss(rss_to.pop(pid, None), rusage)
                    code = os.waitstatus_to_exitcode(wstatus)
                    with contextlib.suppress(OSError):
                        conn.sendall(int(code).to_bytes(8, "little", signed=True))
                    sel.unregister(pidfd)
                    sel.unregister(conn)
                    os.close(pidfd)
                    conn.close()
                    del jobs[pid]
                    last = time.monotonic()
    finally:
        listener.close()
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
