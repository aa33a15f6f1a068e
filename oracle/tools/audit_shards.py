"""Re-score every row (or k random rows) of every sample shard with the run's oracle file and
compare log p(x|k) with the stored values, within the shard's recorded precision bound (part of
``audit --check-numbers``).

A shard's record proves its bytes and its settings, not its science: a shard whose
log-likelihoods were edited, with its record and ``all.h5``'s hash list re-signed, passes every
hash check, and every number computed from it follows. Its rows, though, can be scored again:
``log p(x|k)`` of the stored x under the world the *config* names (its prior and temperatures,
not the shard's own attributes, so forged attributes show too), with the run's flow file, in
float64. The stored values were computed in the shard's precision mode, whose largest error
against float64 was measured when it was written (``precision_max_abs_dlogp``, DESIGN rule 9);
a row that differs by more than `oracle.tools.artifact_diff.BOUND_FACTOR` times that bound
(plus `FLOOR_NATS`) is flagged. On a GPU the same check catches a precision mode gone wrong.

All rows by default: a sample drawn from a seed anyone can read in the code lets a forger edit
the rows it never draws, so a sample (``rows=k``) is drawn from a fresh seed unless one is given,
and the notes print it so the same rows can be drawn again. Cost: one float64 flow pass per
row and class (docs/provenance.md gives it per preset).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from oracle.errors import ConfigError, DataError, OracleError
from oracle.tools.artifact_diff import BOUND_FACTOR

__all__ = ["FLOOR_NATS", "fresh_seed", "parse_rows", "rescore_shards"]

#: Differences below this many nats are float64 rounding, whatever the bound.
FLOOR_NATS = 1e-6


#: Rows scored in one flow call: bounds the memory of a whole-shard re-score.
CHUNK_ROWS = 256


def parse_rows(text: str) -> int | None:
    """``--rows``: 'all' -> None (every row), else a count >= 0 (0: none)."""
    import argparse

    if text.strip().lower() == "all":
        return None
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'all' nor a row count") from None
    if k < 0:
        raise argparse.ArgumentTypeError(f"{k} rows: give 'all', a positive count or 0 (none)")
    return k


def fresh_seed() -> int:
    """A seed from the operating system's entropy (31 bits, so it prints and types easily)."""
    return secrets.randbits(31)


def _rows(n: int, k: int | None, seed: int | None, world_index: int, shard: int) -> np.ndarray:
    """Row indices to re-score, sorted: all `n` when `k` is None or >= n, else `k` distinct rows
    drawn from (seed, world_index, shard)."""
    if k is None or k >= n:
        return np.arange(n)
    rng = np.random.default_rng([int(seed), world_index, shard])
    return np.sort(rng.choice(n, size=k, replace=False))


def rescore_shards(run_dir: str | os.PathLike, config: Mapping, rows: int | None = None, seed: int | None = None,
                   device: str | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes): re-score every row (`rows` None) or `rows` random rows per shard of
    every world of `config` in `run_dir` (module docstring). A sample is drawn from `seed`, or
    from a fresh seed when None; the first note names the seed. A problem names the shard, the
    largest difference, its row and class, and the bound; a note says what was checked.
    device: where the flow runs (default the config's ``device``)."""
    import torch

    from oracle.devices import pick_device
    from oracle.float_precision_error import float64_reference
    from oracle.posterior import log_likelihoods
    from oracle.workflow.plan import shard_ids, world_specs
    from oracle.workflow.plan.paths import world_file
    from oracle.worlds import world_from_checkpoint

    run = Path(run_dir)
    oracle_file = Path(world_file(run.as_posix(), config))
    if not oracle_file.is_file():
        return [f"{oracle_file} is missing: no shard can be re-scored"], []
    dev = pick_device(device or config.get("device"))
    passes = {"class_batch": config["samples"].get("class_batch")}
    problems: list[str] = []
    notes: list[str] = []
    if rows is not None:
        if rows < 1:
            raise ConfigError(f"rows={rows}: re-score at least one row per shard (or all of them)")
        seed = fresh_seed() if seed is None else int(seed)
        notes.append(f"shard rows: {rows} per shard drawn with seed {seed} (--rows {rows} --seed {seed} draws them again)")
    for w_index, (name, spec) in enumerate(world_specs(config).items()):
        try:
            world = world_from_checkpoint(oracle_file, prior=spec["prior"], label_temperature=spec["label_temperature"],
                                          base_temperature=spec["base_temperature"], map_location=dev)
        except OracleError as exc:
            problems.append(f"world {name!r}: cannot load it from {oracle_file} ({exc})")
            continue
        for sid in shard_ids(spec["n_shards"]):
            path = run / "samples" / name / f"shard-{sid}.h5"
            if not path.is_file():
                continue
            try:
                problems += _rescore_one(path, world, passes, rows, seed, w_index, int(sid), notes,
                                         float64_reference, log_likelihoods, torch)
            except (OSError, KeyError, DataError, ConfigError) as exc:
                problems.append(f"{path}: cannot be re-scored ({type(exc).__name__}: {exc})")
    return problems, notes


def _rescore_one(path: Path, world, passes, rows, seed, w_index, shard, notes, float64_reference,
                 log_likelihoods, torch) -> list[str]:
    import h5py

    with h5py.File(path, "r") as f:
        n = int(f["loglik"].shape[0])
        idx = _rows(n, rows, seed, w_index, shard)
        bound = float(f.attrs.get("precision_max_abs_dlogp", 0.0) or 0.0)
        index = np.asarray(f["index"][idx]) if "index" in f else idx
        diff = np.concatenate([_chunk_diff(f, idx[i:i + CHUNK_ROWS], world, passes, float64_reference,
                                           log_likelihoods, torch) for i in range(0, len(idx), CHUNK_ROWS)])
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    d = float(diff[worst])
    tol = BOUND_FACTOR * bound + FLOOR_NATS
    notes.append(f"{path}: {len(idx)} row(s) re-scored{' (all)' if len(idx) == n else ''}, max |d log p(x|k)| {d:.3g} nats (recorded bound {bound:.3g})")
    if not d <= tol:
        return [f"{path}: log p(x|k) re-scored with the run's oracle file differs from the stored value by {d:.4g} nats "
                f"(sample {int(index[worst[0]])}, class {int(worst[1])}), more than {BOUND_FACTOR:g} x its recorded "
                f"precision bound {bound:.3g} nats: the shard is not what its world gives"]
    return []


def _chunk_diff(f, idx: np.ndarray, world, passes, float64_reference, log_likelihoods, torch) -> np.ndarray:
    """|stored - re-scored| log p(x|k) [len(idx), K] in nats for rows `idx` of the open shard `f`."""
    # a run of consecutive rows reads as a slice: h5py's point selection is far slower
    sel = slice(int(idx[0]), int(idx[-1]) + 1) if int(idx[-1]) - int(idx[0]) + 1 == len(idx) else idx
    x = f["x"][sel]
    stored = np.asarray(f["loglik"][sel], dtype=np.float64)
    xt = torch.as_tensor(x, device=world.device if hasattr(world, "device") else "cpu")
    with torch.no_grad():
        ref = (float64_reference(world, xt, passes) if hasattr(world, "scoring")
               else log_likelihoods(world, xt, **passes))
    return np.abs(stored - ref.detach().double().cpu().numpy())
