"""Training a classifier on oracle samples with hard or soft labels (see the package docstring)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from oracle.progress import Progress
from oracle.classifiers.specs import validation_rows
from oracle.classifiers.stopping import StoppingRule, is_evaluation_epoch
from oracle.classifiers.stream import SampleRows, batch_loader
from oracle import devices
from oracle.devices import adamw, autocast, pick_device
from oracle.errors import ConfigError, DataError, OracleError
from oracle.io.atomic import atomic_output, torch_save_atomic
from oracle.io.resume import array_sha256, canonical_key, load_resume_state, source_sha256

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "oracle-classifier-train/1"


def _derive_seed(seed: int, stream: str) -> int:
    """An independent 63-bit seed per named random stream."""
    return int.from_bytes(hashlib.sha256(f"{int(seed)}:{stream}".encode()).digest()[:8], "little") >> 1


def _check_images(x: Tensor | SampleRows) -> Tensor | SampleRows:
    if isinstance(x, SampleRows):
        if len(x.shape) != 4:
            raise DataError(f"x: {x.path} holds samples of shape {x.shape[1:]}; expected images [C, H, W]")
    elif not isinstance(x, Tensor) or x.ndim != 4 or x.dtype != torch.float32:
        raise DataError(f"x: expected a float32 tensor [n, C, H, W], got {getattr(x, 'dtype', type(x))} "
                        f"{tuple(getattr(x, 'shape', ()))}")
    if x.shape[0] == 0:
        raise DataError("x: no images")
    return x


def _check_targets(targets, n: int, num_classes: int, soft: bool) -> Tensor:
    t = targets if isinstance(targets, Tensor) else torch.as_tensor(np.asarray(targets))
    if soft:
        if t.shape != (n, num_classes) or not t.is_floating_point():
            raise DataError(f"targets: soft labels must be float [{n}, {num_classes}], got {t.dtype} {tuple(t.shape)}")
        t = t.to(torch.float32)
        if not bool(torch.isfinite(t).all()) or float(t.min()) < 0 or float((t.sum(1) - 1).abs().max()) > 1e-4:
            raise DataError("targets: soft labels must be finite probabilities with rows summing to 1")
        return t
    if t.shape != (n,) or t.is_floating_point() or t.dtype == torch.bool:
        raise DataError(f"targets: hard labels must be int64 [{n}], got {t.dtype} {tuple(t.shape)}")
    t = t.to(torch.int64)
    if int(t.min()) < 0 or int(t.max()) >= num_classes:
        raise DataError(f"targets: labels must lie in [0, {num_classes}), got [{int(t.min())}, {int(t.max())}]")
    return t


def _loss(logits: Tensor, target: Tensor, soft: bool) -> Tensor:
    if soft:
        return -(target * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    return F.cross_entropy(logits, target)


def _batches(order: Tensor, batch_size: int) -> list[Tensor]:
    chunks = list(order.split(batch_size))
    # A batch of one breaks BatchNorm in train mode; fold it into the previous batch.
    if len(chunks) > 1 and len(chunks[-1]) == 1:
        chunks[-2:] = [torch.cat(chunks[-2:])]
    return chunks


@torch.no_grad()
def _evaluate_loss(model, x, t, idx, soft, batch_size, device) -> dict[str, float]:
    model.eval()
    loss_sum, correct = 0.0, 0
    for b in idx.split(batch_size):
        logits = model(x[b].to(device)).float()
        tb = t[b].to(device)
        loss_sum += float(_loss(logits, tb, soft)) * len(b)
        labels = tb.argmax(1) if soft else tb
        correct += int((logits.argmax(1) == labels).sum())
    return {"val_loss": loss_sum / len(idx), "val_acc": correct / len(idx)}


def curve_epochs(epochs: int, points: int | None) -> list[int]:
    """The epochs (1-based) at which a training curve is measured: every epoch when `points`
    is None or at least `epochs`, else `points` epochs spaced evenly, ending with the last
    (ceil(i * epochs / points), i = 1..points)."""
    if points is not None and (not isinstance(points, (int, np.integer)) or points < 1):
        raise ConfigError(f"curve_points={points!r}: expected a positive integer or null")
    if points is None or points >= epochs:
        return list(range(1, epochs + 1))
    return [math.ceil(i * epochs / points) for i in range(1, points + 1)]


def _resume_key(model: nn.Module, x: Tensor, t: Tensor, **hyper) -> dict:
    """What a training checkpoint must match to be resumed: the model (spec, initial weights,
    the code that defines it and timm's version), the data, the targets and the
    hyperparameters (`oracle.io.resume`)."""
    import importlib.metadata

    code = source_sha256(*{type(m) for m in model.modules() if type(m).__module__.startswith("oracle.")},
                         sys.modules[__name__], devices)
    return canonical_key({
        "format": CHECKPOINT_FORMAT,
        "spec": getattr(model, "spec", {"class": type(model).__name__}),
        "initial_weights": array_sha256(*model.state_dict().values()),
        "code": code, "timm": importlib.metadata.version("timm"),
        "x_shape": list(x.shape), "x": x.fingerprint() if isinstance(x, SampleRows) else array_sha256(x),
        "targets": array_sha256(t),
        **hyper,
    })


def _write_log(path: Path, history: list[dict]) -> None:
    with atomic_output(path) as tmp:
        tmp.write_text("".join(json.dumps(h, sort_keys=True) + "\n" for h in history), encoding="utf-8")


def train_classifier(
    model: nn.Module,
    x: Tensor | SampleRows,
    targets,
    *,
    soft: bool,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    seed: int,
    device: str | torch.device | None = "cpu",
    val_fraction: float = 0.0,
    log_path: str | os.PathLike | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    num_classes: int | None = None,
    monitor: Callable[[nn.Module], Mapping[str, float]] | None = None,
    monitor_epochs: Collection[int] | None = None,
    loader_workers: int = 0,
    checkpoint_seconds: float = 60.0,
    stopping: StoppingRule | None = None,
    validation: tuple[Tensor, Tensor] | None = None,
) -> tuple[nn.Module, list[dict]]:
    """Train ``model`` on images ``x`` with hard or soft labels (see the module docstring).

    Args:
        model: maps float32 [b, C, H, W] in [-1, 1] to logits [b, K] (``build_classifier``).
        x: training images, float32 [n, C, H, W], on the CPU (batches are moved to ``device``),
            or a `SampleRows` that reads each batch from the sample file: the same batches in
            the same order, so the result is bit-identical to training on its rows in memory.
        targets: int64 [n] class labels (``soft=False``) or float [n, K] probabilities
            (``soft=True``, e.g. the oracle posterior ``exp(log_p)``).
        soft: which loss to use.
        epochs, batch_size, lr, weight_decay: AdamW; `epochs` is the budget. Without patience the
            rate follows a cosine to 0 per step over the budget; with patience it stays at `lr`
            until the rule stops (or the budget ends), then decays linearly to 0 from the best
            weights over `StoppingRule.decay_epochs` (`oracle.classifiers.stopping`).
        seed: derives the validation split, the shuffling and the model's random draws.
        device: "cpu", "cuda", "auto", or a torch.device.
        val_fraction: fraction held out (after the split, training uses the rest); ``val_loss``
            and ``val_acc`` (against labels or soft-label argmax) are reported after every
            evaluation epoch (`stopping`; by default every epoch).
        log_path: JSON-lines file rewritten atomically after each epoch with the history.
        checkpoint_path: training state saved atomically after each epoch; an existing
            checkpoint written for the same model, data, targets and hyperparameters is resumed,
            any other (or a damaged one) is discarded with one printed line.
        num_classes: K when the model lacks a ``num_classes`` attribute.
        monitor: called after an epoch with the model in eval mode; its numbers are added to
            the epoch's record (training curves, e.g. accuracy and epistemic KL on a slice of
            the test set). It runs with the random state forked, so the training itself does
            not depend on whether, when or what it measures.
        monitor_epochs: the epochs (1-based) after which `monitor` runs (`curve_epochs`);
            None: after every evaluation epoch.
        loader_workers: processes reading the batches of a `SampleRows` ahead of the training
            step (0: read in this process); ignored for an in-memory ``x``.
        checkpoint_seconds: with `checkpoint_path`, the state is saved after an epoch once this
            many seconds have passed since the last save (or the start); 0: after every epoch.
            A small model trains for hundreds of one-step epochs, where saving each would cost
            more than the steps; a killed job loses at most this much training.
        validation: a validation set of its own, ``(x_val, targets_val)`` shaped and typed as
            ``x`` (in memory) and ``targets``, instead of holding out ``val_fraction`` of ``x``
            (which must then be 0): rows of the world that no training set of this run holds.
        stopping: the stopping rule (`oracle.classifiers.stopping`): evaluations on the
            validation rows every `StoppingRule.eval_every` epochs and, with ``patience``, an
            early stop, the best evaluation's weights restored and the final decay of the rate
            from them (needs validation rows); the decay's last weights are kept (without a decay,
            ``decay_fraction`` 0, the best ones). None: evaluate every epoch, train the whole
            budget, keep the last weights.
    Returns:
        ``(model, history)``: the trained model in eval mode on ``device`` and one dict per
        epoch with ``epoch``, ``steps`` (optimizer steps so far), ``train_loss`` (mean over the
        epoch's steps, nats), ``lr`` and ``lr_fraction`` (the rate the next step would use, and
        that over `lr`), ``seconds`` and, after an evaluation epoch with validation, ``val_loss``,
        ``val_acc`` and ``best_epoch`` (the epoch of the lowest validation loss so far, where the
        decay starts). The decay's epochs carry ``phase: "decay"`` and ``decay_from_epoch``; its
        last one the validation loss (and curve) of the kept weights.
        `oracle.classifiers.stopping.convergence` says from it whether the run converged.
    """
    device = device if isinstance(device, torch.device) else pick_device(device)
    x = _check_images(x)
    n = x.shape[0]
    k = num_classes or getattr(model, "num_classes", None)
    if not k:
        raise ConfigError("num_classes: the model has no num_classes attribute; pass num_classes=K")
    t = _check_targets(targets, n, int(k), soft)
    for key, value in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{key}={value!r}: expected a positive integer")
    if not (lr > 0 and weight_decay >= 0):
        raise ConfigError(f"lr={lr!r}, weight_decay={weight_decay!r}: expected lr > 0 and weight_decay >= 0")
    if not 0.0 <= val_fraction < 1.0:
        raise ConfigError(f"val_fraction={val_fraction!r}: expected a value in [0, 1)")
    rule = stopping or StoppingRule()
    if validation is not None and val_fraction > 0:
        raise ConfigError(f"val_fraction={val_fraction}: a separate validation set was given; hold out one or the other")
    if rule.patience is not None and val_fraction <= 0 and validation is None:
        raise ConfigError(f"patience={rule.patience}: early stopping watches validation rows; "
                          "set val_fraction > 0 or give a validation set")

    perm = torch.randperm(n, generator=torch.Generator().manual_seed(_derive_seed(seed, "split")))
    n_val = validation_rows(n, val_fraction)
    if val_fraction > 0 and not 1 <= n_val <= n - 2:
        raise ConfigError(f"val_fraction={val_fraction} leaves {n_val} validation and {n - n_val} training images of {n}")
    val_idx, train_idx = perm[:n_val].sort().values, perm[n_val:].sort().values
    val_x, val_t = x, t
    if validation is not None:
        val_x = _check_images(validation[0])
        if isinstance(val_x, SampleRows):
            raise DataError("validation: expected images in memory, not a SampleRows")
        val_t = _check_targets(validation[1], val_x.shape[0], int(k), soft)
        val_idx = torch.arange(val_x.shape[0])
        n_val = len(val_idx)
    if len(train_idx) < 2:
        raise DataError(f"x: need at least 2 training images, got {len(train_idx)}")
    steps_per_epoch = len(_batches(train_idx, batch_size))
    eval_every = rule.eval_every(steps_per_epoch)

    model.to(device)
    optimizer = adamw(model.parameters(), device, lr=lr, weight_decay=weight_decay)
    # with patience the rate is constant until the rule stops, then decays to zero from the best
    # weights (`_Anneal`); without it, a cosine to zero over the whole budget
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _Anneal(epochs * steps_per_epoch, cosine=rule.patience is None))
    shuffle = torch.Generator().manual_seed(_derive_seed(seed, "shuffle"))
    key = _resume_key(model, x, t, soft=bool(soft), epochs=int(epochs), batch_size=int(batch_size),
                      lr=float(lr), weight_decay=float(weight_decay), seed=int(seed), val_fraction=float(val_fraction),
                      stopping=[rule.patience, rule.eval_steps, rule.min_delta, rule.decay_fraction],
                      validation=None if validation is None else [array_sha256(val_x), array_sha256(val_t)])
    history: list[dict] = []
    start_epoch = 0
    # the early stop's memory: the lowest validation loss, its epoch and weights, and the
    # evaluations since it; `decay`: the final decay's epochs once the rule has stopped
    best: dict = {"loss": None, "epoch": None, "weights": None, "since": 0, "steps": 0}
    decay: dict | None = None
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    cuda_devices = [device] if device.type == "cuda" else []
    loader, epoch_batches = batch_loader(x, loader_workers) if isinstance(x, SampleRows) else (None, None)
    # channels-last convolutions: 1.32x per CPU step (docs/benchmarks.md); after the resume key,
    # which hashes the initial weights as built, and undone before returning
    model.to(memory_format=torch.channels_last)

    def run_epoch(epoch: int) -> float:
        """One epoch of optimizer steps; the mean training loss over its rows (nats)."""
        model.train()
        order = train_idx[torch.randperm(len(train_idx), generator=shuffle)]
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        batches = _batches(order, batch_size)
        if loader is None:
            images = (x[b] for b in batches)
        else:
            epoch_batches.batches = batches
            images = iter(loader)
        for batch, xb in zip(batches, images, strict=True):
            xb = xb.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            tb = t[batch].to(device, non_blocking=True)
            with autocast(device):
                logits = model(xb)
            loss = _loss(logits.float(), tb, soft)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            loss_sum += loss.detach().double() * len(batch)
            bar.update()
        mean = float(loss_sum) / len(train_idx)
        if not math.isfinite(mean):
            raise OracleError(f"training diverged: train_loss={mean} at epoch {epoch}; lower lr={lr}")
        return mean

    def measure(record: dict, scored: bool) -> None:
        """The validation loss (and the curve `monitor`, when `scored`) of the weights now."""
        if n_val:
            record.update(_evaluate_loss(model, val_x, val_t, val_idx, soft, max(batch_size, 256), device))
        if monitor is not None and scored:
            _monitor(model, monitor, record, cuda_devices)

    def start_decay(stopped_epoch: int) -> dict:
        """Back to the best weights, and the schedule's last part: the rate from its peak to zero
        over `StoppingRule.decay_epochs` of the steps those weights took."""
        n_epochs = rule.decay_epochs(best["steps"], steps_per_epoch)
        if best["weights"] is not None:
            model.load_state_dict(best["weights"])
        scheduler.lr_lambdas[0].decay_from(scheduler.last_epoch, n_epochs * steps_per_epoch)
        log.info("stopped at epoch %d; decaying the rate to 0 over %d epochs (%d steps) from epoch %s's weights",
                 stopped_epoch, n_epochs, n_epochs * steps_per_epoch, best["epoch"])
        return {"from_epoch": best["epoch"], "stopped_epoch": stopped_epoch, "epochs": n_epochs, "done": 0}

    def save_state(epoch: int) -> None:
        torch_save_atomic({
            "format": CHECKPOINT_FORMAT, "epoch": epoch, "resume_key": key,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),  # with the `_Anneal`'s own state (LambdaLR keeps it)
            "shuffle_rng": shuffle.get_state(), "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(device) if cuda_devices else None,
            "history": history, "best": best, "decay": decay,
        }, ckpt)

    with torch.random.fork_rng(devices=cuda_devices):
        torch.manual_seed(_derive_seed(seed, "model"))
        state = load_resume_state(ckpt, key, "classifier training") if ckpt is not None else None
        if state is not None:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            shuffle.set_state(state["shuffle_rng"])
            torch.set_rng_state(state["torch_rng"])
            if cuda_devices and state.get("cuda_rng") is not None:
                torch.cuda.set_rng_state(state["cuda_rng"], device)
            history = list(state["history"])
            start_epoch = int(state["epoch"])
            best, decay = state["best"], state["decay"]
            log.info("resumed %s at epoch %d/%d", ckpt, start_epoch, epochs)

        last_saved = time.perf_counter()
        bar = Progress("train classifier", epochs * steps_per_epoch, start=start_epoch * steps_per_epoch)
        epoch = start_epoch
        while True:
            if decay is None and epoch >= epochs:
                if rule.patience is None or rule.decay_fraction <= 0:
                    break
                decay = start_decay(epoch)  # the budget ran out before the rule stopped it
            if decay is not None and decay["done"] >= decay["epochs"]:
                break
            started = time.perf_counter()
            epoch += 1
            record = {"epoch": epoch, "train_loss": run_epoch(epoch)}
            record.update(steps=int(scheduler.last_epoch), lr=float(scheduler.get_last_lr()[0]),
                          lr_fraction=float(scheduler.get_last_lr()[0]) / float(lr))
            if decay is None:
                evaluation = is_evaluation_epoch(epoch, eval_every, epochs)
                if evaluation:
                    measure(record, monitor_epochs is None)
                if n_val and evaluation:
                    if rule.improved(record["val_loss"], best["loss"]):
                        best = {"loss": record["val_loss"], "epoch": epoch, "since": 0, "steps": record["steps"],
                                "weights": ({k: v.detach().clone() for k, v in model.state_dict().items()}
                                            if rule.patience is not None else None)}
                    else:
                        best["since"] += 1
                    record["best_epoch"] = best["epoch"]
                if monitor is not None and monitor_epochs is not None and epoch in monitor_epochs:
                    _monitor(model, monitor, record, cuda_devices)
            else:
                decay["done"] += 1
                record.update(phase="decay", decay_from_epoch=decay["from_epoch"])
                if decay["done"] >= decay["epochs"]:
                    measure(record, True)  # the kept, annealed weights
            record["seconds"] = time.perf_counter() - started
            history.append(record)
            bar.set(epoch=epoch, loss=record["train_loss"])
            log.info("epoch %s", json.dumps(record, sort_keys=True))
            if log_path is not None:
                _write_log(Path(log_path), history)
            if decay is None and rule.patience is not None and best["since"] >= rule.patience:
                log.info("no better validation loss in %d evaluations; best epoch %d", rule.patience, best["epoch"])
                if rule.decay_fraction <= 0:
                    break
                decay = start_decay(epoch)
            # the last epoch saves nothing: the outputs follow it
            last = (decay["done"] >= decay["epochs"] if decay is not None
                    else epoch >= epochs and (rule.patience is None or rule.decay_fraction <= 0))
            if ckpt is not None and not last and time.perf_counter() - last_saved >= checkpoint_seconds:
                save_state(epoch)
                last_saved = time.perf_counter()
        bar.finish()
    if decay is None and best["weights"] is not None:
        model.load_state_dict(best["weights"])
    # the usual layout again, so the trained weights are stored, hashed and predicted with as built
    model.to(memory_format=torch.contiguous_format)
    model.eval()
    return model, history


class _Anneal:
    """The learning-rate factor of a run (a `LambdaLR` lambda of the optimizer step): constant 1
    until `decay_from` is called, then linear from 1 at that step to 0 after `steps` more; with
    `cosine`, half a cosine from 1 to 0 over the `total` steps of the budget (no early stop)."""

    def __init__(self, total: int, cosine: bool) -> None:
        self.total, self.cosine = int(total), bool(cosine)
        self.start: int | None = None
        self.steps = 0

    def __call__(self, step: int) -> float:
        if self.cosine:
            return 0.5 * (1.0 + math.cos(math.pi * min(step, self.total) / max(1, self.total)))
        if self.start is None:
            return 1.0
        return max(0.0, 1.0 - (step - self.start) / max(1, self.steps))

    def decay_from(self, step: int, steps: int) -> None:
        self.start, self.steps = int(step), int(steps)


def _monitor(model: nn.Module, monitor: Callable[[nn.Module], Mapping[str, float]], record: dict,
             cuda_devices: list) -> None:
    """`monitor`'s numbers of the weights now, into `record`; with the random state forked, so the
    training does not depend on whether, when or what it measures."""
    model.eval()
    with torch.random.fork_rng(devices=cuda_devices), torch.no_grad():
        record.update({k: float(v) for k, v in monitor(model).items()})


def train_by_recipe(model: nn.Module, x: Tensor | SampleRows, targets, training: Mapping, *, soft: bool, seed: int,
                    val_fraction: float = 0.0, validation: tuple[Tensor, Tensor] | None = None,
                    monitor: Callable[[nn.Module], Mapping[str, float]] | None = None,
                    curve_points: int | None = None, **kwargs) -> tuple[nn.Module, list[dict], dict]:
    """`train_classifier` under a classifiers.training block (README "How the learners are
    trained"): its budget (`oracle.classifiers.specs.training_epochs` of the rows it fits on), its
    stopping rule (`StoppingRule.from_training`) and hyperparameters. A `monitor` runs after
    `curve_points` epochs spread evenly over a fixed budget, at every evaluation under early
    stopping (whose length is not known in advance). Returns ``(model, history, convergence)``,
    the last `oracle.classifiers.stopping.convergence` with ``budget_epochs``."""
    from oracle.classifiers.specs import training_epochs
    from oracle.classifiers.stopping import convergence

    epochs = training_epochs(training, x.shape[0], val_fraction)
    rule = StoppingRule.from_training(training)
    scored = curve_epochs(epochs, curve_points) if monitor is not None and rule.patience is None else None
    model, history = train_classifier(
        model, x, targets, soft=soft, epochs=epochs, batch_size=int(training["batch_size"]), lr=float(training["lr"]),
        weight_decay=float(training["weight_decay"]), seed=seed, val_fraction=val_fraction, stopping=rule,
        validation=validation, monitor=monitor, monitor_epochs=scored, **kwargs)
    return model, history, convergence(history, rule, epochs)
