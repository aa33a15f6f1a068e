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
`oracle.workflow.jobs.fork_server.REQUEST_TIMEOUT_S` is dropped without holding up the others.

The server is single-threaded (``selectors`` over the listening socket, client sockets and the
children's pidfds), so forking never copies a lock held by another thread, and it never runs a
torch operation itself, so each child initialises its own OpenMP pool. A job's whole process
tree dies with it, with its client and with the server (each job's leader is a subreaper,
`oracle.workflow.jobs.fork_server`), and a client whose server died mid-job fails the job instead of
running it again inline next to a child that might still be writing. It exits `idle` seconds after its
last job, but not while a Snakemake run that sent it a job is still alive (the Snakefile marks
its jobs with `mark_run`; the mark counts only when that process is an ancestor of the job's
client, owned by the same user, and for at most six hours after the run's last job): the
flow trains inline for minutes with no job in the server, and a server that quit then would
put its imports on the run's critical path again.

A job whose Snakemake run is gone (``kill -9`` of snakemake alone leaves its clients alive) is
ended by the server within a second or two (the run's process and start time, `mark_run`, are
looked at once a second), so no job writes outputs or records that no run tracks beside the
writers of the next run. Ctrl-C (SIGINT to the run's process group) ends a waiting client with
one line, ``interrupted; rerun to resume``, and no traceback; its job goes with it.

A server stopped with SIGSTOP (or by a debugger) ends no job: each client waiting for one says
so in one line on stderr within `STALL_CHECK_S` (with the `kill -CONT` that resumes it), and
again when it runs. The socket is keyed on the server loop's own code (`server_code_sha`), so
two checkouts sharing one environment each run their jobs in a server of their own code.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["DEFAULT_PRELOAD", "INTERRUPTED", "JobLost", "delegate", "idle_seconds", "mark_run", "run_in_server", "runtime_dir",
           "server_code_sha", "server_configured", "server_wanted", "socket_path"]

#: Imported once by the server; each is optional (a module that fails to import is skipped).
#: matplotlib's PDF backend and seaborn: every figure job saves a PDF; importing the two in each
#: child cost the smoke run's 5 figure jobs 2.1 of their 14.2 CPU seconds (issue 38).
DEFAULT_PRELOAD = ("numpy", "torch", "torchvision", "timm", "h5py", "scipy.stats", "scipy.optimize",
                   "pandas", "matplotlib.pyplot", "matplotlib.backends.backend_pdf", "seaborn", "tabulate",
                   "sklearn.linear_model", "sklearn.neighbors", "snakemake.script")
SWITCH_ENV = "ORACLE_JOB_SERVER"
IDLE_ENV = "ORACLE_JOB_SERVER_IDLE"
CHILD_ENV = "ORACLE_JOB_SERVER_CHILD"
RUN_ENV = "ORACLE_RUN_PID"
LOG_BYTES = 1 << 20  # the server's log is started over when a new server finds it larger
_PROTOCOL = 2
_START_TIMEOUT_S = 300.0
#: What a job says when Ctrl-C ends it (the client here, a job run inline: `oracle.workflow.jobs.script_job`).
INTERRUPTED = "interrupted; rerun to resume"
#: How often a client waiting for its job looks whether the server can make progress at all.
STALL_CHECK_S = 5.0


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
    return not environ.get(CHILD_ENV) and server_configured(environ)


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
    environ[RUN_ENV] = str(os.getpid())


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


#: The files of the server loop: a checkout runs its jobs in a server made of its own.
SERVER_CODE = (Path(__file__), Path(__file__).with_name("fork_server.py"))


def server_code_sha(files: Sequence[Path] | None = None) -> str:
    """sha256 over the bytes of the server loop's files (default `SERVER_CODE`)."""
    h = hashlib.sha256()
    for f in SERVER_CODE if files is None else files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def socket_path(preload: Sequence[str], directory: str | os.PathLike | None = None) -> Path:
    """The server's Unix socket in `runtime_dir`: one per (Python executable, preload list, protocol,
    server code). Two checkouts sharing one environment share a server only when their server
    loops are the same bytes (the `oracle` modules a job imports are its own checkout's anyway)."""
    key = json.dumps([_PROTOCOL, sys.executable, list(preload), os.getuid(), server_code_sha()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return runtime_dir(directory) / f"{digest}.sock"


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket (SO_PEERCRED)."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def _open_private(path: Path, flags: int) -> int:
    """Open a file of the private directory for writing, never through a symbolic link."""
    return os.open(path, flags | os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def delegate(argv: Sequence[str] | None = None, *, usage_path: str | os.PathLike | None = None,
             rule: str | None = None, preload: Sequence[str] = DEFAULT_PRELOAD,
             directory: str | os.PathLike | None = None, on_failure: Callable[[], None] | None = None) -> None:
    """Hand this script to the server when `server_wanted`, and exit with its status; otherwise
    return and let the script run inline. A server that cannot be reached or started falls back
    to inline with one line on stderr; a server that took the job and died fails it (exit 1).
    usage_path: where the child's resource usage goes (JSON: ``max_rss_mib``, ``user_s``,
    ``system_s``, ``wall_s``, and ``rule`` when given; read by `oracle.report.timings`), e.g.
    beside the job's log; None: nowhere. on_failure: called in this process when the job
    failed or was lost, before exiting (the job's records go with its outputs)."""
    if not server_wanted():
        return
    usage: dict = {} if rule is None else {"rule": str(rule)}
    try:
        status = run_in_server(sys.argv if argv is None else argv, preload=preload, idle_s=idle_seconds(),
                               directory=directory, usage=usage)
    except KeyboardInterrupt:  # Ctrl-C: the connection closes with this process and the server ends the job
        print(INTERRUPTED, file=sys.stderr, flush=True)
        if on_failure is not None:
            on_failure()
        os._exit(130)
    except JobLost as exc:
        print(f"job server: {exc}; the job is not rerun inline (rerun it)", file=sys.stderr, flush=True)
        if on_failure is not None:
            on_failure()
        os._exit(1)
    except OSError as exc:
        print(f"job server unavailable ({exc}); running inline", file=sys.stderr, flush=True)
        return
    if usage_path is not None:
        with contextlib.suppress(OSError):
            tmp = Path(f"{usage_path}.tmp{os.getpid()}")
            tmp.write_text(json.dumps(usage) + "\n")
            tmp.replace(usage_path)
    if status != 0 and on_failure is not None:
        on_failure()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status if status >= 0 else 1)


def run_in_server(argv: Sequence[str], preload: Sequence[str] = DEFAULT_PRELOAD, idle_s: float = 120.0,
                  directory: str | os.PathLike | None = None, usage: dict | None = None) -> int:
    """Run the Python script ``argv[0]`` (with ``sys.argv = argv``) in the server, starting it
    if needed; returns the script's exit status (negative: killed by that signal). `usage`, when
    given, receives the child's resource usage (`delegate`). OSError before the job was handed
    over (a server that hangs up with the request unread resets the connection); JobLost after."""
    path = socket_path(preload, directory)
    started = time.monotonic()
    conn = _connect_or_start(path, preload, idle_s)
    with conn:
        server_pid, uid, _ = _peer(conn)
        if uid != os.getuid():
            raise OSError(f"{path} is served by uid {uid}, not this user ({os.getuid()})")
        request = {"protocol": _PROTOCOL, "argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                   "sys_path": list(sys.path)}
        blob = json.dumps(request).encode()
        socket.send_fds(conn, [len(blob).to_bytes(8, "little")], [0, 1, 2])
        conn.sendall(blob)
        reply = b""
        conn.settimeout(STALL_CHECK_S)
        stopped = False
        while len(reply) < 32:
            try:
                chunk = conn.recv(32 - len(reply))
            except TimeoutError:
                stopped = _report_stop(server_pid, stopped)
                continue
            if not chunk:
                raise JobLost(f"the server at {path} went away before the job ended")
            reply += chunk
    status, rss_kib, user_us, system_us = struct.unpack("<4q", reply)
    if usage is not None:
        usage.update(max_rss_mib=round(rss_kib / 1024, 1), user_s=user_us / 1e6, system_s=system_us / 1e6,
                     wall_s=round(time.monotonic() - started, 3))
    return status


def process_state(pid: int) -> str | None:
    """The one-letter state of process `pid` from /proc (``T``: stopped, ``t``: stopped by a
    tracer, ``Z``: a zombie, ...); None when there is no such process."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat_line[stat_line.rindex(")") + 2:].split(" ", 1)[0]  # the name may hold spaces


def _report_stop(pid: int, reported: bool) -> bool:
    """A client whose job has not ended: one line on stderr when its server is stopped (no job
    of it can end until it continues) and one when it runs again; returns whether it is stopped."""
    stopped = process_state(pid) in ("T", "t")
    if stopped and not reported:
        print(f"job server: its process {pid} is stopped (SIGSTOP) and makes no progress: this job waits for "
              f"it; `kill -CONT {pid}` resumes it, `kill {pid}` ends it (the job then fails)", file=sys.stderr,
              flush=True)
    elif reported and not stopped:
        print(f"job server: process {pid} runs again", file=sys.stderr, flush=True)
    return stopped


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
        log_path = Path(f"{path}.log")
        # each server appends to the log; one that has grown past LOG_BYTES starts over
        big = log_path.is_file() and not log_path.is_symlink() and log_path.stat().st_size > LOG_BYTES
        log = _open_private(log_path, os.O_TRUNC if big else os.O_APPEND)
        try:
            server = subprocess.Popen([sys.executable, "-m", "oracle.workflow.jobs.fork_server", str(path), str(idle_s), *preload],
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
