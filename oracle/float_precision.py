"""Precision modes of the oracle's log-likelihoods, and their measured bound (DESIGN rule 9).

A flow world scores ``log p(x|k)`` in one of these modes (the samples themselves are always
drawn at the flow's own dtype, and every per-image sum -- the log-determinants and the base
term -- is accumulated in float64 whatever the mode, `oracle.flows`):

``float64``  a float64 copy of the flow: the reference, slow on most GPUs;
``float32``  float32 weights and IEEE float32 matmuls (TF32 switched off for the call);
``tf32``     float32 weights, TF32 tensor-core matmuls (CUDA only);
``bf16``     bfloat16 autocast of the network (LayerNorm, softmax and the sums stay float32/64).

"Exact" then means exact up to the error of the mode against float64 on the same weights,
measured on samples of the world itself (`oracle.float_precision_error.measure_precision`)
and written into every shard (`oracle.sample_shards`): the largest |d log p(x|k)| (nats), the largest |d p_T(y|x)| and the largest
KL(p64 || p_mode) (nats). ``auto`` takes the first mode of `fastest_first` whose posterior error
stays below a tolerance (`oracle.float_precision_error.choose_precision`); the order comes from scripts/bench/precision.py
(docs/benchmarks.md), not from timing each shard (too noisy to decide anything).
Analytic worlds are computed in float64 only; their bound is 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from oracle.errors import ConfigError

PRECISIONS = ("float64", "float32", "tf32", "bf16")
#: Accepted by `oracle.float_precision_error.choose_precision` and by the config's ``samples.precision``.
MODES = ("auto", *PRECISIONS)


def fastest_first(device: torch.device | str) -> tuple[str, ...]:
    """The modes ``auto`` tries on `device`, fastest first (docs/benchmarks.md): on CUDA bf16,
    TF32, float32; on a CPU float32 alone (TF32 does not exist there and bf16 autocast is
    slower than float32 on CPUs without bf16 matrix units, measured there too)."""
    return ("bf16", "tf32", "float32") if torch.device(device).type == "cuda" else ("float32",)


def check_mode(mode: str, device: torch.device | str, allow_auto: bool = False) -> str:
    """`mode` itself; ConfigError for an unknown mode or TF32 off CUDA."""
    known = MODES if allow_auto else PRECISIONS
    if mode not in known:
        raise ConfigError(f"precision {mode!r}: expected one of {', '.join(known)}")
    if mode == "tf32" and torch.device(device).type != "cuda":
        raise ConfigError(f"precision 'tf32' is a CUDA mode; the world is on {torch.device(device)}")
    return mode


@contextlib.contextmanager
def matmul_precision(mode: str, device: torch.device | str) -> Iterator[None]:
    """Inside: float32 matmuls as `mode` asks (IEEE for float32, TF32 for tf32); the process's
    setting is restored on exit. Other modes leave it alone."""
    if torch.device(device).type != "cuda" or mode not in ("float32", "tf32"):
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if mode == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def autocast_dtype(mode: str) -> torch.dtype | None:
    """The autocast dtype of `mode` (bfloat16 for bf16, None otherwise)."""
    return torch.bfloat16 if mode == "bf16" else None
