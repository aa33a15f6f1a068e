"""How far a float precision mode (`oracle.float_precision`) takes a world's log-likelihoods
and posteriors from float64 on the same weights (DESIGN rule 9), and the mode ``auto`` picks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from oracle.float_precision import fastest_first
from oracle.posterior import log_likelihoods, log_posterior


def posterior_error(loglik: Tensor, loglik_ref: Tensor, prior: Tensor | None = None,
                    temperature: float = 1.0) -> dict[str, float]:
    """How far log-likelihoods [n, K] are from reference ones, and what that does to the
    posterior p_T(y|x) ∝ pi_y p(x|y)^(1/T): ``max_abs_dlogp`` (nats), ``max_abs_dp`` and
    ``max_kl`` = max_x KL(p_ref(.|x) || p(.|x)) (nats), all computed in float64."""
    ll, ref = loglik.detach().double().cpu(), loglik_ref.detach().double().cpu()
    lp, lp_ref = log_posterior(ll, prior, temperature), log_posterior(ref, prior, temperature)
    kl = (lp_ref.exp() * (lp_ref - lp)).sum(dim=1)
    return {"max_abs_dlogp": float((ll - ref).abs().max()),
            "max_abs_dp": float((lp.exp() - lp_ref.exp()).abs().max()),
            "max_kl": float(kl.clamp(min=0.0).max())}


def float64_reference(world, x: Tensor, passes: Mapping | None = None) -> Tensor:
    """log p(x|k) [n, K] of `world` scored in float64 (the reference of `measure_precision`);
    `passes`: keyword arguments of `log_likelihoods` (class_batch, image_batch, max_rows)."""
    with world.scoring("float64"):
        return log_likelihoods(world, x, **(passes or {}))


def measure_precision(world, x: Tensor, mode: str, passes: Mapping | None = None,
                      ref: Tensor | None = None) -> dict[str, float]:
    """`posterior_error` of `world` scored in `mode` against float64, on inputs x (the
    world's own samples, as the shard stores them: float32). `passes`: keyword arguments of
    `log_likelihoods` (the shard's class_batch and max_rows, so the check fits where the shard
    does); `ref`: the float64 log-likelihoods of x when already computed."""
    if not hasattr(world, "scoring"):  # an analytic world: float64 is all it computes in
        return {"max_abs_dlogp": 0.0, "max_abs_dp": 0.0, "max_kl": 0.0}
    if ref is None:
        ref = float64_reference(world, x, passes)
    with world.scoring(mode):
        got = log_likelihoods(world, x, **(passes or {}))
    return posterior_error(got, ref, world.prior, world.label_temperature)


def choose_precision(world, x: Tensor, tolerance: float, candidates: Sequence[str] | None = None,
                     passes: Mapping | None = None) -> tuple[str, dict[str, float]]:
    """The first mode of `candidates` (default `fastest_first` of the world's device) whose
    ``max_abs_dp`` on x is below `tolerance`, with its measured error; float64 (error 0)
    when none is. A world without precision modes (analytic) gives float64."""
    if not hasattr(world, "scoring"):
        return "float64", measure_precision(world, x, "float64")
    ref = float64_reference(world, x, passes)  # once: every candidate is scored against it
    for mode in candidates or fastest_first(world.device):
        err = measure_precision(world, x, mode, passes, ref)
        if err["max_abs_dp"] < tolerance:
            return mode, err
    return "float64", {"max_abs_dlogp": 0.0, "max_abs_dp": 0.0, "max_kl": 0.0}


def compare_modes(world, x: Tensor, modes: Sequence[str], repeats: int = 3,
                  class_batch: int | None = None) -> dict[str, dict[str, float]]:
    """Per precision mode: ``evals_per_s`` ((image x class) evaluations of log p(x|k) per second,
    the median of `repeats` timings with the modes interleaved, so load from other processes
    hits every mode), ``speed_vs_float32`` (when float32 is among `modes`) and its error against
    float64 (`measure_precision`, and ``max_abs_dlogp_per_dim``)."""
    n_evals = x.shape[0] * world.num_classes
    times: dict[str, list[float]] = {m: [] for m in modes}

    def sync() -> None:
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)

    for _ in range(repeats):
        for mode in modes:
            with world.scoring(mode):
                log_likelihoods(world, x[:2], class_batch=class_batch)  # warm-up (float64 copy, kernels)
                sync()
                t0 = time.perf_counter()
                log_likelihoods(world, x, class_batch=class_batch)
                sync()
                times[mode].append(time.perf_counter() - t0)
    dims = x[0].numel()
    out = {}
    for mode in modes:
        err = measure_precision(world, x, mode)
        out[mode] = {"evals_per_s": n_evals / statistics.median(times[mode]), **err,
                     "max_abs_dlogp_per_dim": err["max_abs_dlogp"] / dims}
    if "float32" in out:
        for mode in modes:
            out[mode]["speed_vs_float32"] = out[mode]["evals_per_s"] / out["float32"]["evals_per_s"]
    return out
