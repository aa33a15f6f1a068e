"""Rule `oracle_train`: train the flow(s) of the oracle world -> oracle/flow.pt + train_log.jsonl.

One GPU or CPU: trains in this process; resources.oracle.gpus > 1: this script relaunches itself
under torchrun and oracle.flow_training runs DDP; rank 0 writes the outputs. torchrun dies with
this job, and its workers with torchrun (`resources.die_with_launcher`), so a killed job leaves
no worker training on beside its rerun.
Training checkpoints to oracle/ckpt/ and resumes from there when the job is rerun after being
killed, if the checkpoint was written for this flow spec, training config, data, seed and code
(else it is discarded, one line in the log); ckpt/ is removed once the outputs exist.
"""

import os

from oracle.workflow import resources as res
from oracle.workflow.jobs import run_job, script_job


def main(sm):
    import shutil
    from pathlib import Path

    import torch

    from oracle.workflow import plan
    from oracle.io.images import read_images_h5
    from oracle.flow_training import FlowTrainConfig, train_flow
    from oracle.flow_checkpoints import build_flow, save_flow
    from oracle.io.atomic import atomic_output

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


sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
gpus, nodes = res.gpus_from_resources(sm.resources)
under_torchrun = "LOCAL_RANK" in os.environ
if under_torchrun:  # a worker must not outlive torchrun, which starts it in a session of its own
    res.die_with_launcher()
if gpus > 1 and not under_torchrun:  # start this script again under torchrun, one process per GPU
    with script_job(sm):
        res.relaunch_under_torchrun(gpus, nodes, sm.log[0])
else:
    # inline, not in the job server: the flow trains for minutes with its own thread count (and
    # relaunches itself under torchrun), so the server's imports would save it nothing
    run_job(sm, main, server=False, log_path=None if under_torchrun else True,
            threads=max(1, sm.threads // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
