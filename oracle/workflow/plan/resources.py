"""Resources of the workflow's rules, in snakemake-executor-plugin-slurm's names, and how
multi-GPU flow training is launched. Light: imported by the Snakefile at DAG-build time."""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
import os
import signal
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oracle.errors import ConfigError

#: The stages with their own `resources:` entry in the config.
STAGES = ("data", "oracle", "validation", "samples", "splits", "classifiers", "analysis")


def rule_threads(config: Mapping, stage: str) -> int:
    """`threads:` of every rule of `stage` (Snakemake caps it at --cores locally)."""
    return int(config["resources"][stage]["cpus"])


def rule_resources(config: Mapping, stage: str) -> dict:
    """`resources:` of every rule of `stage`, in snakemake-executor-plugin-slurm's names.

    Single node: `gpu=<gpus>` (sbatch --gpus). Several nodes: `gres=gpu:<per node>`, `nodes`,
    `tasks=<nodes>` and `mpi=srun` (the plugin then leaves the launch to the rule's command,
    which starts one torchrun per node) and `tasks_per_gpu=0` (no --ntasks-per-gpu).
    """
    r = config["resources"][stage]
    out: dict[str, Any] = {
        "cpus_per_task": int(r["cpus"]),
        "mem_mb": int(r["mem_mb"]),
        "runtime": int(r["runtime"]),
        "nodes": int(r["nodes"]),
    }
    if r["nodes"] > 1:
        out["gres"] = f"gpu:{r['gpus'] // r['nodes']}"
        out["tasks"] = int(r["nodes"])
        out["tasks_per_gpu"] = 0
        out["mpi"] = "srun"
    elif r["gpus"] > 0:
        out["gpu"] = int(r["gpus"])
    if r["partition"]:
        out["slurm_partition"] = r["partition"]
    return out


#: The cheap analysis rules: each reads small files (metrics and constants JSON, the collected CSV
#: tables, the numbers parts) and writes tables, figures, numbers or claims in a second or two.
#: Under a cluster executor each would otherwise be a job of its own that pays a queue wait and
#: 10-20 s of Snakemake start-up and imports; with `resources.analysis.local` (default true) they
#: run where Snakemake runs (docs/slurm.md). `world_constants` is not one of them: it reads every
#: sample's log-likelihoods (400 MB for ImageNet's 50,000 x 1,000).
ANALYSIS_RULES = ("experiment_table", "experiment_figure", "experiment_numbers", "world_numbers", "numbers",
                  "claims", "validation_table", "validation_nn_distances", "validation_samples_grid",
                  "validation_numbers")


#: The generic collect rule of kind K is named ``K_collect`` (rules/experiments.smk).
COLLECT_SUFFIX = "_collect"


def collect_rule(kind: str) -> str:
    """The name of experiment kind `kind`'s collect rule (rules/experiments.smk)."""
    return f"{kind}{COLLECT_SUFFIX}"


def analysis_local(config: Mapping) -> bool:
    """`resources.analysis.local`: whether the cheap analysis rules run where Snakemake runs
    (default true; false submits each as a cluster job of its own, as any other rule)."""
    return bool(config["resources"]["analysis"].get("local", True))


#: The rules that always run where Snakemake runs: the aggregate targets (they run nothing), the
#: effective config (writes one small file) and the paper PDF (pdflatex on the run's own files;
#: asked for by `snakemake paper`, in no cluster's DAG unless named).
TARGET_RULES = ("all", "effective_config", "oracle", "samples", "splits", "classifiers", "experiments", "validation",
                "timings", "report", "paper", "paper_pdf")


def local_rules(config: Mapping, kinds: Iterable[str]) -> list[str]:
    """Every rule that runs where Snakemake runs under `config`, never as a cluster job:
    `TARGET_RULES` and `local_analysis_rules` (the Snakefile declares exactly these)."""
    return [*TARGET_RULES, *local_analysis_rules(config, kinds)]


def local_analysis_rules(config: Mapping, kinds: Iterable[str]) -> list[str]:
    """The analysis rules that run where Snakemake runs under `config`: `ANALYSIS_RULES` and the
    collect rule of every kind in `kinds`, or none when resources.analysis.local is false."""
    if not analysis_local(config):
        return []
    return [*ANALYSIS_RULES, *map(collect_rule, kinds)]


CLASSIFIER_GROUP = "classifiers"
LARGE_CLASSIFIER_GROUP = "classifiers_large"


def classifier_group(config: Mapping, n: int) -> str:
    """The Snakemake group of a classifier job of size `n`: "classifiers" (bundled by the
    profile's group-components) unless resources.classifiers.bundle_max_n is set and n exceeds
    it, then "classifiers_large" (one SLURM job each: the profile does not bundle it)."""
    limit = config["resources"]["classifiers"].get("bundle_max_n")
    return LARGE_CLASSIFIER_GROUP if limit is not None and n > limit else CLASSIFIER_GROUP


def classifier_runtime(config: Mapping, n: int, n_max: int) -> int:
    """Minutes a classifier job of training-set size `n` asks for, `n_max` being the largest
    training-set size of the run (see `runtime_scales_with_n`)."""
    r = config["resources"]["classifiers"]
    runtime = int(r["runtime"])
    if not r.get("runtime_scales_with_n", False):
        return runtime
    return max(math.ceil(runtime * n / n_max), min(runtime, 10))


#: Minutes a prediction job asks for at most: it scores one test set (thousands of rows) with a
#: trained model, a small fraction of a training job's time, and inside a SLURM bundle every
#: member's limit adds up.
PREDICTION_RUNTIME = 5


def prediction_runtime(config: Mapping) -> int:
    """Minutes a prediction job asks for: the classifiers' runtime, capped at PREDICTION_RUNTIME."""
    return min(int(config["resources"]["classifiers"]["runtime"]), PREDICTION_RUNTIME)


def gpus_from_resources(resources: Mapping) -> tuple[int, int]:
    """(GPUs in total, nodes) of a job from its Snakemake resources (see `rule_resources`)."""
    nodes = int(resources.get("nodes", 1) or 1)
    gres = str(resources.get("gres", "") or "")
    if gres.startswith("gpu"):
        per_node = int(gres.split(":")[-1]) if gres.split(":")[-1].isdigit() else 1
        return per_node * nodes, nodes
    return int(resources.get("gpu", 0) or 0), nodes


def oracle_launcher(gpus: int, nodes: int, python: str, head_node: str | None = None,
                    job_id: str | None = None) -> list[str]:
    """The argv prefix that starts flow training on `gpus` GPUs over `nodes` nodes.

    gpus <= 1: [] (run in-process). One node: `python -m torch.distributed.run --standalone
    --nproc_per_node G` (torchrun; one process per GPU, oracle.flow_training does DDP).
    Several nodes (SLURM): `srun` starts one torchrun per node; they meet at `head_node`
    (the allocation's first node) by c10d rendezvous.
    """
    if gpus <= 1:
        return []
    if nodes <= 1:
        return [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", str(gpus)]
    if gpus % nodes:
        raise ConfigError(f"config key 'resources.oracle': gpus={gpus} must be a multiple of nodes={nodes}")
    if not head_node:
        raise ConfigError(
            f"resources.oracle.nodes={nodes}: a multi-node run needs a SLURM allocation (SLURM_JOB_NODELIST) "
            "to find the rendezvous node; run it with --profile slurm"
        )
    # the step asks for the node's GPUs explicitly: job steps do not inherit the job's GRES
    return ["srun", "--nodes", str(nodes), "--ntasks-per-node", "1", f"--gres=gpu:{gpus // nodes}",
            python, "-m", "torch.distributed.run",
            "--nnodes", str(nodes), "--nproc_per_node", str(gpus // nodes), "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"{head_node}:29500", "--rdzv_id", str(job_id or "oracle")]


def slurm_head_node() -> str:
    """The first host of this SLURM allocation (rendezvous of a multi-node torchrun)."""
    import subprocess

    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise ConfigError("resources.oracle.nodes > 1 needs a SLURM allocation (SLURM_JOB_NODELIST is unset); "
                          "run with --profile slurm")
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                           check=True).stdout.split()
    if not hosts:
        raise ConfigError(f"scontrol lists no hosts for SLURM_JOB_NODELIST={nodelist!r}")
    return hosts[0]


#: The variable that names, to the torchrun workers, the process that started torchrun (the
#: Snakemake job's script); `die_with_launcher` checks that it is still their ancestor.
LAUNCHER_PID_ENV = "ORACLE_LAUNCHER_PID"


@dataclasses.dataclass(frozen=True)
class Launch:
    """A command to start (argv) and the variables it adds to the inherited environment."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


def torchrun_launch(gpus: int, nodes: int, python: str, script: str, launcher_pid: int,
                    head_node: str | None = None, job_id: str | None = None) -> Launch:
    """How process `launcher_pid` starts `script` on `gpus` GPUs over `nodes` nodes
    (`oracle_launcher`; gpus > 1).

    One node: torchrun is the launcher's child and its workers learn the launcher's pid, so a
    worker that starts after the launcher died exits at once (`die_with_launcher`). Several
    nodes: torchrun runs under slurmstepd on every node, and SLURM ends the steps with the job.
    """
    if gpus <= 1:
        raise ValueError(f"torchrun_launch needs gpus > 1, got {gpus}")
    argv = (*oracle_launcher(gpus, nodes, python, head_node, job_id), script)
    return Launch(argv, {LAUNCHER_PID_ENV: str(launcher_pid)} if nodes <= 1 else {})


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@functools.cache
def _prctl() -> Callable[..., int]:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl


def _parent_of(pid: int) -> int:
    """The parent of `pid` from /proc (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return 0
    return int(text[text.rindex(")") + 2:].split()[1])


def _has_ancestor(pid: int) -> bool:
    p = os.getppid()
    while p > 1 and p != pid:
        p = _parent_of(p)
    return p == pid


def die_with_launcher(launcher_pid: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Have Linux send `sig` to this process when its parent dies, and send it now when
    `launcher_pid` (default: $ORACLE_LAUNCHER_PID, if set) is no longer among its ancestors.

    torchrun starts each worker in a session of its own, so a kill of the Snakemake job's
    process group misses the workers: without this they train on as orphans and write
    checkpoints beside the rerun that resumes from them. The ancestor check covers a launcher
    that died before the call (the kernel signals only deaths after it). False (nothing
    done) off Linux.
    """
    if not sys.platform.startswith("linux"):
        return False
    if _prctl()(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG): {os.strerror(err)}")
    if launcher_pid is None and os.environ.get(LAUNCHER_PID_ENV):
        launcher_pid = int(os.environ[LAUNCHER_PID_ENV])
    if launcher_pid is not None and not _has_ancestor(launcher_pid):
        os.kill(os.getpid(), sig)
    return True


def relaunch_under_torchrun(gpus: int, nodes: int, log_path: str) -> None:
    """Run the calling Snakemake script again under torchrun on `gpus` GPUs over `nodes` nodes
    (`torchrun_launch`; the SLURM head node is the rendezvous of a multi-node run) and wait;
    OracleError naming the log when it fails. torchrun (srun on several nodes) dies with this
    process, its workers with torchrun (`die_with_launcher`)."""
    import subprocess

    from oracle.errors import OracleError

    head = slurm_head_node() if nodes > 1 else None
    me = os.getpid()
    # sys.argv[0] is Snakemake's copy of the script with the `snakemake` object in its preamble
    # (the script's __file__ names the original, which lacks it)
    launch = torchrun_launch(gpus, nodes, sys.executable, os.path.abspath(sys.argv[0]), me, head,
                             os.environ.get("SLURM_JOB_ID"))
    if sys.platform.startswith("linux"):
        _prctl()  # load libc now: between fork and exec the child only calls into it
    print("launching:", " ".join(launch.argv), flush=True)
    rc = subprocess.run(launch.argv, check=False, env={**os.environ, **launch.env}, stdout=sys.stdout,
                        stderr=subprocess.STDOUT, preexec_fn=functools.partial(die_with_launcher, me)).returncode
    if rc != 0:
        raise OracleError(f"flow training on {gpus} GPUs failed (exit status {rc}); see {log_path}")
