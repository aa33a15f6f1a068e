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

The switch is the environment, not the config: ``ORACLE_JOB_SERVER=auto|on|off`` (default
auto = on, except inside a SLURM job, whose jobs are processes of their own anyway);
``ORACLE_JOB_SERVER_IDLE`` (seconds, default 120) is how long the server waits for a job.

What stays per job: one process per job for Snakemake (the client waits for its child and
exits with its status; killing the client kills the child's process group), one artifact and
one provenance record per output. What differs: Snakemake's ``benchmark:`` files measure the
client, so their CPU time and memory columns do not cover the child (wall time does); the
server measures the child instead (``wait4``), and `delegate` writes that usage next to the
job's log (`usage_path`).

Who may use the server: only its own user. The socket lives in a private directory (`runtime_dir`:
0700, owned by the user, checked before every use), the server refuses a peer whose
``SO_PEERCRED`` uid is not its own, and the client refuses a server that is not its user's. The
lock and log files are opened with ``O_NOFOLLOW``. A request that does not arrive within
`_REQUEST_TIMEOUT_S` is dropped without holding up the others.

The server is single-threaded (``selectors`` over the listening socket, client sockets and the
children's pidfds), so forking never copies a lock held by another thread, and it never runs a
torch operation itself, so each child initialises its own OpenMP pool. Its children die with it
(``PR_SET_PDEATHSIG``), and a client whose server died mid-job fails the job instead of running
it again inline next to a child that might still be writing. It exits `idle` seconds after its
last job, but not while a Snakemake run that sent it a job is still alive (the Snakefile marks
its jobs with `mark_run`; the mark counts only when that process is an ancestor of the job's
client, owned by the same user, and for at most `_RUN_HOLD_S` after the run's last job): the
flow trains inline for minutes with no job in the server, and a server that quit then would
put its imports on the run's critical path again.
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
import stat
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["DEFAULT_PRELOAD", "JobLost", "delegate", "idle_seconds", "mark_run", "run_in_server", "runtime_dir",
           "server_configured", "server_wanted", "socket_path"]

#: Imported once by the server; each is optional (a module that fails to import is skipped).
DEFAULT_PRELOAD = ("numpy", "torch", "torchvision", "timm", "h5py", "scipy.stats", "scipy.optimize",
                   "pandas", "matplotlib.pyplot", "sklearn.linear_model", "snakemake.script")
SWITCH_ENV = "ORACLE_JOB_SERVER"
IDLE_ENV = "ORACLE_JOB_SERVER_IDLE"
_CHILD_ENV = "ORACLE_JOB_SERVER_CHILD"
_RUN_ENV = "ORACLE_RUN_PID"
_PROTOCOL = 2
_START_TIMEOUT_S = 300.0
_REQUEST_TIMEOUT_S = 10.0  # a client sends its request at once; one that does not is dropped
_MAX_REQUEST_BYTES = 64 << 20
_RUN_HOLD_S = 6 * 3600.0  # a live run keeps the server up at most this long after its last job
_PR_SET_PDEATHSIG = 1


class JobLost(RuntimeError):
    """The server took the job and went away before reporting its end: the job may have run in
    part, so it must not be run again inline."""


def server_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this process's jobs run in the job server: ``ORACLE_JOB_SERVER`` = auto (the
    default: on unless inside a SLURM job), on or off. ConfigError on any other value."""
    value = environ.get(SWITCH_ENV, "").strip().lower() or "auto"
    if value == "auto":
        return not environ.get("SLURM_JOB_ID")
    if value in ("on", "off"):
        return value == "on"
    from oracle.errors import ConfigError

    raise ConfigError(f"environment {SWITCH_ENV}={environ[SWITCH_ENV]!r}: expected auto, on or off")


def server_wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a script should hand itself to the local job server: `server_configured`, and
    not already running inside a server child."""
    return not environ.get(_CHILD_ENV) and server_configured(environ)


def idle_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``ORACLE_JOB_SERVER_IDLE`` (seconds > 0, default 120); ConfigError when not a number."""
    raw = environ.get(IDLE_ENV, "").strip() or "120"
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        from oracle.errors import ConfigError

        raise ConfigError(f"environment {IDLE_ENV}={raw!r}: expected a number of seconds > 0")
    return value


def mark_run(environ: os._Environ | dict = os.environ) -> None:
    """Call in the Snakemake main process: its jobs inherit this process's id, and a server
    that ran one of them stays up until this process has ended (then `idle` seconds more).
    Checks the server switch, so a bad ``ORACLE_JOB_SERVER`` fails the run at its start."""
    server_configured(environ)
    environ[_RUN_ENV] = str(os.getpid())


def runtime_dir(directory: str | os.PathLike | None = None) -> Path:
    """This user's private directory for the server's socket, lock and log, created if needed:
    ``<base>/oracle-jobs-<uid>`` with base `directory`, else $XDG_RUNTIME_DIR, $TMPDIR or /tmp.
    OSError when it exists but is not a directory of this user with mode 0700 (someone else
    made it: it is never used, nor changed)."""
    if directory is not None:
        base = Path(directory)
    else:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        base = Path(xdg) if xdg and os.path.isdir(xdg) else Path(os.environ.get("TMPDIR") or "/tmp")
    path = base / f"oracle-jobs-{os.getuid()}"
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700, follow_symlinks=False)  # mkdir's mode is masked by the umask
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) != 0o700:
        raise OSError(f"{path} is not a private directory of uid {os.getuid()} (owner uid {st.st_uid}, mode "
                      f"{stat.S_IMODE(st.st_mode):o}{'' if stat.S_ISDIR(st.st_mode) else ', not a directory'}): "
                      "not used; remove it")
    return path


def socket_path(preload: Sequence[str], directory: str | os.PathLike | None = None) -> Path:
    """The server's Unix socket in `runtime_dir`: one per (Python executable, preload list, protocol)."""
    key = json.dumps([_PROTOCOL, sys.executable, list(preload), os.getuid()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return runtime_dir(directory) / f"{digest}.sock"


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def _open_private(path: Path, flags: int) -> int:
    """Open a file of the private directory for writing, never through a symbolic link."""
    return os.open(path, flags | os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def delegate(argv: Sequence[str] | None = None, *, usage_path: str | os.PathLike | None = None,
             preload: Sequence[str] = DEFAULT_PRELOAD, directory: str | os.PathLike | None = None) -> None:
    """Hand this script to the server when `server_wanted`, and exit with its status; otherwise
    return and let the script run inline. A server that cannot be reached or started falls back
    to inline with one line on stderr; a server that took the job and died fails it (exit 1).
    usage_path: where the child's resource usage goes (JSON: ``max_rss_mib``, ``user_s``,
    ``system_s``, ``wall_s``), e.g. beside the job's log; None: nowhere."""
    if not server_wanted():
        return
    usage: dict = {}
    try:
        status = run_in_server(sys.argv if argv is None else argv, preload=preload, idle_s=idle_seconds(),
                               directory=directory, usage=usage)
    except JobLost as exc:
        print(f"job server: {exc}; the job is not rerun inline (rerun it)", file=sys.stderr, flush=True)
        os._exit(1)
    except OSError as exc:
        print(f"job server unavailable ({exc}); running inline", file=sys.stderr, flush=True)
        return
    if usage_path is not None:
        with contextlib.suppress(OSError):
            tmp = Path(f"{usage_path}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(usage) + "\n")
            tmp.replace(usage_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if status >= 0 else 1)


def run_in_server(argv: Sequence[str], preload: Sequence[str] = DEFAULT_PRELOAD, idle_s: float = 120.0,
                  directory: str | os.PathLike | None = None, usage: dict | None = None) -> int:
    """Run the Python script ``argv[0]`` (with ``sys.argv = argv``) in the server, starting it
    if needed; returns the script's exit status (negative: killed by that signal). `usage`, when
    given, receives the child's resource usage (`delegate`). OSError before the job was handed
    over; JobLost after."""
    path = socket_path(preload, directory)
    started = time.monotonic()
    conn = _connect_or_start(path, preload, idle_s)
    with conn:
        _, uid, _ = _peer(conn)
        if uid != os.getuid():
            raise OSError(f"{path} is served by uid {uid}, not this user ({os.getuid()})")
        request = {"protocol": _PROTOCOL, "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                   "sys_path": list(sys.path)}
        blob = json.dumps(request).encode()
        socket.send_fds(conn, [len(blob).to_bytes(8, "little")], [0, 1, 2])
        conn.sendall(blob)
        reply = b""
        while len(reply) < 32:
            chunk = conn.recv(32 - len(reply))
            if not chunk:
                raise JobLost(f"the server at {path} went away before the job ended")
            reply += chunk
    status, rss_kib, user_us, system_us = struct.unpack("<4q", reply)
    if usage is not None:
        usage.update(max_rss_mib=round(rss_kib / 1024, 1), user_s=user_us / 1e6, system_s=system_us / 1e6,
                     wall_s=round(time.monotonic() - started, 3))
    return status


def _connect_or_start(path: Path, preload: Sequence[str], idle_s: float) -> socket.socket:
    conn = _try_connect(path)
    if conn is not None:
        return conn
    lock = _open_private(Path(f"{path}.lock"), 0)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one client starts the server; the others wait here
        conn = _try_connect(path)
        if conn is not None:
            return conn
        path.unlink(missing_ok=True)  # a socket left by a server that died
        log = _open_private(Path(f"{path}.log"), os.O_APPEND)
        try:
            server = subprocess.Popen([sys.executable, "-m", "oracle.workflow.job_server", str(path), str(idle_s), *preload],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd="/",
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
        finally:
            os.close(log)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            conn = _try_connect(path)
            if conn is not None:
                return conn
            if server.poll() is not None:
                raise OSError(f"job server exited with status {server.returncode} (log: {path}.log)")
            time.sleep(0.1)
    finally:
        os.close(lock)
    raise OSError(f"job server did not start within {_START_TIMEOUT_S:.0f} s (log: {path}.log)")


@contextlib.contextmanager
def _short(path: Path):
    """A name of `path` that fits a Unix socket address (at most 107 bytes): the path itself, or
    the same file reached through a descriptor of its directory (/proc/self/fd/N/name)."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _try_connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _short(path) as name:
            conn.connect(name)
    except OSError:
        conn.close()
        return None
    return conn


# ----------------------------------------------------------------------------- the server side

class _Pending:
    """A request being received without blocking: the 8-byte size with the three stream
    descriptors, then the JSON body."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid, self.buf, self.fds = conn, pid, b"", []
        self.deadline = time.monotonic() + _REQUEST_TIMEOUT_S

    def read(self) -> dict | None:
        """Read what arrived; the request once complete, else None. OSError/ValueError: bad one."""
        if not self.fds:
            data, fds, _, _ = socket.recv_fds(self.conn, 1 << 16, 3)
            self.fds += fds
        else:
            data = self.conn.recv(1 << 16)
        if not data:
            raise OSError("client went away mid-request")
        self.buf += data
        if len(self.buf) < 8:
            return None
        size = int.from_bytes(self.buf[:8], "little")
        if size > _MAX_REQUEST_BYTES or len(self.fds) != 3:
            raise ValueError(f"request of {size} bytes with {len(self.fds)} descriptors")
        if len(self.buf) < 8 + size:
            return None
        return json.loads(self.buf[8:8 + size])

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        self.conn.close()


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, None when it has ended."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return (None if fields[0] == "Z" else (int(fields[1]), int(fields[19])))


def _run_of(request: dict, peer_pid: int) -> tuple[int, int] | None:
    """The Snakemake run a request names (`mark_run`) as (pid, start time), when that process is
    an ancestor of the client (`peer_pid`) other than init and is owned by this user."""
    try:
        run = int(request["env"][_RUN_ENV])
    except (KeyError, TypeError, ValueError):
        return None
    if run <= 1 or run == os.getpid():
        return None
    try:
        if os.stat(f"/proc/{run}").st_uid != os.getuid():
            return None
    except OSError:
        return None
    pid = peer_pid
    for _ in range(64):
        st = _proc_stat(pid)
        if st is None or st[0] <= 1:
            return None
        if st[0] == run:
            mine = _proc_stat(run)
            return None if mine is None else (run, mine[1])
        pid = st[0]
    return None


def _run_alive(run: tuple[int, int]) -> bool:
    st = _proc_stat(run[0])
    return st is not None and st[1] == run[1]  # the same process, not a reused pid


def _run_child(request: dict, fds: list[int], server: int) -> None:
    """In the forked child: become the client's process and run its script; never returns."""
    status = 1
    try:
        import ctypes

        # die with the server: a job whose server is gone has nobody to report to, and its
        # client must be free to fail it without a second copy still writing its outputs
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != server:
            os._exit(1)
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
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
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


def _reap(pid: int) -> bytes:
    """Collect an ended child: the 32-byte reply (status, peak RSS KiB, user and system µs)."""
    _, wstatus, ru = os.wait4(pid, 0)
    return struct.pack("<4q", os.waitstatus_to_exitcode(wstatus), ru.ru_maxrss, round(ru.ru_utime * 1e6),
                       round(ru.ru_stime * 1e6))


class _Stop(Exception):
    pass


def _stop(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    raise _Stop


def serve(path: Path, idle_s: float, preload: Sequence[str]) -> None:
    """The server loop (module docstring). Returns after `idle_s` seconds without a job; a
    SIGTERM, SIGINT or SIGHUP kills the running jobs and returns."""
    import ctypes  # noqa: F401 - the children's PR_SET_PDEATHSIG, imported once here
    import importlib

    os.environ.setdefault("MPLBACKEND", "Agg")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - an optional speed-up, never a failure
            print(f"preload {name}: {type(exc).__name__}: {exc}", flush=True)
    runtime_dir(path.parent.parent)  # still private (checked again after the slow imports)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with _short(path) as name:
        listener.bind(name)
    listener.listen(64)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    pending: dict[socket.socket, _Pending] = {}
    jobs: dict[int, tuple[socket.socket, int]] = {}  # pid -> (client, pidfd)
    runs: dict[tuple[int, int], float] = {}  # Snakemake runs that sent a job (mark_run) -> last job time
    last = time.monotonic()
    me = os.getpid()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    print(f"serving {path} (pid {me})", flush=True)

    def drop(p: _Pending, why: str) -> None:
        print(f"request dropped: {why}", flush=True)
        sel.unregister(p.conn)
        del pending[p.conn]
        p.close()

    try:
        while jobs or pending or runs or time.monotonic() - last < idle_s:
            now = time.monotonic()
            for run in [r for r, t in runs.items() if not _run_alive(r) or now - t > _RUN_HOLD_S]:
                del runs[run]
                last = now
            for p in [p for p in pending.values() if now > p.deadline]:
                drop(p, f"no complete request within {_REQUEST_TIMEOUT_S:.0f} s")
            for key, _ in sel.select(timeout=1.0):
                what, data = key.data
                if what == "accept":
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        conn, _ = listener.accept()
                        peer_pid, uid, _ = _peer(conn)
                        if uid != os.getuid():
                            print(f"refused a client of uid {uid} (pid {peer_pid})", flush=True)
                            conn.close()
                            continue
                        conn.setblocking(False)
                        pending[conn] = _Pending(conn, peer_pid)
                        sel.register(conn, selectors.EVENT_READ, ("request", conn))
                elif what == "request":
                    p = pending[data]
                    try:
                        request = p.read()
                    except BlockingIOError:
                        continue
                    except (OSError, ValueError) as exc:
                        drop(p, str(exc))
                        continue
                    if request is None:
                        continue
                    sel.unregister(p.conn)
                    del pending[p.conn]
                    run = _run_of(request, p.pid)
                    if run is not None:
                        runs[run] = time.monotonic()
                    child = os.fork()
                    if child == 0:
                        listener.close()
                        _run_child(request, p.fds, me)
                    for fd in p.fds:
                        os.close(fd)
                    p.conn.setblocking(True)
                    pidfd = os.pidfd_open(child)
                    jobs[child] = (p.conn, pidfd)
                    sel.register(pidfd, selectors.EVENT_READ, ("exit", child))
                    sel.register(p.conn, selectors.EVENT_READ, ("client", child))
                elif data in jobs:  # a child ended, or its client went away
                    conn, pidfd = jobs.pop(data)
                    if what == "client":  # the client went away (killed): so does its job
                        with contextlib.suppress(OSError):
                            os.killpg(data, signal.SIGKILL)
                    reply = _reap(data)
                    with contextlib.suppress(OSError):
                        conn.sendall(reply)
                    sel.unregister(pidfd)
                    sel.unregister(conn)
                    os.close(pidfd)
                    conn.close()
                    last = time.monotonic()
    except _Stop:
        print("stopped by a signal: killing the running jobs", flush=True)
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        for pid in jobs:  # their clients see the connection close and fail the jobs
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
