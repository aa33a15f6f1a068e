"""The server side of the local job server (`oracle.workflow.jobs.server`, whose docstring says
what it does and who may use it): ``python -m oracle.workflow.jobs.fork_server SOCKET IDLE PRELOAD...``.

One single-threaded loop (``selectors``) over the listening socket, the requests being received,
the clients of running jobs and the children's pidfds: a request is read without blocking and
dropped after `REQUEST_TIMEOUT_S`; a complete one is forked into a child that becomes the
client's process and runs its script; the child's end (or its client's) is answered with its
status and resource usage (`_reap`).

Every descendant of a job dies with it. The forked child is the job's *leader*: a subreaper
(``PR_SET_CHILD_SUBREAPER``, so every orphaned descendant, a ``setsid`` grandchild included,
becomes its child) that forks the process running the script and waits. When the script ends,
when the server asks (its client went away), or when the server dies (the leader's
``PR_SET_PDEATHSIG`` is SIGTERM, which it handles), the leader kills every descendant left and
exits; the script's process dies with its leader (its own ``PR_SET_PDEATHSIG`` is SIGKILL).
What remains: a leader killed by SIGKILL itself (the OOM killer, ``kill -9`` of that pid) leaves
the descendants that had left the script's process group (``setsid``) to init.

Pending requests are bounded (`MAX_PENDING`, the oldest dropped first), running out of file
descriptors (``EMFILE`` on accept) pauses accepting instead of ending the server, and repeated
messages are counted, not repeated, so the log stays small under a flood of connections.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from oracle.workflow.jobs import server as js

REQUEST_TIMEOUT_S = 10.0  # a client sends its request at once; one that does not is dropped
MAX_PENDING = 32  # requests being received at once (each holds up to 4 descriptors)
SERVER_PID_ENV = "ORACLE_JOB_SERVER_PID"  # in a job's environment: the server that runs it
_MAX_REQUEST_BYTES = 64 << 20
_RUN_HOLD_S = 6 * 3600.0  # a live run keeps the server up at most this long after its last job
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_ACCEPT_PAUSE_S = 0.5  # out of descriptors: stop accepting this long
_LOG_EVERY_S = 10.0  # a repeated message is printed at most this often, with its count
_LEADER_GRACE_S = 5.0  # a leader asked to end its job gets this long before SIGKILL


class _Pending:
    """A request being received without blocking: the 8-byte size with the three stream
    descriptors, then the JSON body."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.conn, self.pid, self.buf, self.fds = conn, pid, b"", []
        self.deadline = time.monotonic() + REQUEST_TIMEOUT_S

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
        run = int(request["env"][js.RUN_ENV])
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


def _prctl(option: int, value: int) -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


class _Kill(Exception):
    pass


def _raise_kill(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    raise _Kill


def _children(pid: int) -> list[int]:
    """The live children of `pid` (from /proc: every thread's ``children`` list, else a scan)."""
    out: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out.update(int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        return sorted(out)
    except OSError:
        pass
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None and st[0] == pid:
                out.add(int(entry))
    return sorted(out)


def _kill_descendants() -> None:
    """In a subreaper: SIGKILL every child and reap it, until none is left (the orphans of a
    killed child are reparented here and killed in the next round)."""
    me = os.getpid()
    for _ in range(1000):
        for pid in _children(me):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return  # no child left
        time.sleep(0.01)


def _run_child(request: dict, fds: list[int], server: int) -> None:
    """In the forked child: become the job's leader (module docstring), fork the process that
    runs the client's script, wait for it, then end every descendant; never returns."""
    status = 1
    try:
        # the server's death reaches the leader as SIGTERM: it still ends the job's whole tree
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, _raise_kill)
        if os.getppid() != server:
            os._exit(1)
        os.setsid()
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        leader = os.getpid()
        job = os.fork()
        if job == 0:
            _run_script(request, fds, leader, server)
        for fd in fds:
            os.close(fd)
        try:
            while True:
                pid, wstatus = os.waitpid(-1, 0)
                if pid == job:
                    status = os.waitstatus_to_exitcode(wstatus)
                    break
        except _Kill:
            status = -signal.SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _kill_descendants()
    except BaseException:  # noqa: BLE001 - a leader reports through its status only
        pass
    finally:
        os._exit((128 - status if status < 0 else status) & 0xFF)


def _run_script(request: dict, fds: list[int], leader: int, server: int) -> None:
    """In the job's process (child of its leader): become the client's process and run its
    script; never returns."""
    status = 1
    try:
        # die with the leader: a job whose leader is gone has nobody to report to, and its
        # client must be free to fail it without a second copy still writing its outputs
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != leader:
            os._exit(1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[js.CHILD_ENV] = "1"
        os.environ[SERVER_PID_ENV] = str(server)
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


def _end_job(pid: int) -> None:
    """Ask a job's leader to end its whole tree (SIGTERM); SIGKILL its process group when it
    has not exited within `_LEADER_GRACE_S`. The leader is reaped by the caller."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _LEADER_GRACE_S
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


class _Log:
    """Server messages, each kind printed at most every `_LOG_EVERY_S` with how many were held back."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}
        self.held: dict[str, int] = {}

    def __call__(self, kind: str, text: str) -> None:
        now = time.monotonic()
        if now - self.last.get(kind, -_LOG_EVERY_S) < _LOG_EVERY_S:
            self.held[kind] = self.held.get(kind, 0) + 1
            return
        held = self.held.pop(kind, 0)
        self.last[kind] = now
        print(text + (f" ({held} more like it since the last such line)" if held else ""), flush=True)


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
    js.runtime_dir(path.parent.parent)  # still private (checked again after the slow imports)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with js._short(path) as name:
        listener.bind(name)
    listener.listen(64)
    listener.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, ("accept", None))
    accepting, resume_at = True, 0.0
    log = _Log()
    pending: dict[socket.socket, _Pending] = {}
    jobs: dict[int, tuple[socket.socket, int]] = {}  # pid -> (client, pidfd)
    job_runs: dict[int, tuple[int, int]] = {}  # pid -> the Snakemake run that sent the job (mark_run)
    runs: dict[tuple[int, int], float] = {}  # Snakemake runs that sent a job (mark_run) -> last job time
    last = time.monotonic()
    me = os.getpid()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    print(f"serving {path} (pid {me})", flush=True)

    def drop(p: _Pending, why: str) -> None:
        log("drop", f"request dropped: {why}")
        sel.unregister(p.conn)
        del pending[p.conn]
        p.close()

    def finish(pid: int, end: bool) -> None:
        """Reap job `pid` (ending its tree first when `end`) and send its client the reply."""
        conn, pidfd = jobs.pop(pid)
        job_runs.pop(pid, None)
        if end:
            _end_job(pid)
        reply = _reap(pid)
        with contextlib.suppress(OSError):
            conn.sendall(reply)
        sel.unregister(pidfd)
        sel.unregister(conn)
        os.close(pidfd)
        conn.close()

    try:
        while jobs or pending or runs or time.monotonic() - last < idle_s:
            now = time.monotonic()
            for run in [r for r, t in runs.items() if not _run_alive(r) or now - t > _RUN_HOLD_S]:
                del runs[run]
                last = now
            # a job whose Snakemake run is gone (kill -9 of snakemake alone: its clients live on)
            # would write outputs and records that no run tracks, beside the next run's writers
            for pid, run in [(p, r) for p, r in job_runs.items() if not _run_alive(r)]:
                log("orphan", f"job {pid}: its Snakemake run (pid {run[0]}) is gone; ending the job")
                finish(pid, end=True)
                last = now
            for p in [p for p in pending.values() if now > p.deadline]:
                drop(p, f"no complete request within {REQUEST_TIMEOUT_S:.0f} s")
            if not accepting and now >= resume_at:
                sel.register(listener, selectors.EVENT_READ, ("accept", None))
                accepting = True
            for key, _ in sel.select(timeout=0.2 if not accepting else 1.0):
                what, data = key.data
                if what == "accept":
                    try:
                        conn, _ = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError as exc:  # EMFILE/ENFILE: out of descriptors; wait, do not die
                        log("accept", f"cannot accept a connection ({exc}): pausing {_ACCEPT_PAUSE_S} s")
                        if pending:  # the oldest request waiting frees its descriptors
                            drop(min(pending.values(), key=lambda q: q.deadline), "out of descriptors")
                        sel.unregister(listener)
                        accepting, resume_at = False, time.monotonic() + _ACCEPT_PAUSE_S
                        break
                    peer_pid, uid, _ = js._peer(conn)
                    if uid != os.getuid():
                        log("uid", f"refused a client of uid {uid} (pid {peer_pid})")
                        conn.close()
                        continue
                    if len(pending) >= MAX_PENDING:
                        drop(min(pending.values(), key=lambda q: q.deadline), f"{MAX_PENDING} requests pending")
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
                    try:
                        child = os.fork()
                    except OSError as exc:  # out of processes or memory: the client runs it inline
                        log("fork", f"cannot fork a job ({exc})")
                        p.close()
                        continue
                    if child == 0:
                        listener.close()
                        _run_child(request, p.fds, me)
                    for fd in p.fds:
                        os.close(fd)
                    p.conn.setblocking(True)
                    pidfd = os.pidfd_open(child)
                    jobs[child] = (p.conn, pidfd)
                    if run is not None:
                        job_runs[child] = run
                    sel.register(pidfd, selectors.EVENT_READ, ("exit", child))
                    sel.register(p.conn, selectors.EVENT_READ, ("client", child))
                elif data in jobs:  # a child ended, or its client went away
                    # the client went away (killed): so does its job, tree and all
                    finish(data, end=what == "client")
                    last = time.monotonic()
    except _Stop:
        print("stopped by a signal: killing the running jobs", flush=True)
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        for pid in jobs:  # their clients see the connection close and fail the jobs
            _end_job(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
