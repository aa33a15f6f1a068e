"""The job of rule `oracle_train`: train the flow(s) of the oracle world -> oracle/flow.pt and
train_log.jsonl. ``scripts/oracle_train.py`` is one call, ``train_oracle(snakemake)``.

Where it runs (`launch_mode`): with one GPU or none it trains in the job's own process; with
``resources.oracle.gpus`` > 1 the job relaunches its script under torchrun, one worker per GPU,
and `oracle.flow_training` runs DDP, rank 0 writing the outputs. torchrun dies with the job, and
each worker with torchrun (`oracle.workflow.plan.resources.die_with_launcher`), so a killed job leaves
no worker training beside its rerun. It runs inline, never in the local job server: the flow
trains for minutes with its own thread count, so the server's imports would save it nothing.

Training checkpoints to oracle/ckpt/ and resumes from there when the job is rerun after being
killed, if the checkpoint was written for this flow spec, training config, data, seed and code
(else it is discarded, one line in the log); ckpt/ is removed once the outputs exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from oracle.workflow.plan import resources as res
from oracle.workflow.jobs import run_job, script_job

#: What `launch_mode` decides: relaunch the script under torchrun, run as one of its workers,
#: or train in this process.
RELAUNCH, WORKER, INLINE = "relaunch", "worker", "inline"


def launch_mode(gpus: int, environ: Mapping[str, str]) -> str:
    """`WORKER` under torchrun (it sets ``LOCAL_RANK``), else `RELAUNCH` for more than one
    GPU, else `INLINE`."""
    if "LOCAL_RANK" in environ:
        return WORKER
    return RELAUNCH if gpus > 1 else INLINE


def train_oracle(sm: Any) -> None:
    """Rule `oracle_train`'s entry point (`sm`: the script's ``snakemake`` object)."""
    gpus, nodes = res.gpus_from_resources(sm.resources)
    mode = launch_mode(gpus, os.environ)
    if mode == RELAUNCH:
        with script_job(sm):
            res.relaunch_under_torchrun(gpus, nodes, sm.log[0])
        return
    if mode == WORKER:  # a worker must not outlive torchrun, which starts it in a session of its own
        res.die_with_launcher()
    # a worker's output goes to torchrun, which writes the job's log
    run_job(sm, lambda job: train(job, gpus, nodes), server=False, log_path=None if mode == WORKER else True,
            threads=max(1, sm.threads // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))


def train(sm: Any, gpus: int, nodes: int) -> dict:
    """Train the flow of ``sm.params.oracle`` on ``sm.input.train``; rank 0 writes
    ``sm.output.flow`` and ``sm.output.train_log`` and removes the resume state. Returns the
    keyword arguments of the job's provenance record."""
    import shutil
    from pathlib import Path

    import torch

    from oracle.flow_checkpoints import build_flow, save_flow
    from oracle.flow_training import FlowTrainConfig, train_flow
    from oracle.io.atomic import atomic_output
    from oracle.io.images import read_images_h5
    from oracle.workflow import plan

    rank = int(os.environ.get("RANK", "0"))
    cfg, seed = sm.params.oracle, int(sm.params.seed)
    data = read_images_h5(sm.input.train)
    images, labels, names = data["images"], data["labels"], data["class_names"]
    _, c, h, w = images.shape
    spec = plan.flow_spec({"oracle": cfg}, c, h, len(names))
    tcfg = FlowTrainConfig.from_dict(plan.flow_train_settings(cfg["train"], len(images), seed))
    print(f"rank {rank}: {len(images)} images {[c, h, w]}, {len(names)} classes; {tcfg.steps} steps; spec {spec}")
    ckpt_dir = Path(sm.params.ckpt_dir)
    running_log = ckpt_dir / "train_log.jsonl"
    model = build_flow(spec, seed=seed)
    model = train_flow(model, images, labels, tcfg, ckpt_dir, device=sm.params.device, log_path=running_log,
                       resume_key={"spec": spec, "seed": seed})
    if rank == 0:
        save_flow(sm.output.flow, model.cpu(), spec,
                  extra={"class_names": names, "train": tcfg.as_dict(), "seed": seed, "train_images": len(images)})
        with atomic_output(sm.output.train_log) as tmp:
            shutil.copyfile(running_log, tmp)
        print(f"done: {running_log.read_text().splitlines()[-1]}")
        shutil.rmtree(ckpt_dir)  # resume state of a finished job is only a trap for the next one
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return dict(extra={"steps": tcfg.steps, "gpus": gpus, "nodes": nodes})  # recorded by rank 0 only
