"""Rule `oracle_train`: train the flow(s) of the oracle world -> oracle/flow.pt + train_log.jsonl.

One GPU or CPU: trains in this process. resources.oracle.gpus > 1: this script relaunches
itself (this very file, with Snakemake's preamble) under torchrun, one process per GPU, and
oracle.flow_training runs DDP; with several nodes, srun starts one torchrun per node. All
ranks log to the rule's log; rank 0 writes the outputs. Training checkpoints to oracle/ckpt/
(last.pt and the running train_log.jsonl) and resumes from there when the job is rerun after
being killed; the outputs appear only at the end.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from oracle.workflow import config as oc
from oracle.workflow import resources as res
from oracle.workflow.jobs import record_job, script_job
from oracle.io.real_data import read_images_h5
from oracle.errors import OracleError
from oracle.flow_training import FlowTrainConfig, train_flow
from oracle.flows import build_flow, save_flow
from oracle.io.atomic import atomic_output

TRAIN_KEYS = ("batch_size", "lr", "weight_decay", "warmup_steps", "grad_clip", "ema_decay", "noise_std",
              "label_dropout", "checkpoint_every")

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
gpus, nodes = res.gpus_from_resources(sm.resources)
under_torchrun = "LOCAL_RANK" in os.environ

if gpus > 1 and not under_torchrun:
    with script_job(sm.log[0]):
        head = res.slurm_head_node() if nodes > 1 else None
        cmd = res.oracle_launcher(gpus, nodes, sys.executable, head, os.environ.get("SLURM_JOB_ID"))
        # sys.argv[0] is Snakemake's copy of this script with the `snakemake` object in its
        # preamble (__file__ names the original, which lacks it)
        cmd.append(os.path.abspath(sys.argv[0]))
        print("launching:", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, stdout=sys.stdout, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            raise OracleError(f"flow training on {gpus} GPUs failed (exit status {rc}); see {sm.log[0]}")
    sys.exit(0)

rank = int(os.environ.get("RANK", "0"))
local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
torch.set_num_threads(max(1, sm.threads // local_world))

with script_job(None if under_torchrun else sm.log[0]) as started:
    cfg, seed = sm.params.oracle, int(sm.params.seed)
    data = read_images_h5(sm.input.train)
    images, labels, names = data["images"], data["labels"], data["class_names"]
    _, c, h, w = images.shape
    spec = oc.flow_spec({"oracle": cfg}, c, h, len(names))
    steps = oc.train_steps(cfg["train"], len(images))
    tcfg = FlowTrainConfig.from_dict({**{k: cfg["train"][k] for k in TRAIN_KEYS}, "steps": steps, "seed": seed})
    print(f"rank {rank}: {len(images)} images {[c, h, w]}, {len(names)} classes; {steps} steps; spec {spec}", flush=True)
    ckpt_dir = Path(sm.params.ckpt_dir)
    running_log = ckpt_dir / "train_log.jsonl"
    model = build_flow(spec, seed=seed)
    model = train_flow(model, images, labels, tcfg, ckpt_dir, device=sm.params.device, log_path=running_log)
    if rank == 0:
        save_flow(sm.output.flow, model.cpu(), spec,
                  extra={"class_names": names, "train": tcfg.as_dict(), "seed": seed, "train_images": len(images)})
        with atomic_output(sm.output.train_log) as tmp:
            shutil.copyfile(running_log, tmp)
        last = json.loads(running_log.read_text().splitlines()[-1])
        print(f"done: step {last.get('step')}, loss {last.get('loss')} nats/dim")
        record_job(sm, started, extra={"steps": steps, "gpus": gpus, "nodes": nodes})
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
