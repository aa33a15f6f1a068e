"""Rule `oracle_train`'s job (oracle.workflow.jobs.oracle_train): where it trains (inline, relaunched
under torchrun, or as a torchrun worker) and what its body writes. The multi-process launch
itself, killed and resumed, is tests/test_flow_launcher.py."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from oracle.workflow.jobs import oracle_train as flow_job


def test_launch_mode():
    assert flow_job.launch_mode(0, {}) == flow_job.launch_mode(1, {}) == flow_job.INLINE
    assert flow_job.launch_mode(2, {}) == flow_job.RELAUNCH
    assert flow_job.launch_mode(2, {"LOCAL_RANK": "1"}) == flow_job.launch_mode(1, {"LOCAL_RANK": "0"}) == flow_job.WORKER


def _job(tmp_path: Path, gpus: int, threads: int = 4) -> types.SimpleNamespace:
    resources = {"gres": f"gpu:{gpus}"} if gpus else {}
    return types.SimpleNamespace(resources=resources, log=[str(tmp_path / "train.log")], threads=threads)


@pytest.mark.parametrize("gpus, env, expected", [
    (0, {}, ["run_job server=False log=True threads=4"]),
    (2, {}, ["script_job", "relaunch 2 1"]),
    (2, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, ["die_with_launcher", "run_job server=False log=None threads=2"]),
])
def test_the_job_trains_inline_relaunches_or_runs_as_a_worker(tmp_path, monkeypatch, gpus, env, expected):
    calls = []
    for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(flow_job.res, "relaunch_under_torchrun", lambda g, n, log: calls.append(f"relaunch {g} {n}"))
    monkeypatch.setattr(flow_job.res, "die_with_launcher", lambda: calls.append("die_with_launcher"))

    class ScriptJob:
        def __init__(self, sm):
            calls.append("script_job")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def run_job(sm, main, *, server=True, log_path=True, threads=None):
        calls.append(f"run_job server={server} log={log_path} threads={threads}")

    monkeypatch.setattr(flow_job, "script_job", ScriptJob)
    monkeypatch.setattr(flow_job, "run_job", run_job)
    flow_job.train_oracle(_job(tmp_path, gpus))
    assert calls == expected


def test_the_body_trains_writes_the_flow_and_its_log_and_drops_the_resume_state(tmp_path, monkeypatch):
    import sys

    from oracle.flow_checkpoints import load_flow
    from oracle.io.images import write_images_h5

    sys.path.insert(0, str(Path(__file__).parent))
    from test_flow_training import toy_data

    monkeypatch.delenv("RANK", raising=False)
    images, labels = toy_data()
    write_images_h5(tmp_path / "train.h5", images.numpy(), labels.numpy(), ["top", "bottom"])
    oracle = {"per_class": False,
              "flow": {"patch_size": 2, "channels": 32, "num_blocks": 2, "layers_per_block": 1, "head_dim": 16,
                       "nvp": True},
              "train": {"steps": 3, "epochs": None, "batch_size": 8, "lr": 2e-3, "weight_decay": 1e-4,
                        "warmup_steps": 1, "grad_clip": 1.0, "ema_decay": None, "noise_std": 0.05,
                        "label_dropout": 0.1, "checkpoint_every": 2}}
    sm = types.SimpleNamespace(
        input=types.SimpleNamespace(train=str(tmp_path / "train.h5")),
        output=types.SimpleNamespace(flow=str(tmp_path / "oracle" / "flow.pt"),
                                     train_log=str(tmp_path / "oracle" / "train_log.jsonl")),
        params=types.SimpleNamespace(oracle=oracle, seed=7, device="cpu", ckpt_dir=str(tmp_path / "oracle" / "ckpt")))
    record = flow_job.train(sm, gpus=0, nodes=1)
    assert record == {"extra": {"steps": 3, "gpus": 0, "nodes": 1}}
    model, spec = load_flow(sm.output.flow)
    assert spec["num_classes"] == 2 and spec["img_size"] == 4 and spec["channels"] == 32
    log = [json.loads(line) for line in Path(sm.output.train_log).read_text().splitlines()]
    assert log and log[-1]["step"] == 3
    assert not Path(sm.params.ckpt_dir).exists()
