"""Maximum-likelihood training of TarFlow oracles, with exact checkpoint/resume.

The objective is the release's: 0.5 * mean(z^2) - mean(logdet), in nats per dimension
(the negative log-likelihood per dim of dequantized data, minus the constant 0.5*log(2*pi)).

Determinism: the batch of step s, its dequantization noise and its label-dropout mask are
functions of (seed, class, s) alone. A fresh generator is seeded per step from
`numpy.random.SeedSequence`, and each epoch's shuffle from (seed, class, epoch). A run killed
at any point and resumed from `last.pt` therefore reaches bit-identical weights on CPU; the
checkpoint also carries the global torch (and CUDA) RNG states for any code that draws from
them. The global batch is the same for any world size; under torchrun each rank takes a
contiguous slice of it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from oracle import devices
from oracle.devices import adamw, autocast, pick_device
from oracle.io.atomic import atomic_output, torch_save_atomic
from oracle.errors import ConfigError, DataError
from oracle.flows import PerClassFlows, TarFlow
from oracle.progress import Progress
from oracle.io.resume import array_sha256, canonical_key, load_resume_state, source_sha256

__all__ = ["FlowTrainConfig", "train_flow", "lr_factor", "batch_indices", "CHECKPOINT_NAME"]

CHECKPOINT_NAME = "last.pt"
_CKPT_FORMAT = "oracle-flow-train"
# Keys that may change between a run and its resumption without changing the result.
_RESUME_FREE = {"checkpoint_every", "log_every"}


@dataclasses.dataclass
class FlowTrainConfig:
    """Hyper-parameters of one flow training run (per flow, in per-class mode).

    steps: optimizer steps. batch_size: images per step, across all ranks.
    lr: peak learning rate; linear warmup over `warmup_steps`, then cosine to `min_lr`.
    weight_decay, betas: AdamW (release: 1e-4, (0.9, 0.95)).
    grad_clip: max global gradient norm; None or 0 = off.
    ema_decay: exponential moving average of the weights (None = off); the returned model
        carries the EMA weights when on.
    noise_std: Gaussian dequantization sigma in model units ([-1, 1] images).
    label_dropout: probability that a label becomes -1 (mean class embedding); conditional
        flows only.
    checkpoint_every: steps between writes of `last.pt` (always written at the end).
    seed: the run's seed. log_every: steps between training-log lines.
    """

    steps: int = 1000
    batch_size: int = 64
    lr: float = 1e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 0
    grad_clip: float | None = 1.0
    ema_decay: float | None = None
    noise_std: float = 0.05
    label_dropout: float = 0.1
    checkpoint_every: int = 500
    seed: int = 0
    log_every: int = 10
    min_lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.95)

    @classmethod
    def from_dict(cls, d: dict) -> FlowTrainConfig:
        """Build from a config mapping; unknown keys raise ConfigError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"flow training config: unknown key(s) {unknown}; expected {sorted(names)}")
        d = dict(d)
        if "betas" in d:
            d["betas"] = tuple(d["betas"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        def need(ok: bool, key: str, what: str) -> None:
            if not ok:
                raise ConfigError(f"flow training config: {key}={getattr(self, key)!r}: expected {what}")

        for key in ("steps", "batch_size", "checkpoint_every", "log_every"):
            need(isinstance(getattr(self, key), int) and getattr(self, key) >= 1, key, "an integer >= 1")
        need(isinstance(self.warmup_steps, int) and self.warmup_steps >= 0, "warmup_steps", "an integer >= 0")
        need(isinstance(self.seed, int) and self.seed >= 0, "seed", "an integer >= 0")
        need(self.lr > 0, "lr", "> 0")
        need(0 <= self.min_lr <= self.lr, "min_lr", "in [0, lr]")
        need(self.weight_decay >= 0, "weight_decay", ">= 0")
        need(self.grad_clip is None or self.grad_clip >= 0, "grad_clip", "None or >= 0")
        need(self.ema_decay is None or 0 <= self.ema_decay < 1, "ema_decay", "None or in [0, 1)")
        need(self.noise_std >= 0, "noise_std", ">= 0")
        need(0 <= self.label_dropout <= 1, "label_dropout", "in [0, 1]")
        need(len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas", "two numbers in [0, 1)")

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d


# --------------------------------------------------------------------------------------------
# Pure helpers (deterministic functions of the config)
# --------------------------------------------------------------------------------------------


def lr_factor(step: int, cfg: FlowTrainConfig) -> float:
    """Multiplier of cfg.lr at (0-based) optimizer step `step`: linear warmup, then cosine
    decay from 1 to min_lr/lr at the last step."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(cfg.steps - cfg.warmup_steps - 1, 1)
    progress = min((step - cfg.warmup_steps) / span, 1.0)
    floor = cfg.min_lr / cfg.lr
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def _derive_seed(*words: int) -> int:
    """A 63-bit seed from integers, well mixed (SeedSequence), for torch.Generator.manual_seed."""
    state = np.random.SeedSequence([int(w) for w in words]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


_STREAM_SHUFFLE, _STREAM_STEP = 0, 1


def _class_word(class_index: int | None) -> int:
    """0 for a single flow, k + 1 for class k of per-class flows (seed words are >= 0)."""
    return 0 if class_index is None else class_index + 1


class _EpochShuffler:
    """Global sample order: concatenated per-epoch permutations seeded by (seed, class, epoch)."""

    def __init__(self, n: int, seed: int, class_word: int):
        self.n, self.seed, self.class_word = n, seed, class_word
        self._cache: dict[int, Tensor] = {}

    def perm(self, epoch: int) -> Tensor:
        if epoch not in self._cache:
            if len(self._cache) > 2:
                self._cache.clear()
            g = torch.Generator().manual_seed(_derive_seed(self.seed, self.class_word, _STREAM_SHUFFLE, epoch))
            self._cache[epoch] = torch.randperm(self.n, generator=g)
        return self._cache[epoch]

    def indices(self, step: int, batch: int) -> Tensor:
        start = step * batch
        out, pos = [], start
        while pos < start + batch:
            epoch, offset = divmod(pos, self.n)
            take = min(self.n - offset, start + batch - pos)
            out.append(self.perm(epoch)[offset : offset + take])
            pos += take
        return torch.cat(out)


def batch_indices(n: int, step: int, batch_size: int, seed: int, class_index: int | None = None) -> Tensor:
    """The dataset rows of global step `step` (LongTensor[batch_size]); epochs reshuffle."""
    return _EpochShuffler(n, seed, _class_word(class_index)).indices(step, batch_size)


# --------------------------------------------------------------------------------------------
# Distributed context
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Dist:
    world: int = 1
    rank: int = 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def mean(self, t: Tensor) -> Tensor:
        if self.active:
            t = t.clone()
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
            t = t / self.world
        return t


def _setup_distributed(device: torch.device) -> tuple[_Dist, torch.device]:
    """torchrun (WORLD_SIZE > 1): init the process group once (nccl on CUDA, gloo on CPU)
    and pin this rank's GPU. Otherwise a single process. The group is left open for the caller."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return _Dist(), device
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank()
    print(f"rank {rank} of {dist.get_world_size()}: joined the {dist.get_backend()} process group", flush=True)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank % torch.cuda.device_count())))
        torch.cuda.set_device(device)
    return _Dist(dist.get_world_size(), rank), device


# --------------------------------------------------------------------------------------------
# Files: checkpoint and JSON-lines log
# --------------------------------------------------------------------------------------------


def _trim_log(log_path: Path, class_index: int | None, keep_through: int) -> None:
    """Drop this run's lines after the resumed step (and torn lines), so the log of a resumed
    run lists each step once, as an uninterrupted run would."""
    if not log_path.exists():
        return
    kept = []
    for line in log_path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a kill
        if rec.get("class") == class_index and rec.get("step", 0) > keep_through:
            continue
        kept.append(line)
    with atomic_output(log_path) as tmp:
        tmp.write_text("".join(k + "\n" for k in kept))


def _append_log(log_path: Path, record: dict) -> None:
    with open(log_path, "a") as f:
        f.write(json.dumps(record) + "\n")  # one write per line
        f.flush()


# --------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------


def _check_data(model: TarFlow | PerClassFlows, images: Any, labels: Any) -> tuple[Tensor, Tensor | None]:
    images = torch.as_tensor(images)
    if images.dtype != torch.uint8 or images.dim() != 4:
        raise DataError(f"images: expected uint8 [N, C, H, W], got {images.dtype} {tuple(images.shape)}")
    if tuple(images.shape[1:]) != tuple(model.event_shape):
        raise DataError(f"images have shape [N, {', '.join(map(str, images.shape[1:]))}] but the flow "
                        f"expects [N, {', '.join(map(str, model.event_shape))}]")
    if images.shape[0] == 0:
        raise DataError("images: the training set is empty")
    conditional = isinstance(model, PerClassFlows) or model.num_classes > 0
    if not conditional:
        return images, None
    if labels is None:
        raise DataError(f"labels are required to train a class-conditional flow (num_classes={model.num_classes})")
    labels = torch.as_tensor(labels).long().reshape(-1)
    if labels.numel() != images.shape[0]:
        raise DataError(f"labels has {labels.numel()} entries for {images.shape[0]} images")
    if int(labels.min()) < 0 or int(labels.max()) >= model.num_classes:
        raise DataError(f"labels must lie in [0, {model.num_classes - 1}]; got "
                        f"[{int(labels.min())}, {int(labels.max())}]")
    return images, labels


def train_flow(
    model: TarFlow | PerClassFlows,
    images: Tensor | np.ndarray,
    labels: Tensor | np.ndarray | None,
    cfg: FlowTrainConfig,
    checkpoint_dir: str | os.PathLike,
    device: str | torch.device = "cpu",
    log_path: str | os.PathLike | None = None,
    on_step: Callable[[dict], None] | None = None,
    resume_key: Mapping[str, Any] | None = None,
) -> TarFlow | PerClassFlows:
    """Train `model` by maximum likelihood on dequantized `images`; resume from
    `checkpoint_dir/last.pt` when it exists.

    Args:
        model: a TarFlow (conditional if num_classes > 0) or PerClassFlows (each class's flow
            is trained on that class's images only, one after another, checkpoints under
            `checkpoint_dir/class0000/` ...).
        images: uint8 [N, C, H, W]; mapped to x / 127.5 - 1, plus N(0, noise_std^2) per step.
        labels: int [N] in [0, K); ignored (may be None) for an unconditional TarFlow.
        cfg: FlowTrainConfig.
        checkpoint_dir: folder of `last.pt` (model, optimizer, scheduler, EMA, step, RNG states).
        device: "cpu", "cuda", "auto", ...; bf16 autocast on CUDA, fp32 on CPU. Under torchrun
            (WORLD_SIZE > 1) each rank uses cuda:LOCAL_RANK and DistributedDataParallel; only
            rank 0 writes files.
        log_path: JSON lines {step, loss (nats/dim), nll (nats/dim, incl. 0.5 log 2 pi), lr,
            wall_s[, class]}.
        on_step: called after every optimizer step with {"step", "class"} (progress hooks;
            tests raise from it to simulate a kill).
        resume_key: what else determines the result (e.g. the flow's spec, which fixes
            settings such as head_dim that leave every weight shape unchanged). `last.pt` is
            resumed only when it was written for the same key, training config (without
            checkpoint_every/log_every), sha256 of the training data and source of the model
            and training code (`oracle.io.resume`); otherwise it is discarded with one line in
            the log and training starts over.

    Returns: the model (EMA weights when cfg.ema_decay is set), in eval mode on `device`.
    """
    cfg.validate()
    device = pick_device(device) if isinstance(device, str) or device is None else torch.device(device)
    dist, device = _setup_distributed(device)
    if cfg.batch_size % dist.world:
        raise ConfigError(f"flow training config: batch_size={cfg.batch_size} is not divisible by "
                          f"the world size {dist.world}")
    images, labels = _check_data(model, images, labels)
    config = {k: v for k, v in cfg.as_dict().items() if k not in _RESUME_FREE}
    # the code that defines the model: every oracle module with a class of it, this one and the
    # optimizer's (oracle.devices)
    code = source_sha256(*{type(m) for m in model.modules() if type(m).__module__.startswith("oracle.")},
                         sys.modules[__name__], devices)
    key = {**dict(resume_key or {}), "config": config, "code": code}
    ckpt_dir = Path(checkpoint_dir)
    log = Path(log_path) if log_path is not None else None
    if isinstance(model, PerClassFlows):
        counts = torch.bincount(labels, minlength=model.num_classes)
        if bool((counts == 0).any()):
            k = int((counts == 0).nonzero()[0])
            raise DataError(f"class {k} has no training images; per-class flows need every class")
        for k, flow in enumerate(model.flows):
            rows = (labels == k).nonzero().flatten()
            _train_single(flow, images[rows], None, cfg, ckpt_dir / f"class{k:04d}", device, log,
                          k, on_step, dist, {**key, "class": k})
        return model.eval()
    if not isinstance(model, TarFlow):
        raise ConfigError(f"train_flow needs a TarFlow or PerClassFlows, got {type(model).__name__}")
    _train_single(model, images, labels, cfg, ckpt_dir, device, log, None, on_step, dist, key)
    return model.eval()


def _train_single(
    model: TarFlow,
    images: Tensor,
    labels: Tensor | None,
    cfg: FlowTrainConfig,
    ckpt_dir: Path,
    device: torch.device,
    log: Path | None,
    class_index: int | None,
    on_step: Callable[[dict], None] | None,
    dist: _Dist,
    key: Mapping[str, Any],
) -> None:
    model.to(device).train()
    optimizer = adamw(model.parameters(), device, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, cfg))
    ema: dict[str, Tensor] | None = None
    if cfg.ema_decay is not None:
        ema = {k: v.detach().clone() for k, v in model.state_dict().items()}
    key = canonical_key({**key, "data": array_sha256(images, labels), "format": _CKPT_FORMAT})
    ckpt_path = ckpt_dir / CHECKPOINT_NAME
    start, wall_before = 0, 0.0
    # rank 0 decides (and deletes a stale or damaged state); the other ranks follow
    state = load_resume_state(ckpt_path, key, "flow training", discard=ckpt_dir) if dist.rank == 0 else None
    if dist.active:
        resumed = [state is not None]
        torch.distributed.broadcast_object_list(resumed, src=0)
        if resumed[0] and dist.rank != 0:
            state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    if state is not None:
        model.load_state_dict(state["model"], strict=True)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if ema is not None:
            ema = {k: v.to(device) for k, v in state["ema"].items()}
        torch.set_rng_state(state["rng"]["torch"])
        if torch.cuda.is_available() and state["rng"].get("cuda") is not None:
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        start, wall_before = int(state["step"]), float(state["wall_s"])
        if dist.rank == 0:
            of = "" if class_index is None else f" (class {class_index})"
            print(f"resuming flow training from step {start} of {cfg.steps}{of}", flush=True)
    if log is not None and dist.rank == 0:
        log.parent.mkdir(parents=True, exist_ok=True)
        _trim_log(log, class_index, start)

    net: nn.Module = model
    if dist.active:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    shuffler = _EpochShuffler(images.shape[0], cfg.seed, _class_word(class_index))
    class_word = _class_word(class_index)
    local = cfg.batch_size // dist.world
    rows = slice(dist.rank * local, (dist.rank + 1) * local)
    conditional = labels is not None and model.num_classes > 0
    half_log_2pi = 0.5 * math.log(2 * math.pi)
    param_names = {k for k, _ in model.named_parameters()}
    t0 = time.perf_counter()

    def checkpoint(step: int) -> None:
        if dist.rank == 0:
            torch_save_atomic({
                "format": _CKPT_FORMAT, "step": step, "class": class_index, "resume_key": key,
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "ema": ema,
                "rng": {"torch": torch.get_rng_state(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
                "wall_s": wall_before + time.perf_counter() - t0,
            }, ckpt_path)
        dist.barrier()

    desc = "flow" if class_index is None else f"flow class {class_index}"
    bar = Progress(desc, cfg.steps, start=start, enabled=dist.rank == 0)
    for step in range(start, cfg.steps):
        # Everything random about this step comes from (seed, class, step): resumable exactly.
        idx = shuffler.indices(step, cfg.batch_size)[rows]
        gen = torch.Generator(device=device).manual_seed(_derive_seed(cfg.seed, class_word, _STREAM_STEP, step))
        noise = torch.randn(cfg.batch_size, *images.shape[1:], generator=gen, device=device)[rows]
        drop = torch.rand(cfg.batch_size, generator=gen, device=device)[rows] < cfg.label_dropout
        x = images[idx].to(device, non_blocking=True).float() / 127.5 - 1.0 + cfg.noise_std * noise
        y = None
        if conditional:
            y = torch.where(drop, torch.full_like(idx, -1).to(device), labels[idx].to(device))

        lr_now = optimizer.param_groups[0]["lr"]
        optimizer.zero_grad(set_to_none=True)
        with autocast(device):
            z, _, logdets = net(x, y)
            loss = model.loss(z, logdets)
        loss.backward()
        if cfg.grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        with torch.no_grad():
            if not model.nvp:  # volume-preserving variant: the prior variance tracks E[z^2]
                model.var.lerp_(dist.mean(z.detach().float().pow(2).mean(dim=0)).to(model.var.dtype), 0.1)
            if ema is not None:
                for k, v in model.state_dict().items():
                    if k in param_names:
                        ema[k].lerp_(v, 1.0 - cfg.ema_decay)
                    else:  # buffers (attn_mask, var) are copied, not averaged
                        ema[k].copy_(v)

        done = step + 1
        shown = {}  # the loss syncs a GPU: read it only at log steps
        if done % cfg.log_every == 0 or done == cfg.steps:
            value = float(dist.mean(loss.detach().float()))
            shown["loss"] = value
            if log is not None and dist.rank == 0:
                rec = {"step": done, "loss": value, "nll": value + half_log_2pi, "lr": lr_now,
                       "wall_s": round(wall_before + time.perf_counter() - t0, 3)}
                if class_index is not None:
                    rec["class"] = class_index
                _append_log(log, rec)
        if done % cfg.checkpoint_every == 0 or done == cfg.steps:
            checkpoint(done)
        bar.update(done, **shown)
        if on_step is not None:
            on_step({"step": done, "class": class_index})
    bar.finish()
    if ema is not None:
        model.load_state_dict(ema, strict=True)
    model.eval()
