"""Is an input the artifact this run's rule would have made? The check a job (and the audit)
applies to every file it reads before trusting it.

An input under ``results/`` must have a provenance record (`oracle.workflow.provenance`), and
that record must describe the file as it lies now and the run as it is configured now:

- its bytes: the size and modification time recorded, or else the same sha256;
- its place: the record's ``id`` names the path where the file lies (compared below
  ``results/<run>/``, so a copied results tree still passes) and every wildcard value of the
  record appears in that path;
- what it was made from, one level: each input its record lists that is a pipeline artifact
  (under ``results/``) and still exists has the sha256 recorded for it (raw data is not
  rehashed here: the audit does that);
- a file reached through a symbolic link whose record was written for another path (another
  run's folder, another checkout's) is that run's artifact, not this run's;
- for oracle samples (HDF5 files with an ``oracle_sha256`` attribute: shards, the merged file,
  noisy test sets): ``world_name``, prior, temperatures and seed are those of the world the
  record's ``world`` wildcard names in the current config, ``shard`` and ``n_shards`` are the
  shard's, and ``oracle_sha256`` is the sha256 of the run's oracle file now;
- it is in the layout its readers expect (`oracle.io.layout`: HDF5 shapes and dtypes, a checkpoint
  that loads, JSON that parses), so a damaged file whose record was re-signed is refused here;
- a file that only refers to others (``extra.references``: the shards behind ``all.h5``) has
  each of them checked the same way, and each must still have the sha256 that the referring
  file's record lists for it.

A file without a record is raw data only when it lies outside ``results/`` and the config
names it (the data root's files, an imported checkpoint, a weight file); anything else is an
error. Every failure is one line naming the file, what differs and the rule to rerun.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from oracle.errors import ConfigError, DataError
from oracle.io.hashing import file_sha256
from oracle.io.layout import check_layout
from oracle.workflow.plan.paths import run_dir, run_relative, world_file  # noqa: F401 - run_relative: this module's API
from oracle.workflow.provenance import read_record, resolve_recorded_path

#: The folder every run's artifacts live under (``results/<run>/...``, rules/common.smk).
#: float32 resolution of a prior entry: a prior stored as float32 still matches its spec.
PRIOR_ATOL = 1e-6


# --------------------------------------------------------------------------- places
def in_results(path: str | os.PathLike) -> bool:
    """Whether `path` lies under some ``results/<run>/`` folder (a pipeline output)."""
    return run_relative(path) is not None


def config_paths(config: Mapping | None, root: str | os.PathLike | None = None) -> list[Path]:
    """The files and folders outside the results tree that `config` names: the raw files its
    ``data`` spec reads (`oracle.io.raw_files.raw_data_inputs`) and every string value of the
    config that is an existing path (a data root, an imported checkpoint, a weight file).
    Relative values are taken from the working directory and from `root` (where the run ran,
    for a results tree audited after a move)."""
    if not config:
        return []
    out: list[Path] = []
    if isinstance(config.get("data"), Mapping):
        from oracle.io.raw_files import raw_data_inputs

        try:
            out += [Path(p) for p in raw_data_inputs(config["data"])[0]]
        except (DataError, ConfigError, KeyError, OSError):
            pass  # missing data is the data rule's error, not this check's
    bases = [Path.cwd()] + ([Path(root)] if root is not None else [])

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for v in node.values():
                walk(v)
        elif isinstance(node, (list, tuple)):
            for v in node:
                walk(v)
        elif isinstance(node, str) and node and ("/" in node or "." in node):
            for base in bases:
                p = base / os.path.expanduser(node)
                if p.exists() and not in_results(p):
                    out.append(p)

    walk(config)
    return out


def named_by_config(path: str | os.PathLike, config: Mapping | None, root: str | os.PathLike | None = None) -> bool:
    """Whether `path` is (or lies under) a file or folder the config names (`config_paths`)."""
    p = Path(os.path.realpath(path))
    for named in config_paths(config, root):
        q = Path(os.path.realpath(named))
        if p == q or q in p.parents:
            return True
    return False


# --------------------------------------------------------------------------- one record
def _rerun(record: Mapping, path: str | os.PathLike) -> str:
    return f"snakemake --forcerun {path} (rule {record.get('rule')!r})"


def recorded_place(record: Mapping) -> Path | None:
    """The absolute path the record was written for: its ``id`` under its ``workdir``."""
    rid = str(record.get("id") or (record.get("artifact") or {}).get("path") or "")
    if not rid:
        return None
    p = Path(rid)
    if p.is_absolute():
        return p
    workdir = record.get("workdir")
    return Path(workdir) / p if workdir else None


def linked_elsewhere(path: str | os.PathLike, record: Mapping) -> str | None:
    """Why the file at `path` is another place's artifact, or None: it is reached through a
    symbolic link (its real path differs) and its record was written for another path than
    this one (another run's folder or another checkout's), e.g. ``results/<run>`` linked to
    another clone's run. A results tree copied (not linked) into another clone, or linked
    to scratch space by the run that wrote it, is not."""
    here = Path(os.path.abspath(path))
    real = Path(os.path.realpath(path))
    place = recorded_place(record)
    if real == here or place is None or Path(os.path.abspath(place)) == here:
        return None
    return (f"it lies at {real} (reached through a link) and its record was written for {place}, "
            f"by the run in {record.get('workdir')}")


def place_problems(path: str | os.PathLike, record: Mapping, links: bool = True) -> list[str]:
    """Whether `record` describes the file at `path`: its ``id`` names that place (below the
    run folder), its wildcard values appear in it, and (`links`) it is not another run's or
    checkout's file reached through a link (`linked_elsewhere`)."""
    linked = linked_elsewhere(path, record) if links else None
    if linked:
        return [f"it is another run's artifact: {linked}"]
    rid = str(record.get("id") or (record.get("artifact") or {}).get("path") or "")
    here, there = run_relative(path), run_relative(rid) if rid else None
    if here is None or there is None:
        # outside a run folder: the record's own resolution of its id must land on this file
        if rid and os.path.abspath(resolve_recorded_path(rid, record, path)) != os.path.abspath(path):
            return [f"its record is the record of {rid}, not of this file"]
        return []
    if here != there:
        return [f"its record is the record of {rid} (rule {record.get('rule')!r}, wildcards "
                f"{_wildcards_text(record)}), not of this place"]
    out = []
    for name, value in (record.get("wildcards") or {}).items():
        if str(value) not in here:
            out.append(f"its record's wildcard {name}={value} does not match its place {here}")
    return out


def _wildcards_text(record: Mapping) -> str:
    wc = record.get("wildcards") or {}
    return " ".join(f"{k}={v}" for k, v in wc.items()) or "none"


def recorded_sha256(path: Path) -> str:
    """What an artifact is, by its record: the sha256 its own record holds (no rehash: whether
    its bytes still match is its own check, made wherever it is read), or its hash when it has
    no record. Snakemake touches every output after its job, so a record's modification time
    never matches the file's and cannot spare the hash; the record's sha256 can."""
    from oracle.io.hashing import path_sha256

    rec = read_record(path, missing_ok=True) if path.is_file() else None
    sha = ((rec or {}).get("artifact") or {}).get("sha256")
    return str(sha) if sha else path_sha256(path)


def made_from_problems(path: str | os.PathLike, record: Mapping,
                       sha_of: Callable[[Path], str] = recorded_sha256) -> list[str]:
    """One level up: the recorded inputs of `path` that are pipeline artifacts (under
    ``results/``), exist and are another artifact now (`recorded_sha256`) than the one `record`
    lists for them, one phrase each. Missing inputs (a temporary model after use) and raw data
    are skipped. `sha_of`: `recorded_sha256`, or a cached version of it."""
    out = []
    # the files it refers to (the shards behind all.h5) are checked as inputs of their own
    refs = {os.path.abspath(resolve_recorded_path(r, record, path)) for r in (record.get("extra") or {}).get("references", [])}
    for inp, recorded in (record.get("inputs") or {}).items():
        q = resolve_recorded_path(inp, record, path)
        if not in_results(q) or not q.exists() or os.path.abspath(q) in refs:
            continue
        now = sha_of(q)
        if now != recorded:
            out.append(f"it was made from another {inp} (sha256 {str(recorded)[:12]}; the file there now is {now[:12]})")
    return out


def sample_attr_problems(path: str | os.PathLike, record: Mapping, config: Mapping | None,
                         oracle_sha256: Callable[[], str | None]) -> list[str]:
    """For an oracle samples file (HDF5 with ``oracle_sha256``): its attributes against the
    world its record's ``world`` wildcard names in `config`, the shard its ``shard`` wildcard
    names, and the run's oracle file now (`oracle_sha256()`: its sha256, None when absent)."""
    p = Path(path)
    if p.suffix not in (".h5", ".hdf5"):
        return []
    from oracle.io.h5_attrs import file_attrs

    import h5py

    try:
        with h5py.File(p, "r") as f:
            attrs = file_attrs(f)
    except OSError:
        return []  # not HDF5 (its bytes are the recorded ones): not a samples file
    if "oracle_sha256" not in attrs:
        return []
    out = []
    sha = oracle_sha256()
    if sha is not None and attrs["oracle_sha256"] != sha:
        out.append(f"it was drawn from another oracle (oracle_sha256 {str(attrs['oracle_sha256'])[:12]}, "
                   f"the run's oracle file is {sha[:12]})")
    wc = record.get("wildcards") or {}
    world = wc.get("world")
    is_shard_set = "shard" in wc or bool(attrs.get("merged"))
    if world is not None:
        if "world_name" in attrs and str(attrs["world_name"]) != str(world):
            out.append(f"it holds samples of world {attrs['world_name']!r}, not of world {world!r}")
        elif "world_name" not in attrs and is_shard_set:
            out.append("it has no world_name attribute")
        if config is not None:
            out += _world_problems(attrs, config, str(world), is_shard_set)
    if "shard" in wc and "shard" in attrs and int(attrs["shard"]) != int(wc["shard"]):
        out.append(f"it is shard {int(attrs['shard'])}, not shard {int(wc['shard'])}")
    return out


def _world_problems(attrs: Mapping, config: Mapping, world: str, is_shard_set: bool) -> list[str]:
    import numpy as np

    from oracle.world_specs import resolve_prior, world_spec

    try:
        spec = world_spec(config, world)
    except (ConfigError, KeyError) as exc:
        return [f"its world {world!r} is not a world of the config now ({exc})"]
    out = []
    for key in ("label_temperature", "base_temperature"):
        if key in attrs and float(attrs[key]) != float(spec[key]):
            out.append(f"its {key} is {float(attrs[key])}, world {world!r} has {float(spec[key])}")
    if "seed" in attrs and int(attrs["seed"]) != int(spec["seed"]):
        out.append(f"it was drawn with seed {int(attrs['seed'])}, world {world!r} has seed {int(spec['seed'])}")
    if is_shard_set and "n_shards" in attrs and int(attrs["n_shards"]) != int(spec["n_shards"]):
        out.append(f"it is one of {int(attrs['n_shards'])} shards, world {world!r} has {int(spec['n_shards'])}")
    if "prior" in attrs:
        stored = np.asarray(attrs["prior"], dtype=np.float64)
        try:
            want = np.asarray(resolve_prior(spec["prior"], len(stored), f"worlds.{world}.prior"), dtype=np.float64)
        except ConfigError as exc:
            return out + [f"its prior does not fit world {world!r} ({exc})"]
        if want.shape != stored.shape or not np.allclose(stored, want, rtol=0, atol=PRIOR_ATOL):
            out.append(f"its prior {stored.round(4).tolist()} is not world {world!r}'s {want.round(4).tolist()}")
    return out


# --------------------------------------------------------------------------- a job's inputs
def _flat_paths(inputs: Any) -> list[str]:
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)]
    if isinstance(inputs, Mapping):
        inputs = list(inputs.values())
    out: list[str] = []
    for item in inputs or ():
        out += _flat_paths(item)
    return out


def oracle_hasher(config: Mapping | None, run: str | os.PathLike | None = None) -> Callable[[], str | None]:
    """A function giving the sha256 of the run's oracle file (hashed once, on first call;
    None without a config or an oracle file). `run`: the run folder (default ``run_dir(config)``)."""
    cache: dict[str, str | None] = {}

    def sha() -> str | None:
        if "v" not in cache:
            cache["v"] = None
            if config is not None and (run is not None or "run" in config):
                folder = Path(run) if run is not None else Path(run_dir(config))
                f = Path(world_file(folder.as_posix(), config))
                cache["v"] = file_sha256(f) if f.is_file() else None
        return cache["v"]

    return sha


def check_inputs(inputs: Any, config: Mapping | None = None) -> list[Path]:
    """Check that every input is the artifact this run's rule would have made (module
    docstring); returns the files checked against a record (referenced files included).

    inputs: paths (str/Path, nested lists, or a mapping such as Snakemake's ``input``).
    config: the run config (None: bytes, places and records only; nothing compared with a
            config, and every record-less file outside ``results/`` is taken as raw data).
    Raises DataError with one line naming the first input that fails, what differs and the
    rule to rerun.
    """
    checked: list[Path] = []
    seen: set[str] = set()
    sha = oracle_hasher(config)
    # (path, the sha256 a referring file's record lists for it, that file)
    queue: list[tuple[Path, str | None, Path | None]] = [(Path(p), None, None) for p in _flat_paths(inputs)]
    while queue:
        path, expected, referrer = queue.pop(0)
        key = os.path.abspath(path)
        if key in seen or not path.exists():
            continue
        seen.add(key)
        rec = read_record(path, missing_ok=True)
        if rec is None:
            if in_results(path):
                raise DataError(f"{path} has no provenance record: it is not an artifact this run made "
                                f"(a pipeline output needs its {path.name}.prov.json); delete it so its rule remakes it")
            if config is not None and not named_by_config(path, config):
                raise DataError(f"{path} has no provenance record and the config names no such raw file: "
                                "only data roots, checkpoints and weight files the config names are raw inputs")
            _check_layout(path, None)
            continue
        if path.is_file():
            _check_bytes(path, rec, expected, referrer)
            # bytes as recorded can still be unreadable (a record re-signed over a damaged file)
            _check_layout(path, rec)
        problems = place_problems(path, rec)
        problems += sample_attr_problems(path, rec, config, sha)
        problems += made_from_problems(path, rec)
        if problems:
            raise DataError(f"{path} is not the artifact this run's rule would make: {problems[0]}"
                            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
                            + f"; remake it: {_rerun(rec, path)}")
        checked.append(path)
        recorded_inputs = {os.path.abspath(resolve_recorded_path(k, rec, path)): h
                           for k, h in (rec.get("inputs") or {}).items()}
        for ref in (rec.get("extra") or {}).get("references", []):
            rpath = resolve_recorded_path(ref, rec, path)
            queue.append((rpath, recorded_inputs.get(os.path.abspath(rpath)), path))
    return checked


def _check_layout(path: Path, rec: Mapping | None) -> None:
    """`oracle.io.layout.check_layout`, its one line ending with how to remake the file."""
    try:
        check_layout(path)
    except DataError as exc:
        raise DataError(f"{exc}: restore it" + (f", or remake it: {_rerun(rec, path)}" if rec else "")) from None


def _check_bytes(path: Path, rec: Mapping, expected: str | None, referrer: Path | None) -> None:
    """The file's bytes against its own record and, for a referenced file, the sha256 its
    referrer recorded for it. Size and mtime as recorded skip hashing its own record's check."""
    art = rec.get("artifact") or {}
    st = path.stat()
    now = None
    if (art.get("size"), art.get("mtime_ns")) != (st.st_size, st.st_mtime_ns):
        now = file_sha256(path)
        if art.get("sha256") and now != art["sha256"]:
            raise DataError(
                f"{path} changed since rule {rec.get('rule')!r} made it (sha256 {now[:12]}, recorded "
                f"{art['sha256'][:12]}): restore it, or remake it: {_rerun(rec, path)}")
    if expected is not None:
        now = now or file_sha256(path)
        if now != expected:
            raise DataError(
                f"{path} is not the file {referrer} was made from (sha256 {now[:12]}, {referrer} recorded "
                f"{expected[:12]}): restore it, or remake both: snakemake --forcerun {path} {referrer}")


def check_pending_inputs(job_inputs: Iterable[Iterable[str]], outputs: Iterable[str],
                         config: Mapping | None) -> list[Path]:
    """`check_inputs` over the inputs of the jobs a workflow run is about to start that exist
    now and no job of the run remakes (`outputs`: every output of those jobs), before any of
    those jobs removes its outputs. Each file is checked once."""
    remade = {os.path.abspath(p) for p in outputs}
    todo: dict[str, str] = {}
    for paths in job_inputs:
        for p in paths:
            key = os.path.abspath(p)
            if key not in remade and key not in todo and os.path.exists(p):
                todo[key] = p
    return check_inputs(list(todo.values()), config)
