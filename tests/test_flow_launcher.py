"""Multi-process flow training (issue 21): the torchrun launch of `oracle_train`, workers that
die with their launcher, and a 2-rank CPU run killed mid-training and resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

from oracle.workflow.plan import resources as res

REPO = Path(__file__).resolve().parents[1]
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")


# ----------------------------------------------------------------------------- launch description


def test_one_node_launch_is_torchrun_on_the_script_naming_its_launcher():
    launch = res.torchrun_launch(2, 1, "/venv/bin/python", "/w/.snakemake/scripts/tmp.py", 4242)
    assert launch.argv == ("/venv/bin/python", "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                           "--nproc_per_node", "2", "/w/.snakemake/scripts/tmp.py")
    assert dict(launch.env) == {res.LAUNCHER_PID_ENV: "4242"}


def test_multi_node_launch_is_srun_and_names_no_launcher():
    """On several nodes torchrun's parent is slurmstepd, not the job's script: no pid to check."""
    launch = res.torchrun_launch(16, 2, "python", "s.py", 4242, head_node="gpu001", job_id="77")
    assert launch.argv[0] == "srun" and launch.argv[-1] == "s.py" and "--rdzv_endpoint" in launch.argv
    assert dict(launch.env) == {}


@pytest.mark.parametrize("gpus", [0, 1])
def test_launch_needs_several_gpus(gpus):
    with pytest.raises(ValueError, match=f"gpus > 1, got {gpus}"):
        res.torchrun_launch(gpus, 1, "python", "s.py", 1)


# ----------------------------------------------------------------------------- die_with_launcher

# A launcher that starts a worker calling die_with_launcher (with $ORACLE_LAUNCHER_PID set to the
# launcher, as torchrun_launch does), prints the worker's pid, and waits.
LAUNCHER = """
import os, subprocess, sys
env = {**os.environ, "ORACLE_LAUNCHER_PID": str(os.getpid())}
worker = subprocess.Popen([sys.executable, "-c", "from oracle.workflow.plan import resources as res; "
                           "res.die_with_launcher(); print('armed', flush=True); import time; time.sleep(60)"],
                          env=env, start_new_session=True, stdout=subprocess.PIPE, text=True)
assert worker.stdout.readline() == "armed\\n"
print(worker.pid, flush=True)
worker.wait()
"""


@linux_only
def test_worker_dies_with_its_launcher(tmp_path):
    """SIGKILL to the launcher (the worker is in a session of its own, as under torchrun)
    takes the worker with it."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    worker = int(launcher.stdout.readline())
    start = _stat(worker)[19]
    launcher.kill()
    launcher.wait()
    deadline = time.time() + 10
    while _alive(worker, start) and time.time() < deadline:
        time.sleep(0.05)
    alive = _alive(worker, start)
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert not alive, "the worker outlived its launcher"


@linux_only
def test_worker_whose_launcher_is_gone_exits_at_once():
    """A launcher that died before the worker armed the signal: not among the worker's
    ancestors any more, so the worker ends itself (SIGKILL) instead of training."""
    def worker(launcher_pid: int) -> subprocess.CompletedProcess:
        code = "from oracle.workflow.plan import resources as res; res.die_with_launcher(); print('trained')"
        env = {**os.environ, "PYTHONPATH": str(REPO), res.LAUNCHER_PID_ENV: str(launcher_pid)}
        return subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True,
                              timeout=60)

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        gone, here = worker(stranger.pid), worker(os.getpid())
    finally:
        stranger.kill()
        stranger.wait()
    assert gone.returncode == -signal.SIGKILL and gone.stdout == ""
    assert here.returncode == 0 and here.stdout == "trained\n", here.stderr


# ----------------------------------------------------------------------------- /proc helpers


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state, ppid, ...), None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


class _Proc(NamedTuple):
    start: str  # start time (with the pid, names one process)
    ppid: int
    cmdline: bytes
    environ: bytes


def _descendants(root: int) -> dict[int, _Proc]:
    """Every process below `root` now."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and (st := _stat(int(d.name))) is not None:
            children.setdefault(int(st[1]), []).append(int(d.name))
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            st = _stat(pid)
            cmdline, environ = (Path(f"/proc/{pid}/{f}").read_bytes() for f in ("cmdline", "environ"))
        except OSError:
            continue
        if st is not None:
            out[pid] = _Proc(st[19], int(st[1]), cmdline, environ)
            todo += children.get(pid, [])
    return out


def _alive(pid: int, start: str) -> bool:
    """The process is still running (a zombie nobody reaped has died; a reused pid is another)."""
    st = _stat(pid)
    return st is not None and st[19] == start and st[0] not in "ZX"


# ----------------------------------------------------------------------------- end to end

STEPS = 200

# A job script shaped like scripts/oracle_train.py, without Snakemake: the launcher relaunches it
# under torchrun (2 CPU ranks, gloo); each worker arms die_with_launcher, then trains a tiny flow.
JOB = """
import os, sys
from oracle.workflow.plan import resources as res
if "LOCAL_RANK" not in os.environ:
    res.relaunch_under_torchrun(2, 1, "the launcher's stdout")
    sys.exit(0)
res.die_with_launcher()
import torch
from oracle.flow_checkpoints import build_flow
from oracle.flow_training import train_flow
sys.path.insert(0, {tests!r})
from test_flow_training import SPEC, cfg, toy_data
images, labels = toy_data()
model = build_flow(dict(SPEC, num_classes=2), seed=1)
model = train_flow(model, images, labels, cfg(steps={steps}, checkpoint_every=5, log_every=50), {ckpt!r}, "cpu")
if torch.distributed.get_rank() == 0:
    torch.save(model.state_dict(), {out!r})
torch.distributed.destroy_process_group()
"""


def _start_job(d: Path) -> subprocess.Popen:
    """The job in `d` (job.py, its stdout in out.txt), in a process group of its own."""
    d.mkdir(exist_ok=True)
    job = d / "job.py"
    job.write_text(JOB.format(tests=str(Path(__file__).parent), steps=STEPS, ckpt=str(d / "ckpt"),
                              out=str(d / "flow.pt")))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with open(d / "out.txt", "a") as out:
        return subprocess.Popen([sys.executable, str(job)], cwd=d, env=env, start_new_session=True, stdout=out,
                                stderr=subprocess.STDOUT)


def _finish_job(d: Path) -> str:
    proc = _start_job(d)
    rc = proc.wait(timeout=600)
    said = (d / "out.txt").read_text()
    assert rc == 0, said[-3000:]
    return said


def _kill_after_first_checkpoint(d: Path, group: bool) -> tuple[dict[int, _Proc], list[int]]:
    """Start the job in `d`, SIGKILL its process group (group=False: the launcher alone) once
    training has written a checkpoint; the job's processes then, and those still running 10 s
    later (which this kills, as the test started them)."""
    proc = _start_job(d)
    deadline = time.time() + 600
    while not (d / "ckpt" / "last.pt").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    tree = _descendants(proc.pid)
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.kill()
    proc.wait()
    finished = (d / "flow.pt").exists()  # before any survivor could write it
    deadline = time.time() + 10
    while any(_alive(pid, p.start) for pid, p in tree.items()) and time.time() < deadline:
        time.sleep(0.1)
    survivors = [pid for pid, p in tree.items() if _alive(pid, p.start)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    if finished:
        pytest.skip("training finished before it could be killed")
    said = (d / "out.txt").read_text()
    assert (d / "ckpt" / "last.pt").exists(), f"no checkpoint before the launcher ended: {said[-3000:]}"
    # torchrun and its 2 workers (LOCAL_RANK), as the job ran them
    torchrun = [pid for pid, p in tree.items() if b"torch.distributed.run" in p.cmdline]
    workers = [pid for pid, p in tree.items() if b"\0LOCAL_RANK=" in b"\0" + p.environ]
    assert len(torchrun) == 1 and sum(tree[pid].ppid == torchrun[0] for pid in workers) == 2, (tree, said)
    return tree, survivors


@pytest.mark.slow
@linux_only
def test_killed_launcher_leaves_no_worker_and_the_rerun_resumes(tmp_path):
    """The launcher runs flow training on 2 CPU ranks (torchrun, gloo); once a checkpoint
    exists its whole process group gets SIGKILL. torchrun starts its workers in sessions of
    their own, so the group kill does not reach them: they must die with torchrun, not train
    on beside the rerun. The rerun resumes from the checkpoint and ends with the weights of an
    unkilled 2-rank run bit for bit (every step's batch and noise are functions of (seed,
    step), the checkpoint holds all other state, and a 2-rank all-reduce adds two numbers,
    which no order changes)."""
    import torch

    kill_dir, ref_dir = tmp_path / "kill", tmp_path / "ref"
    ckpt = kill_dir / "ckpt" / "last.pt"
    _, survivors = _kill_after_first_checkpoint(kill_dir, group=True)
    assert not survivors, f"processes {survivors} of the job outlived its killed process group"
    step = torch.load(ckpt, weights_only=True)["step"]
    assert 0 < step < STEPS

    said = _finish_job(kill_dir)
    assert f"resuming flow training from step {step} of {STEPS}" in said, said[-3000:]
    assert "rank 1 of 2: joined the gloo process group" in said
    _finish_job(ref_dir)
    assert "resuming" not in (ref_dir / "out.txt").read_text()
    a, b = (torch.load(d / "flow.pt", weights_only=True) for d in (ref_dir, kill_dir))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
@linux_only
def test_torchrun_and_its_workers_die_with_the_launcher_alone(tmp_path):
    """SIGKILL to the launcher only (as when a job's main process is killed): torchrun, which
    is in the launcher's process group but would survive it, dies with it, and the workers
    with torchrun."""
    tree, survivors = _kill_after_first_checkpoint(tmp_path, group=False)
    assert not survivors, f"{[(pid, tree[pid].cmdline) for pid in survivors]} outlived the killed launcher"
