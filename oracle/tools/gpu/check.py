"""Checks of a GPU install at a preset's real model shapes, before GPU-days are spent on it.

Each check runs the project's own code path once, on random weights and random data of the
preset's shapes, and returns plain numbers; `run_checks` prints one line per check. A failure
is an exception (out of memory, a missing kernel, a non-finite value), reported with the
check's name.

posterior   log p(x|k) in every precision mode (`oracle.float_precision`: float64, float32,
            bf16, and TF32 on CUDA) at the preset's flow shape and ``samples.class_batch``:
            throughput and error against float64 (`compare_modes`), and the mode ``auto``
            would pick at ``samples.precision_tolerance``.
flow_step   optimizer steps of `oracle.flow_training.train_flow` (bf16 autocast on CUDA) at the
            preset's flow shape and per-GPU batch (``oracle.train.batch_size`` over
            ``resources.oracle.gpus``): loss, seconds per step, peak GPU memory.
shard       one sample shard of one batch (`oracle.sample_shards.write_sample_shard`, the
            preset's batch size, class batch and precision), read back and verified.
classifier  one epoch of `oracle.classifiers.train.train_classifier` and a prediction pass for
            one of the preset's architectures at its input size, with the preset's batch size.

The flow of the posterior and shard checks has min(K, samples.class_batch) classes: a forward
pass costs the same whatever K is (only the class embedding differs), so every pass has the
real shape while K = 1000 takes 50 classes' time; projections multiply back by K.

``small=True`` shrinks every shape (`SMALL_FLOW`, `SMALL_IMAGE`, few rows) so the checks run
on a CPU in about a minute: it proves the code paths, not the preset's memory or speed.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch

from oracle.errors import ConfigError

CHECKS = ("posterior", "flow_step", "shard", "classifier")

#: The flow of ``small`` checks: the preset's patch size, a few tokens, a narrow network.
SMALL_FLOW = {"channels": 64, "head_dim": 32, "num_blocks": 2, "layers_per_block": 1}
#: Side of the images of ``small`` checks, in patches (flow) and pixels (classifier input).
SMALL_PATCHES = 2
SMALL_IMAGE = 32


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def _peak_gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None


def flow_spec(config: Mapping, facts, num_classes: int | None = None, small: bool = False) -> dict:
    """The run's flow spec (`oracle.workflow.plan.flow_spec`) for the data set `facts`
    (`oracle.io.data_sets.DataSet`), with `num_classes` classes; `small` shrinks it."""
    from oracle.workflow import plan

    spec = plan.flow_spec(config, facts.channels, int(config["data"]["image_size"]),
                          facts.num_classes if num_classes is None else num_classes)
    if small:
        spec.update(SMALL_FLOW, img_size=spec["patch_size"] * SMALL_PATCHES)
    return spec


def check_posterior(config: Mapping, facts, device: torch.device, small: bool = False, n_images: int | None = None,
                    repeats: int = 2) -> dict:
    """Throughput and error against float64 of each precision mode (module docstring)."""
    from oracle.float_precision_error import choose_precision, compare_modes
    from oracle.flow_checkpoints import random_flow
    from oracle.workflow import plan
    from oracle.worlds import FlowWorld

    s = config["samples"]
    k = min(facts.num_classes, int(s["class_batch"]))
    flow = random_flow(flow_spec(config, facts, k, small)).to(device).eval()
    world = FlowWorld(flow, label_temperature=float(plan.world_spec(config, "base")["label_temperature"]))
    n = n_images or (4 if small else 8)
    x = (torch.rand(n, *world.event_shape, generator=torch.Generator().manual_seed(0)) * 2 - 1).to(device)
    modes = ["float64", "float32", "bf16"] + (["tf32"] if device.type == "cuda" else [])
    _reset_peak(device)
    with torch.no_grad():
        per_mode = compare_modes(world, x, modes, repeats, k)
        auto, _ = choose_precision(world, x, float(s["precision_tolerance"]))
    return {"classes": k, "images": n, "modes": per_mode, "auto_picks": auto, "peak_gib": _peak_gib(device)}


def check_flow_step(config: Mapping, facts, device: torch.device, small: bool = False, steps: int = 3) -> dict:
    """`steps` optimizer steps of flow training at the per-GPU batch (module docstring)."""
    from oracle.flow_checkpoints import build_flow
    from oracle.flow_training import FlowTrainConfig, train_flow
    from oracle.workflow import plan

    train = config["oracle"]["train"]
    gpus = max(1, int(config["resources"]["oracle"]["gpus"]))
    batch = 2 if small else max(1, int(train["batch_size"]) // gpus)
    spec = flow_spec(config, facts, small=small)
    model = build_flow(spec, seed=0)
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch, spec["in_channels"], *(2 * [spec["img_size"]])), generator=gen,
                           dtype=torch.uint8)
    labels = torch.randint(0, spec["num_classes"], (batch,), generator=gen)
    settings = {**plan.flow_train_settings(train, batch, 0), "steps": steps, "checkpoint_every": steps + 1,
                "log_every": 1, "warmup_steps": 0}
    times: list[float] = []
    last = [time.perf_counter()]

    def on_step(_info: dict) -> None:
        _sync(device)
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    _reset_peak(device)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.jsonl"
        train_flow(model, images, labels, FlowTrainConfig.from_dict(settings), Path(tmp) / "ckpt", device, log, on_step)
        losses = [json.loads(line)["loss"] for line in log.read_text().splitlines()]
    if not all(math.isfinite(v) for v in losses):
        raise FloatingPointError(f"flow_step: non-finite training loss {losses}")
    step_s = float(np.median(times[1:])) if len(times) > 1 else times[0]
    return {"batch_per_gpu": batch, "gpus": gpus, "losses": losses, "step_s": step_s,
            "images_per_s": batch / step_s, "train_steps": plan.train_steps(train, facts.n_train),
            "peak_gib": _peak_gib(device)}


def check_shard(config: Mapping, facts, device: torch.device, small: bool = False, rows: int | None = None) -> dict:
    """One shard of one batch, written and verified (module docstring)."""
    from oracle.flow_checkpoints import random_flow
    from oracle.io.shards import read_shard, verify_shard
    from oracle.sample_shards import write_sample_shard
    from oracle.workflow import plan
    from oracle.worlds import FlowWorld

    s = config["samples"]
    base = plan.world_spec(config, "base")
    k = min(facts.num_classes, int(s["class_batch"]))
    flow = random_flow(flow_spec(config, facts, k, small)).to(device).eval()
    prior = base["prior"][:k] if base["prior"] is not None else None
    if prior is not None:
        prior = [p / sum(prior) for p in prior]
    world = FlowWorld(flow, prior=prior, label_temperature=float(base["label_temperature"]),
                      base_temperature=float(base["base_temperature"]))
    n = rows or (4 if small else int(s["batch_size"]))
    _reset_peak(device)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shard-0000.h5"
        t0 = time.perf_counter()
        info = write_sample_shard(world, path, n, int(base["seed"]), 0, int(base["n_shards"]),
                                  batch_size=min(n, int(s["batch_size"])), class_batch=k, progress=False,
                                  precision=s["precision"], precision_rows=min(n, int(s["precision_rows"])),
                                  precision_tolerance=float(s["precision_tolerance"]))
        wall = time.perf_counter() - t0
        verify_shard(path)
        shard = read_shard(path)
        loglik = np.asarray(shard["loglik"])
        chosen, max_dp = str(shard["attrs"]["precision"]), float(shard["attrs"]["precision_max_abs_dp"])
    if loglik.shape != (n, k) or not np.isfinite(loglik).all():
        raise FloatingPointError(f"shard: loglik has shape {loglik.shape} (expected {(n, k)}) or non-finite values")
    per_shard = plan.shard_sizes(int(base["n_total"]), int(base["n_shards"]))[0]
    # sampling does not depend on K, the likelihood passes grow with it: a lower bound for K > k
    return {"rows": n, "classes": k, "wall_s": wall, "samples_per_s": info["samples_per_s"], "precision": chosen,
            "precision_max_abs_dp": max_dp, "shard_rows": per_shard, "peak_gib": _peak_gib(device)}


def check_classifier(config: Mapping, facts, device: torch.device, small: bool = False, arch: str | None = None,
                     batches: int = 3) -> dict:
    """One epoch of `batches` batches and a prediction pass of one architecture (module docstring)."""
    from oracle.classifiers.build import build_classifier
    from oracle.classifiers.predict import predict_log_probs
    from oracle.classifiers.train import train_classifier
    from oracle.workflow import plan
    from oracle.workflow.plan.config import used_archs

    archs = used_archs(config)
    name = arch or next((a for a in config["classifiers"]["archs"] if a in archs), None)
    if name is None or name not in config["classifiers"]["archs"]:
        raise ConfigError(f"config key 'classifiers.archs': no architecture {name!r} to check (known: {', '.join(archs)})")
    a = plan.arch_spec(config, name)
    if isinstance(a.get("pretrained"), str) and not Path(a["pretrained"]).is_file():
        a["pretrained"] = None  # shapes only: a missing weights file is the config check's to report
    img = SMALL_IMAGE if small else int(config["data"]["image_size"])
    size = SMALL_IMAGE if small else a.get("input_size")
    tr = config["classifiers"]["training"]
    bs = 4 if small else int(tr["batch_size"])
    n = bs * batches
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n, facts.channels, img, img, generator=gen) * 2 - 1
    y = torch.randint(0, facts.num_classes, (n,), generator=gen)
    pretrained = a["pretrained"] if isinstance(a.get("pretrained"), str) else None
    model = build_classifier(a["model"], facts.num_classes, facts.channels, img, size, pretrained, seed=0)
    _reset_peak(device)
    t0 = time.perf_counter()
    model, history = train_classifier(model, x, y, soft=False, epochs=1, batch_size=bs, lr=float(tr["lr"]),
                                      weight_decay=float(tr["weight_decay"]), seed=0, device=device)
    _sync(device)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    log_q = predict_log_probs(model, x, batch_size=bs, device=device)
    _sync(device)
    pred_s = time.perf_counter() - t0
    loss = float(history[-1]["train_loss"])
    if not math.isfinite(loss) or not torch.isfinite(log_q).all():
        raise FloatingPointError(f"classifier {name}: non-finite loss {loss} or predictions")
    return {"arch": name, "model": a["model"], "input_size": size or img, "batch_size": bs, "rows": n,
            "train_loss": loss, "train_images_per_s": n / train_s, "predict_images_per_s": n / pred_s,
            "peak_gib": _peak_gib(device)}


def _gib(v: float | None) -> str:
    return "n/a (CPU)" if v is None else f"{v:.1f} GiB"


def summary(name: str, r: Mapping, facts) -> str:
    """One line per check result (what docs/gpu.md shows)."""
    if name == "posterior":
        modes = "; ".join(f"{m} {v['evals_per_s']:.3g} evals/s, max|dp| {v['max_abs_dp']:.1e}" for m, v in r["modes"].items())
        return f"posterior ok: {r['images']} images x {r['classes']} classes: {modes}; auto picks {r['auto_picks']}; " \
               f"peak {_gib(r['peak_gib'])}"
    if name == "flow_step":
        hours = r["train_steps"] * r["step_s"] / 3600
        return (f"flow_step ok: batch {r['batch_per_gpu']} per GPU, loss {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}, "
                f"{r['step_s']:.3f} s/step ({r['images_per_s']:.3g} images/s), peak {_gib(r['peak_gib'])}; "
                f"{r['train_steps']:,} steps x this step time = {hours:,.1f} h on {r['gpus']} GPUs (no all-reduce counted)")
    if name == "shard":
        k_scale = facts.num_classes / r["classes"]
        return (f"shard ok: {r['rows']} rows x {r['classes']} classes in {r['wall_s']:.1f} s "
                f"({r['samples_per_s']:.3g} samples/s), precision {r['precision']} (max|dp| "
                f"{r['precision_max_abs_dp']:.1e}), peak {_gib(r['peak_gib'])}; a {r['shard_rows']}-row shard of "
                f"{facts.num_classes} classes: at least {r['shard_rows'] / r['samples_per_s'] / 60:,.1f} min "
                f"(likelihood passes x{k_scale:.0f} on top)")
    if name == "classifier":
        return (f"classifier ok: {r['arch']} at {r['input_size']} px, batch {r['batch_size']}: loss {r['train_loss']:.3f}, "
                f"train {r['train_images_per_s']:.3g} images/s, predict {r['predict_images_per_s']:.3g} images/s, "
                f"peak {_gib(r['peak_gib'])}")
    raise ValueError(name)


def run_checks(config: Mapping, device: torch.device, only: list[str] | None = None, small: bool = False,
               arch: str | None = None, echo: Callable[[str], None] = print) -> dict[str, dict]:
    """Run the checks `only` (default all of `CHECKS`) in order; echo one line each; return
    the results by name. A check that raises is echoed as ``<name> FAILED: <error>`` and the
    others still run; the returned dict then lacks it."""
    from oracle.tools.gpu.cost import data_facts

    facts = data_facts(config)
    calls = {"posterior": lambda: check_posterior(config, facts, device, small),
             "flow_step": lambda: check_flow_step(config, facts, device, small),
             "shard": lambda: check_shard(config, facts, device, small),
             "classifier": lambda: check_classifier(config, facts, device, small, arch)}
    out = {}
    for name in only or CHECKS:
        if name not in calls:
            raise ConfigError(f"--only {name!r}: expected one of {', '.join(CHECKS)}")
        t0 = time.perf_counter()
        try:
            out[name] = calls[name]()
        except Exception as exc:  # noqa: BLE001 -- reported per check: the other checks still say what works
            echo(f"{name} FAILED after {time.perf_counter() - t0:.1f} s: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            continue
        echo(summary(name, out[name], facts) + f" [{time.perf_counter() - t0:.1f} s]")
    return out
