"""Draw labelled samples from a world and store them, with their exact log-likelihoods, as a shard.

Conventions (they make a shard a pure function of its arguments):

* **Randomness.** Batch ``b`` of shard ``s`` of a run with seed ``seed`` is drawn with a fresh
  ``torch.Generator`` seeded by :func:`batch_seed` ``(seed, s, b)`` (a sha256 of the three
  numbers). Classes ``y ~ prior`` and then ``x ~ p(x|y)`` come from that generator.
* **Labels (DESIGN rule 8).** The label stored with a sample is a draw from the world's
  posterior ``p_T(y|x)``, so that p_T is the true posterior of the labelled data and its Bayes
  accuracy bounds every classifier. At T = 1 the source class *is* such a draw (x and y come
  from the joint), so ``label = source_class`` and nothing more is drawn. At T != 1 the label
  is drawn by inverse CDF from the float64 posterior of the stored log-likelihoods, with its
  own stream seeded by :func:`label_seed` ``(seed, s, b)``: the samples themselves do not
  change with T. A shard
  therefore depends on ``(world, n, seed, shard, batch_size, generator_device)`` and on
  nothing else -- in particular not on how far an earlier, killed attempt got: a resumed
  shard is identical to one written in one go. (Bit-identical across devices only on CPU;
  GPU kernels may differ in the last bits.)
* **Global indices.** Row ``i`` of shard ``s`` has ``index = index_offset + i`` with
  ``index_offset = s * n`` by default, i.e. every shard of a run has the same ``n`` and the
  indices of the run are ``0 .. n_shards*n - 1`` without gaps or overlap. Pass
  ``index_offset`` explicitly for uneven shards.
* **Exactness (DESIGN rules 2, 9).** Samples are rounded to float32 first; ``log p(x|k)`` for
  every class k is then computed at exactly the stored float32 values, in the world's precision
  mode with float64 sums (`oracle.float_precision`). Before the first row, the mode's error against
  float64 is measured on ``precision_rows`` samples of the world drawn from a stream of their
  own (:func:`precision_seed`: the shard's rows do not change) and stored as the shard's
  ``precision_*`` attributes; ``precision="auto"`` picks the fastest mode within tolerance.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping

import numpy as np
import torch

from oracle.progress import Progress
from oracle.errors import ShardError
from oracle.posterior import log_likelihoods, log_posterior, pass_rows
from oracle.io.shards import ShardWriter

__all__ = ["batch_seed", "label_seed", "precision_seed", "draw_labels", "precision_attrs", "write_sample_shard"]

# attributes the sampler owns: they must describe the world and call, so callers may not set them
_OWNED = ("prior", "label_temperature", "base_temperature", "seed", "shard", "n_shards")


def batch_seed(seed: int, shard: int, batch: int) -> int:
    """A 63-bit seed for batch ``batch`` of shard ``shard`` of a run seeded ``seed``."""
    digest = hashlib.sha256(f"oracle.sampling/v1:{int(seed)}:{int(shard)}:{int(batch)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def label_seed(seed: int, shard: int, batch: int) -> int:
    """A 63-bit seed of the label draws of batch ``batch`` of shard ``shard`` (T != 1)."""
    digest = hashlib.sha256(f"oracle.sampling/labels/v1:{int(seed)}:{int(shard)}:{int(batch)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def precision_seed(seed: int, shard: int) -> int:
    """A 63-bit seed of the samples a shard measures its precision bound on."""
    digest = hashlib.sha256(f"oracle.sampling/precision/v1:{int(seed)}:{int(shard)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def precision_attrs(world, mode: str | None, rows: int, tolerance: float, seed: int, shard: int,
                    generator_device: str = "cpu", class_batch: int | None = None,
                    max_rows: int | None = None) -> dict:
    """Set the world's scoring precision (`mode`; None keeps the world's, "auto" chooses) and
    measure its error against float64 on `rows` samples of the world (DESIGN rule 9), in the
    likelihood passes of the shard (`class_batch`, `max_rows` as in `log_likelihoods`):
    the shard attributes ``precision``, ``precision_tolerance``, ``precision_rows``,
    ``precision_max_abs_dlogp`` (nats), ``precision_max_abs_dp``, ``precision_max_kl`` (nats)."""
    from oracle.float_precision_error import choose_precision, measure_precision

    passes = {"class_batch": class_batch, "max_rows": max_rows}
    gen = torch.Generator(device=generator_device).manual_seed(precision_seed(seed, shard))
    x, _ = world.sample(int(rows), gen)
    x32 = x.detach().to("cpu", torch.float32)
    if not hasattr(world, "scoring"):  # an analytic world computes in float64 only
        chosen, err = "float64", measure_precision(world, x32, "float64")
    elif mode == "auto":
        chosen, err = choose_precision(world, x32, tolerance, passes=passes)
    else:
        chosen = mode or world.precision
        err = measure_precision(world, x32, chosen, passes=passes)
    if hasattr(world, "scoring"):
        world.precision = chosen
    return {"precision": chosen, "precision_tolerance": float(tolerance), "precision_rows": int(rows),
            **{f"precision_{k}": float(v) for k, v in err.items()}}


def draw_labels(log_post: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One class per row from the posteriors ``log_post`` [n, K] (natural log, rows sum to 1 in
    probability): int64 [n], by inverse CDF with one float64 uniform per row from `generator`."""
    p = torch.exp(log_post.to(torch.float64))
    cdf = torch.cumsum(p, dim=1)
    u = torch.rand(p.shape[0], dtype=torch.float64, generator=generator) * cdf[:, -1]
    # searchsorted(right) gives the first k with cdf_k > u; the clamp guards u == cdf_K rounding
    return torch.searchsorted(cdf, u.unsqueeze(1), right=True).squeeze(1).clamp_(max=p.shape[1] - 1)


def _default_code_version() -> str:
    try:
        from oracle.code_version import code_version

        info = code_version()
        return f"{info.get('commit', 'unknown')}{'-dirty' if info.get('dirty') else ''}"
    except Exception:  # provenance is best effort here; the caller can pass code_version
        return "unknown"


def write_sample_shard(world, path: str | os.PathLike, n: int, seed: int, shard: int, n_shards: int,
                       batch_size: int = 256, class_batch: int | None = None,
                       attrs: Mapping | None = None, generator_device: str = "cpu",
                       index_offset: int | None = None, resume: bool = True,
                       progress: bool = True, precision: str | None = None,
                       precision_rows: int = 16, precision_tolerance: float = 1e-4) -> dict:
    """Sample ``n`` labelled examples from ``world`` into the shard file ``path``.

    Args:
        world: an :mod:`oracle.worlds` world (its prior and temperatures are used and stored).
        path: the shard to write (HDF5, DESIGN.md format); appears only when complete.
        n: rows in this shard.
        seed, shard, n_shards: the run's seed, this shard's number in [0, n_shards), the count.
        batch_size: samples per generator batch (part of the shard's identity, see module doc).
        class_batch: classes per likelihood forward pass (None = all K); when set, a pass
            also holds at most `batch_size` (image, class) pairs (`oracle.posterior.pass_rows`).
        attrs: extra file attributes, e.g. ``oracle_sha256`` (sha256 of the flow file; default
            ``world.fingerprint()``) and ``code_version`` (default: git commit of the code).
            Keys describing the world (prior, temperatures, seed, shard, n_shards) are set here
            and may not disagree.
        generator_device: device of the torch.Generator ("cpu" or "cuda"; flows draw their
            latents there, so a seed gives the same latents on any model device).
        index_offset: first global index (default ``shard * n``).
        resume: continue a partial file left by a killed attempt (same arguments required).
        progress: a progress line (`oracle.progress`) every ~10 s.
        precision: the scoring mode (`oracle.float_precision`; None = the world's, "auto" = the
            fastest within `precision_tolerance` of float64 in max |d p(y|x)|); its error is
            measured on `precision_rows` samples and stored (`precision_attrs`).

    Returns ``{"path", "rows", "index_start", "index_stop", "class_counts", "resumed_rows",
    "wall_s", "samples_per_s"}``.
    """
    n, seed, shard, n_shards = int(n), int(seed), int(shard), int(n_shards)
    batch_size = int(batch_size)
    if n < 0 or batch_size < 1 or n_shards < 1 or not 0 <= shard < n_shards:
        raise ShardError(
            f"{path}: bad sampling arguments n={n}, batch_size={batch_size}, shard={shard}, "
            f"n_shards={n_shards}; expected n >= 0, batch_size >= 1, 0 <= shard < n_shards"
        )
    offset = shard * n if index_offset is None else int(index_offset)
    K = world.num_classes
    file_attrs = dict(attrs or {})
    owned = {
        "prior": world.prior.numpy(),
        "label_temperature": float(world.label_temperature),
        "base_temperature": float(world.base_temperature),
        "seed": seed, "shard": shard, "n_shards": n_shards,
    }
    for key in _OWNED:
        if key in file_attrs and not np.array_equal(np.asarray(file_attrs[key]), np.asarray(owned[key])):
            raise ShardError(f"{path}: attrs[{key!r}]={file_attrs[key]!r} disagrees with the world/call value {owned[key]!r}")
    file_attrs.update(owned)
    file_attrs.setdefault("oracle_sha256", world.fingerprint())
    file_attrs.setdefault("code_version", _default_code_version())
    file_attrs.update(precision_attrs(world, precision, precision_rows, precision_tolerance, seed, shard,
                                      generator_device, class_batch, pass_rows(batch_size, class_batch)))
    tempered = float(world.label_temperature) != 1.0
    file_attrs.update(batch_size=batch_size, generator_device=str(generator_device),
                      index_offset=offset, n=n, world=type(world).__name__, sampler="oracle.sampling/v1",
                      label_rule=("drawn from p_T(y|x) (oracle.sampling/labels/v1)" if tempered
                                  else "source class (T = 1: a draw from p(y|x))"))

    t0 = time.perf_counter()
    counts = np.zeros(K, dtype=np.int64)
    with ShardWriter(path, K, world.event_shape, file_attrs, resume=resume) as writer:
        # restart at a batch boundary: everything before it is reproduced bit for bit anyway
        done_batches = writer.rows // batch_size
        if writer.rows != done_batches * batch_size:
            writer.truncate(done_batches * batch_size)
        resumed = writer.rows
        if resumed:
            counts += np.bincount(writer.written("source_class"), minlength=K)
        n_batches = -(-n // batch_size)
        bar = Progress(f"shard {shard}", n, unit="sample", start=resumed, enabled=progress)
        for b in range(done_batches, n_batches):
            m = min(batch_size, n - b * batch_size)
            gen = torch.Generator(device=generator_device).manual_seed(batch_seed(seed, shard, b))
            x, y = world.sample(m, gen)
            x32 = x.detach().to("cpu", torch.float32).contiguous()
            ll = log_likelihoods(world, x32, class_batch=class_batch,
                                 max_rows=pass_rows(batch_size, class_batch)).to("cpu")
            y_np = y.detach().to("cpu").numpy().astype(np.int64)
            if tempered:
                post = log_posterior(ll, world.prior, world.label_temperature)
                labels = draw_labels(post, torch.Generator().manual_seed(label_seed(seed, shard, b))).numpy()
            else:
                labels = y_np
            start = offset + b * batch_size
            writer.write(x32.numpy(), y_np, labels, ll.numpy(), np.arange(start, start + m, dtype=np.int64))
            counts += np.bincount(y_np, minlength=K)
            bar.update(start - offset + m)
        bar.finish()
    wall = time.perf_counter() - t0
    return {
        "path": str(path), "rows": n, "index_start": offset, "index_stop": offset + n,
        "class_counts": counts.tolist(), "resumed_rows": int(resumed), "wall_s": wall,
        "samples_per_s": (n - resumed) / wall if wall > 0 else float("nan"),
    }
