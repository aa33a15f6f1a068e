"""The end-to-end smoke run that the slow tests share, and the one-node SLURM it runs on a second
time (fixtures in tests/conftest.py).

One run of tests/smoke/config.yaml, with what the tests on it ask for, serves the workflow,
provenance, integrity and SLURM tests: before, each made its own run of the same config (five in
all, one of them through SLURM). Tests that change files work on copies of its results folder.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CI = REPO / "scripts" / "ci"
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
CONF_MARK = "# written by scripts/ci/start_slurm.sh"
#: The smoke run on 2 cores: ~5 min idle; several times that on a machine shared with other runs.
RUN_TIMEOUT_S = 1800
#: The test cluster's status polling: quicker than the profile's (made for shared clusters); no
#: retries, so that a failing job fails the test instead of being resubmitted.
SLURM_ARGS = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2",
              "--retries", "0", "--slurm-keep-successful-logs"]


def smoke_config() -> dict:
    """tests/smoke/config.yaml with what the tests of the shared run ask of it: validation on (its
    Tables 3-4 and Figure 4 under their paper ids, and the validation numbers: the provenance and
    integrity tests), a second world `tau1.2` (the integrity tests' foreign shards), and
    `bundle_max_n` between the two sizes, so that under the SLURM profile the small classifiers
    share a bundle and the large ones are submitted one each (tests/test_slurm.py)."""
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["worlds"]["tau1.2"] = {"base_temperature": 1.2}
    cfg["validation"]["enabled"] = True
    cfg["paper"].update(table3="validation/checks", table4="validation/summary", fig4="validation/nn_distances")
    sizes = cfg["experiments"]["scaling"]["sizes"]
    cfg["resources"]["classifiers"]["bundle_max_n"] = min(sizes)
    assert min(sizes) < max(sizes)
    return cfg


@dataclasses.dataclass(frozen=True)
class SmokeRun:
    """A finished run of `smoke_config()`: `snakemake -d workdir --configfile configfile`."""

    workdir: Path
    configfile: Path
    config: dict
    log: str  # Snakemake's output (stdout and stderr)

    @property
    def results(self) -> Path:
        """results/<run> of the run."""
        return self.workdir / "results" / self.config["run"]


def run_locally(workdir: Path, cfg: dict) -> SmokeRun:
    """`cfg` run to its default target in `workdir` on 2 cores, without a profile."""
    workdir.mkdir(parents=True, exist_ok=True)
    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                           str(workdir), "--cores", "2", "--configfile", str(configfile)], cwd=workdir,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return SmokeRun(workdir, configfile, cfg, proc.stdout + proc.stderr)


# ----------------------------------------------------------------------------- the test cluster


def _require() -> bool:
    return os.environ.get("ORACLE_REQUIRE_SLURM", "") == "1"


def unavailable(reason: str) -> None:
    """Skip (fail under ORACLE_REQUIRE_SLURM=1, as CI sets it) naming why SLURM cannot run here."""
    if _require():
        pytest.fail(f"SLURM required (ORACLE_REQUIRE_SLURM=1) but unavailable: {reason}")
    pytest.skip(f"SLURM unavailable: {reason}")


def _ours_running() -> bool:
    """A cluster from start_slurm.sh is up and its node answers."""
    if not (SLURM_CONF.is_file() and CONF_MARK in SLURM_CONF.read_text()):
        return False
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(s.strip() in ("idle", "mix", "alloc") for s in out.splitlines())


def start_cluster() -> bool:
    """Make sure the one-node cluster of scripts/ci is up: True when this call started it (the
    caller stops it with `stop_cluster`), False when it was already running; skips or fails
    (`unavailable`) when it cannot run here."""
    missing = [b for b in ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol")
               if shutil.which(b) is None and not Path("/usr/sbin", b).exists()]
    if missing:
        unavailable(f"not installed ({', '.join(missing)} missing); run scripts/ci/install_slurm.sh")
    if _ours_running():
        return False
    if SLURM_CONF.is_file() and CONF_MARK not in SLURM_CONF.read_text():
        unavailable(f"{SLURM_CONF} was not written by scripts/ci/start_slurm.sh; "
                    "this test only runs on its own one-node cluster")
    if os.geteuid() != 0:
        unavailable("starting slurmctld/slurmd needs root (scripts/ci/start_slurm.sh)")
    proc = subprocess.run([str(CI / "start_slurm.sh")], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.splitlines() if "FAILED" in ln] or \
            (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1:]
        stop_cluster()  # daemons that did start must not outlive the test
        unavailable(f"scripts/ci/start_slurm.sh exited {proc.returncode}: {lines[0]}")
    return True


def stop_cluster() -> None:
    subprocess.run([str(CI / "stop_slurm.sh")], capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- a run through SLURM


@dataclasses.dataclass(frozen=True)
class SlurmRun(SmokeRun):
    """A finished run through `--profile slurm`, with what the scheduler said of its jobs right
    after it ended (a finished job stays in squeue for the cluster's MinJobAge only)."""

    run_id: str | None = None
    states: dict[str, str] = dataclasses.field(default_factory=dict)  # SLURM job id -> state
    jobs: dict[str, str] = dataclasses.field(default_factory=dict)  # job id -> rule_<rule> or group_<group>_...
    requests: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)  # job id -> scontrol show job


def _run_id(log_text: str) -> str | None:
    found = re.search(r"SLURM run ID: (\S+)", log_text)
    return found.group(1) if found else None


def _scontrol(jobid: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "-o", "show", "job", jobid], capture_output=True, text=True, timeout=30).stdout
    return dict(tok.split("=", 1) for tok in out.split() if "=" in tok)


def _slurm_jobs(workdir: Path) -> dict[str, str]:
    """SLURM job id -> the plugin's log folder (rule_<rule> or group_<group>_<rules>)."""
    logs = workdir / ".snakemake" / "slurm_logs"
    return {log.stem: log.relative_to(logs).parts[0] for log in logs.rglob("*.log")}


class SlurmRunInBackground:
    """`cfg` run to its default target in `workdir` through the repository's SLURM profile (from
    the repository root, where `--profile slurm` resolves), with quick status polling, started at
    once; `result()` waits for it. A watcher thread asks the scheduler about the run's jobs while
    it runs and when it ends: a finished job stays in squeue for the cluster's MinJobAge only
    (600 s on the test cluster), and a run on a loaded machine, or the tests that read it, may
    come later than that."""

    def __init__(self, workdir: Path, cfg: dict) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir, self.cfg = workdir, cfg
        self.configfile = workdir / "config.yaml"
        self.configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.log = workdir.parent / f"{workdir.name}.log"
        with self.log.open("w") as handle:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "snakemake", "--cores", "all", "--configfile", str(self.configfile),
                 "--profile", "slurm", "--directory", str(workdir), *SLURM_ARGS],
                cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        self._scheduler: dict = {"run_id": None, "states": {}, "requests": {}}
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while True:
            try:
                self.proc.wait(timeout=15)
                break
            except subprocess.TimeoutExpired:
                self._poll()  # a job that ended more than MinJobAge ago would be gone at the end
                if time.monotonic() > deadline:
                    self.stop()
                    break
        self._poll()
        if self._scheduler["run_id"]:  # what is left of the run (its jobs share the run id as job name)
            subprocess.run(["scancel", "--name", self._scheduler["run_id"]], capture_output=True, timeout=30)

    def _poll(self) -> None:
        """Record the state of every job of the run squeue lists now, and each new job's request."""
        run_id = self._scheduler["run_id"] = _run_id(self.log.read_text())
        if not run_id:
            return
        try:
            queue = subprocess.run(["squeue", "--states=all", "--noheader", "--name", run_id, "--format=%i|%T"],
                                   capture_output=True, text=True, timeout=30).stdout
            for job, state in (line.split("|") for line in queue.split()):
                self._scheduler["states"][job] = state
                if job not in self._scheduler["requests"]:
                    self._scheduler["requests"][job] = _scontrol(job)
        except (OSError, subprocess.SubprocessError):
            pass  # a busy controller: the next poll asks again

    def result(self) -> SlurmRun:
        """The finished run; fails the test when it failed or ran past RUN_TIMEOUT_S."""
        self._watcher.join()
        text = self.log.read_text()
        if self.proc.returncode is None or self.proc.returncode < 0:
            pytest.fail(f"snakemake --profile slurm did not finish in {RUN_TIMEOUT_S} s; log tail:\n{text[-4000:]}")
        assert self.proc.returncode == 0, f"snakemake --profile slurm exited {self.proc.returncode}; log tail:\n{text[-4000:]}"
        return SlurmRun(self.workdir, self.configfile, self.cfg, text, self._scheduler["run_id"],
                        self._scheduler["states"], _slurm_jobs(self.workdir), self._scheduler["requests"])

    def stop(self) -> None:
        """Kill the run if it still runs (only the session started above) and cancel its jobs."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            run_id = _run_id(self.log.read_text())
            if run_id:
                subprocess.run(["scancel", "--name", run_id], capture_output=True, timeout=30)


def minutes(limit: str) -> int:
    """SLURM time limit `[D-]HH:MM:SS` in minutes."""
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 1440 + h * 60 + m + math.ceil(s / 60)


def model_dir(run: Path, spec: dict) -> Path:
    """The folder, in run folder `run`, of the model that run `spec` ({experiment, arch, cell,
    seed}) trains or borrows: one model, trained once, named by what determines its weights
    (RunPaths.classifier_dir, from the run's effective config)."""
    from oracle.workflow.plan.paths import RunPaths

    paths = RunPaths(yaml.safe_load((run / "config.yaml").read_text()))
    return run / paths.classifier_dir(spec).removeprefix(paths.RUN + "/")
