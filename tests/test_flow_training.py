"""Flow training: learning happens, kill-and-resume is bit-identical, EMA and label dropout work."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from oracle.errors import ConfigError, DataError
from oracle.flow_training import FlowTrainConfig, batch_indices, lr_factor, train_flow
from oracle.flow_checkpoints import build_flow



SPEC = dict(in_channels=1, img_size=4, patch_size=2, channels=32, num_blocks=2,
            layers_per_block=1, head_dim=16)


def toy_data(n: int = 48, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two classes of 1x4x4 uint8 images: bright top half vs bright bottom half."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    base = torch.full((n, 1, 4, 4), 60.0)
    base[labels == 0, :, :2] = 200.0
    base[labels == 1, :, 2:] = 200.0
    img = base + 25 * torch.randn(n, 1, 4, 4, generator=g)
    return img.clamp(0, 255).round().to(torch.uint8), labels


def cfg(**kw) -> FlowTrainConfig:
    base = dict(steps=12, batch_size=8, lr=2e-3, weight_decay=1e-4, warmup_steps=2, grad_clip=1.0,
                ema_decay=None, noise_std=0.05, label_dropout=0.1, checkpoint_every=4, seed=3,
                log_every=1)
    return FlowTrainConfig(**{**base, **kw})


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class Killed(RuntimeError):
    pass


def kill_at(step: int):
    def hook(info: dict) -> None:
        if info["step"] == step:
            raise Killed(f"simulated kill after step {step}")
    return hook


def state_equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_loss_decreases_and_log(tmp_path):
    images, labels = toy_data()
    model = build_flow(dict(SPEC, num_classes=2), seed=0)
    c = cfg(steps=80, batch_size=16, lr=3e-3, warmup_steps=5, checkpoint_every=40, log_every=5)
    out = train_flow(model, images, labels, c, tmp_path / "ckpt", "cpu", tmp_path / "log.jsonl")
    assert out is model and not model.training
    log = read_log(tmp_path / "log.jsonl")
    assert [r["step"] for r in log] == list(range(5, 81, 5))
    assert all(set(r) >= {"step", "loss", "nll", "lr", "wall_s"} for r in log)
    assert all(abs(r["nll"] - r["loss"] - 0.5 * math.log(2 * math.pi)) < 1e-12 for r in log)
    first = sum(r["loss"] for r in log[:2]) / 2
    last = sum(r["loss"] for r in log[-3:]) / 3
    assert last < first - 0.3, (first, last)
    # the logged lr follows the schedule: lr of the step that was just taken
    assert abs(log[0]["lr"] - c.lr * lr_factor(4, c)) < 1e-12
    # the trained flow has learned class structure: its Bayes classifier beats chance clearly
    x = images.float() / 127.5 - 1
    ll = model.log_prob_classes(x, torch.arange(2))
    assert (ll.argmax(1) == labels).float().mean() > 0.7


@pytest.mark.parametrize("kill_step", [10, 2])
@pytest.mark.parametrize("mode", ["conditional_ema", "per_class", "unconditional"])
def test_kill_and_resume_is_bit_identical(tmp_path, mode, kill_step):
    images, labels = toy_data()
    if mode == "per_class":
        spec, c = dict(SPEC, num_classes=2, per_class=True), cfg(ema_decay=0.9)
    elif mode == "conditional_ema":
        spec, c = dict(SPEC, num_classes=2), cfg(ema_decay=0.8, label_dropout=0.3)
    else:
        spec, c = dict(SPEC), cfg()
        labels_used = None
    labels_used = None if mode == "unconditional" else labels

    ref = train_flow(build_flow(spec, seed=1), images, labels_used, c, tmp_path / "a", "cpu",
                     tmp_path / "a.jsonl")

    # the class whose training is killed: per-class runs are killed in class 1's run
    kill_class = 1 if mode == "per_class" else None

    def hook(info):
        if info["class"] == kill_class:
            kill_at(kill_step)(info)

    with pytest.raises(Killed):
        train_flow(build_flow(spec, seed=1), images, labels_used, c, tmp_path / "b", "cpu",
                   tmp_path / "b.jsonl", on_step=hook)
    ckpt = tmp_path / "b" / ("class0001" if mode == "per_class" else "") / "last.pt"
    if kill_step >= 4:
        assert torch.load(ckpt, weights_only=True)["step"] == 8  # last periodic checkpoint
    else:
        assert not ckpt.exists()
    # a restarted process builds the model from scratch, then resumes from the checkpoint
    resumed = train_flow(build_flow(spec, seed=1), images, labels_used, c, tmp_path / "b", "cpu",
                         tmp_path / "b.jsonl")
    assert state_equal(ref, resumed)
    key = lambda r: (r.get("class"), r["step"], r["loss"], r["lr"])  # noqa: E731
    assert [key(r) for r in read_log(tmp_path / "a.jsonl")] == [key(r) for r in read_log(tmp_path / "b.jsonl")]
    # running again after completion is a no-op returning the same weights
    again = train_flow(build_flow(spec, seed=5), images, labels_used, c, tmp_path / "b", "cpu")
    assert state_equal(ref, again)


@pytest.mark.parametrize("change", ["lr", "steps", "data", "head_dim", "channels", "truncated"])
def test_stale_or_damaged_resume_state_is_discarded_and_the_result_is_a_fresh_runs(tmp_path, change, capsys):
    """Resume state written for another run is never used: a changed setting that keeps every
    weight shape (the learning rate; head_dim through the caller's resume key), more steps or
    wider layers (these used to stop the job: a refusal to resume, a size-mismatch traceback),
    changed training data, or a checkpoint truncated by a kill. The result equals a fresh
    run's bit for bit, and the log says in one line what was discarded."""
    images, labels = toy_data()
    spec = dict(SPEC, num_classes=2)
    with pytest.raises(Killed):
        train_flow(build_flow(spec, seed=0), images, labels, cfg(), tmp_path / "ckpt", "cpu", on_step=kill_at(5),
                   resume_key={"spec": spec})
    ckpt = tmp_path / "ckpt" / "last.pt"
    assert ckpt.exists()
    c, x, y, new_spec = cfg(), images, labels, spec
    if change == "lr":
        c = cfg(lr=1e-3)
    elif change == "data":
        x, y = images.flip(0), labels.flip(0)
    elif change == "steps":
        c = cfg(steps=18)
    elif change == "head_dim":
        new_spec = dict(spec, head_dim=8)  # same parameter shapes, another model
    elif change == "channels":
        new_spec = dict(spec, channels=48)
    else:
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    capsys.readouterr()
    got = train_flow(build_flow(new_spec, seed=0), x, y, c, tmp_path / "ckpt", "cpu", resume_key={"spec": new_spec})
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("discarding")]
    assert len(lines) == 1 and str(ckpt) in lines[0], out
    assert ("unreadable" in lines[0]) if change == "truncated" else ("another run" in lines[0])
    fresh = train_flow(build_flow(new_spec, seed=0), x, y, c, tmp_path / "fresh", "cpu", resume_key={"spec": new_spec})
    assert state_equal(got, fresh)


def test_resume_across_cadence_changes(tmp_path):
    """Log and checkpoint cadence do not change the result, so a resume may change them."""
    images, labels = toy_data()
    spec = dict(SPEC, num_classes=2)
    ref = train_flow(build_flow(spec, seed=0), images, labels, cfg(), tmp_path / "ref", "cpu")
    with pytest.raises(Killed):
        train_flow(build_flow(spec, seed=0), images, labels, cfg(), tmp_path / "b", "cpu", on_step=kill_at(9))
    got = train_flow(build_flow(spec, seed=0), images, labels, cfg(log_every=3, checkpoint_every=5), tmp_path / "b",
                     "cpu")
    assert state_equal(ref, got)


def test_ema_closed_form(tmp_path):
    """One step: EMA = d * w0 + (1 - d) * w1, with w1 the weights of the EMA-free run."""
    images, labels = toy_data()
    spec = dict(SPEC, num_classes=2)
    w0 = build_flow(spec, seed=2).state_dict()
    plain = train_flow(build_flow(spec, seed=2), images, labels, cfg(steps=1), tmp_path / "p", "cpu")
    d = 0.7
    ema = train_flow(build_flow(spec, seed=2), images, labels, cfg(steps=1, ema_decay=d), tmp_path / "e", "cpu")
    w1, we = plain.state_dict(), ema.state_dict()
    moved = 0
    for k in w0:
        # float32 lerp vs float32 arithmetic: one ulp apart where a kernel fuses a multiply-add
        assert torch.allclose(we[k], d * w0[k] + (1 - d) * w1[k], atol=1e-6, rtol=1e-6), k
        moved += int(not torch.equal(w0[k], w1[k]))
    assert moved > 10
    # the raw (non-EMA) weights are kept in the checkpoint and equal the EMA-free run
    raw = torch.load(tmp_path / "e" / "last.pt", weights_only=True)["model"]
    assert all(torch.equal(raw[k], w1[k]) for k in w1)


@pytest.mark.parametrize("p", [1.0, 0.0])
def test_label_dropout(tmp_path, p):
    """With every label dropped, only the mean class embedding is trained: all class rows move
    by the same amount (AdamW sees identical gradients per row; weight decay off)."""
    images, labels = toy_data()
    model = build_flow(dict(SPEC, num_classes=3), seed=0)
    init = [b.class_embed.detach().clone() for b in model.blocks]
    labels3 = labels.clone()
    labels3[::3] = 2
    train_flow(model, images, labels3, cfg(steps=6, weight_decay=0.0, label_dropout=p), tmp_path, "cpu")
    for b, e0 in zip(model.blocks, init):
        delta = b.class_embed.detach() - e0
        scale = float(delta.abs().max())
        assert scale > 0
        # (e0 - u) - e0 rounds differently per row, hence a tolerance far below the update size
        spread = float((delta - delta.mean(0)).abs().max())
        assert (spread < 1e-5 * scale) == (p == 1.0), (spread, scale)


def test_volume_preserving_variant_tracks_prior_variance(tmp_path):
    images, _ = toy_data()
    model = build_flow(dict(SPEC, nvp=False), seed=0)
    train_flow(model, images, None, cfg(steps=5), tmp_path, "cpu")
    assert not torch.equal(model.var, torch.ones_like(model.var))
    # sampling and density use the learned variance consistently: z of a sample is tau*sqrt(var)*eps
    x = model.sample(None, n=3, generator=torch.Generator().manual_seed(0))
    eps = torch.randn(3, *model.noise_shape, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(model(x)[0], eps * model.var.sqrt(), atol=1e-4)


def test_schedule_and_batches():
    c = cfg(steps=20, warmup_steps=4, lr=1e-3, min_lr=1e-5)
    assert [lr_factor(s, c) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_factor(19, c) == pytest.approx(1e-2)  # min_lr / lr at the last step
    mid = 4 + (19 - 4) / 2
    assert lr_factor(int(mid), c) == pytest.approx(0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * (int(mid) - 4) / 15)))
    # batches: each epoch is a permutation; N not a multiple of the batch size; deterministic
    n, b = 10, 4
    stream = torch.cat([batch_indices(n, s, b, seed=1) for s in range(5)])  # 20 = 2 epochs
    assert sorted(stream[:10].tolist()) == list(range(10)) == sorted(stream[10:].tolist())
    assert not torch.equal(stream[:10], stream[10:])
    assert torch.equal(batch_indices(n, 3, b, seed=1), stream[12:16])
    assert not torch.equal(batch_indices(n, 0, b, seed=2), stream[:4])
    assert batch_indices(3, 0, 7, seed=0).numel() == 7  # batch larger than the dataset


def test_bad_inputs(tmp_path):
    images, labels = toy_data()
    cond = build_flow(dict(SPEC, num_classes=2), seed=0)
    with pytest.raises(DataError, match="uint8"):
        train_flow(cond, images.float(), labels, cfg(), tmp_path, "cpu")
    with pytest.raises(DataError, match="labels must lie"):
        train_flow(cond, images, labels + 1, cfg(), tmp_path, "cpu")
    with pytest.raises(DataError, match="labels are required"):
        train_flow(cond, images, None, cfg(), tmp_path, "cpu")
    with pytest.raises(DataError, match="expects"):
        train_flow(cond, images[:, :, :2], labels, cfg(), tmp_path, "cpu")
    with pytest.raises(ConfigError, match="label_dropout"):
        train_flow(cond, images, labels, cfg(label_dropout=2.0), tmp_path, "cpu")
    with pytest.raises(ConfigError, match="unknown key"):
        FlowTrainConfig.from_dict({"stepz": 3})
    pc = build_flow(dict(SPEC, num_classes=3, per_class=True), seed=0)
    with pytest.raises(DataError, match="class 2 has no training images"):
        train_flow(pc, images, labels, cfg(), tmp_path / "pc", "cpu")
    assert not list(tmp_path.rglob("last.pt"))


DDP_SCRIPT = """
import sys, torch
from oracle.flow_training import FlowTrainConfig, train_flow
from oracle.flow_checkpoints import build_flow
sys.path.insert(0, {tests!r})
from test_flow_training import SPEC, cfg, toy_data
images, labels = toy_data()
model = build_flow(dict(SPEC, num_classes=2), seed=1)
model = train_flow(model, images, labels, cfg(ema_decay=0.8), {ckpt!r}, "cpu", {log!r})
if torch.distributed.get_rank() == 0:
    torch.save(model.state_dict(), {out!r})
torch.distributed.destroy_process_group()
"""


@pytest.mark.slow
def test_torchrun_two_ranks_matches_single_process(tmp_path):
    """Two gloo ranks, each on half of every global batch, reach the single-process weights
    (up to float summation order), and only rank 0 writes files."""
    torchrun = Path(sys.executable).parent / "torchrun"
    if not torchrun.exists():
        pytest.skip("torchrun not installed next to the interpreter")
    images, labels = toy_data()
    ref = train_flow(build_flow(dict(SPEC, num_classes=2), seed=1), images, labels, cfg(ema_decay=0.8),
                     tmp_path / "single", "cpu")
    script = tmp_path / "ddp.py"
    out = tmp_path / "ddp_state.pt"
    script.write_text(textwrap.dedent(DDP_SCRIPT.format(
        tests=str(Path(__file__).parent), ckpt=str(tmp_path / "ddp"), log=str(tmp_path / "ddp.jsonl"),
        out=str(out))))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([str(torchrun), "--standalone", "--nproc_per_node=2", str(script)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sd = torch.load(out, weights_only=True)
    for k, v in ref.state_dict().items():
        assert torch.allclose(sd[k], v, atol=1e-5, rtol=1e-4), k
    steps = [r["step"] for r in read_log(tmp_path / "ddp.jsonl")]
    assert steps == list(range(1, 13))  # one line per step: rank 1 wrote nothing
    shutil.rmtree(tmp_path / "ddp")
