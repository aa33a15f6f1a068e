"""Provenance records: one JSON sidecar per artifact, written by one helper.

Every artifact ``A`` of a run gets a record ``A.prov.json`` next to it (for a file *and* for a
directory: the sidecar of directory ``D`` is the sibling file ``D.prov.json``, so it never
changes the directory's own hash). A record holds::

    record_version   2 (1: before records kept their job's params)
    id               the artifact's path relative to the working directory (absolute if outside)
    artifact         {"path", "kind": "file"|"directory", "sha256", "size", ["files"]}
    rule             the Snakemake rule (or script) that made it
    wildcards        {name: value}
    params           the params of the job that made it ({name: value}, canonical JSON:
                     `oracle.workflow.provenance.params.job_params`): all it read of the config
    params_sha256    sha256 of the canonical JSON of ``params``
    inputs           {path: sha256} for every input file or directory
    code             {"commit", "dirty", "diff_sha256", "oracle_version",
                      "files": {repo-relative path: sha256} of the repository's Python files the
                      job imported, and its script}
    packages         {python, torch, numpy, h5py, ...: version}
    device, seed, wall_time_s, started_utc, created_utc, hostname, workdir, slurm_job_id
    extra            anything the caller adds

Paths (``id``, ``artifact.path``, ``inputs`` keys) are relative to ``workdir`` (the process's
working directory when the record was written, normally the repository root where Snakemake
runs) when they lie inside it. A reader resolves them against ``workdir`` when it still exists
and against its own working directory otherwise, so a moved results tree stays auditable.

Params: a rule's script reads the config only through its params, so the params a job ran
with are all it depends on besides its inputs and code; the start check and the audit compare
them with the params Snakemake computes for the same job now
(`oracle.workflow.provenance.params`).

Hashes: sha256 of the file bytes; a directory's hash is the sha256 over the sorted lines
``<relative posix path>\\0<sha256 of file>\\n`` of every regular file below it, excluding
``*.prov.json`` sidecars. Hashes are cached per process by (path, size, mtime_ns).

HDF5 artifacts can also carry the record in the root attribute ``provenance`` (``h5_attr=True``).
That copy lacks the artifact's own hash (a file cannot contain its own hash) and is written
before the sidecar, whose hash then covers it; the sidecar stays the authority.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import math
import os
import platform
import socket
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from oracle.code_version import code_version
from oracle.errors import ConfigError, DataError
from oracle.io.atomic import to_jsonable as _jsonable, write_json_atomic
from oracle.workflow.provenance.params import job_params, params_hash
from oracle.workflow.plan.paths import REPO_ROOT
from oracle.io.hashing import RECORD_SUFFIX, dir_files, file_sha256, path_sha256

RECORD_VERSION = 2
H5_ATTR = "provenance"

# Distribution names (importlib.metadata), read without importing the packages (torch is slow).
_PACKAGES = (
    "torch", "torchvision", "numpy", "scipy", "h5py", "timm", "snakemake", "scikit-learn",
    "pillow", "pandas", "matplotlib", "PyYAML", "oracle",
)

# --------------------------------------------------------------------------- environment
# Folders under the repository whose Python files are not the project's code.
_NOT_CODE = {".venv", "venv", ".snakemake", "site-packages", "__pycache__", ".git", "results"}


def code_files(extra: Iterable[str | os.PathLike] = ()) -> dict[str, str]:
    """sha256 of every Python file of this repository that the process has imported, plus `extra`.

    Keys are paths relative to `REPO_ROOT` (posix); files outside it (installed packages:
    their versions are in ``packages``) and under `_NOT_CODE` folders are skipped. A record
    keeps these so an audit can name the module that changed since an artifact was made,
    rather than only "the commit differs".
    """
    paths = {f for mod in list(sys.modules.values())
             if isinstance(f := getattr(mod, "__file__", None), str) and f.endswith(".py")}
    paths.update(os.fspath(p) for p in extra)
    out: dict[str, str] = {}
    for f in paths:
        real = _real_path(f)
        folder, name = os.path.split(real)
        rel = _code_folder(folder)
        if rel is not None and os.path.isfile(real):
            out[f"{rel}/{name}" if rel else name] = file_sha256(real)
    return dict(sorted(out.items()))


# A process that imported torch & co. holds thousands of modules in a few hundred folders:
# resolving and classifying each folder once keeps a record's code list at a few ms.
@functools.lru_cache(maxsize=None)
def _real_dir(folder: str) -> str:
    return os.path.realpath(folder)


def _real_path(path: str) -> str:
    """``os.path.realpath(path)``, resolving the folder once per process."""
    folder, name = os.path.split(os.path.abspath(path))
    real = os.path.join(_real_dir(folder), name)
    return os.path.realpath(real) if os.path.islink(real) else real


@functools.lru_cache(maxsize=None)
def _code_folder(real_folder: str) -> str | None:
    """The posix path of a resolved folder relative to `REPO_ROOT` ("" for the root itself),
    or None when its files are not this repository's code."""
    try:
        rel = Path(real_folder).relative_to(REPO_ROOT)
    except ValueError:
        return None
    if _NOT_CODE.intersection(rel.parts):
        return None
    return "" if rel == Path(".") else rel.as_posix()


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple:
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return tuple(out.items())


def package_versions() -> dict[str, str | None]:
    """Versions of Python and the packages that shape results (None where not installed)."""
    return dict(_package_versions())


#: Recorded packages whose version can change a result (the tools that only run the workflow,
#: snakemake and PyYAML, and this project, whose files are compared one by one, are left out).
RESULT_PACKAGES = ("python", "torch", "torchvision", "numpy", "scipy", "h5py", "timm", "scikit-learn", "pillow",
                   "pandas", "matplotlib")


def package_drift(recorded: Mapping | None, now: Mapping | None = None) -> list[str]:
    """``"torch 2.3.0 -> 2.4.1"`` for each of `RESULT_PACKAGES` whose version in a record's
    ``packages`` differs from `now` (default the environment's, `package_versions`); a package
    the record does not list is not compared ([] for a record without ``packages``)."""
    now = package_versions() if now is None else now
    return [f"{name} {recorded[name]} -> {now.get(name) or 'not installed'}" for name in RESULT_PACKAGES
            if name in (recorded or {}) and (recorded or {})[name] != now.get(name)]


def describe_device() -> str:
    """The compute device in words, without importing torch if the caller did not."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                return "cuda: " + ", ".join(names)
        except Exception:  # a broken CUDA setup must not break record writing
            pass
    return f"cpu: {platform.processor() or platform.machine()} x{os.cpu_count()}"


# --------------------------------------------------------------------------- records
def record_path(artifact: str | os.PathLike) -> Path:
    """The sidecar of `artifact`: ``<artifact>.prov.json`` (files and directories alike)."""
    p = Path(artifact)
    return p.with_name(p.name + RECORD_SUFFIX)


def display_path(path: str | os.PathLike, workdir: str | os.PathLike | None = None) -> str:
    """`path` relative to `workdir` (default cwd) as posix text if inside it, else absolute."""
    base = Path(workdir) if workdir is not None else Path.cwd()
    p = Path(os.path.abspath(path))
    try:
        return p.relative_to(os.path.abspath(base)).as_posix()
    except ValueError:
        return p.as_posix()


def _flatten_inputs(inputs: Any) -> list[str]:
    if inputs is None:
        return []
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)]
    if isinstance(inputs, Mapping):
        inputs = list(inputs.values())
    out: list[str] = []
    for item in inputs:
        out.extend(_flatten_inputs(item))
    return out


def _utc(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _as_epoch(started: Any) -> float | None:
    if started is None:
        return None
    if isinstance(started, _dt.datetime):
        return started.timestamp()
    if isinstance(started, (int, float)) and math.isfinite(started):
        return float(started)
    raise ConfigError(f"started={started!r}: expected time.time() seconds or a datetime")


def build_record(artifact: str | os.PathLike, *, rule: str, wildcards: Any = None,
                 params: Any = None,
                 inputs: Any = (), seed: int | None = None, started: Any = None,
                 extra: Mapping | None = None, device: str | None = None,
                 hash_artifact: bool = True, code_extra: Iterable[str | os.PathLike] = (),
                 finished: Any = None) -> dict:
    """The record `write_record` writes, as a dict (see the module docstring for the fields).

    `code_extra`: source files besides the imported modules that made the artifact (the
    rule's script), hashed into ``code.files``. `finished`: when the job ended (default now),
    so the outputs of one job share one ``wall_time_s``.
    """
    art = Path(artifact)
    if not art.exists():
        raise DataError(f"cannot record provenance of {art}: the artifact does not exist")
    if not isinstance(rule, str) or not rule:
        raise ConfigError(f"rule={rule!r}: expected the non-empty name of the rule that made {art}")
    workdir = Path.cwd()
    now = _as_epoch(finished) if finished is not None else time.time()
    t0 = _as_epoch(started)

    job_params_ = job_params(params)

    input_hashes: dict[str, str] = {}
    for inp in _flatten_inputs(inputs):
        p = Path(inp)
        if not p.exists():
            raise DataError(f"input {p} of {art} does not exist: cannot record its hash")
        input_hashes[display_path(p, workdir)] = path_sha256(p)

    art_info: dict[str, Any] = {"path": display_path(art, workdir),
                                "kind": "directory" if art.is_dir() else "file"}
    if hash_artifact:
        art_info["sha256"] = path_sha256(art)
    if art.is_dir():
        files = dir_files(art)
        art_info["files"] = len(files)
        art_info["size"] = sum(f.stat().st_size for f in files)
    else:
        st = art.stat()
        # size and mtime as written: a job that reads the artifact later rehashes it only when
        # these differ (oracle.workflow.jobs.verify_inputs)
        art_info["size"], art_info["mtime_ns"] = st.st_size, st.st_mtime_ns

    return {
        "record_version": RECORD_VERSION,
        "id": art_info["path"],
        "artifact": art_info,
        "rule": rule,
        "wildcards": _jsonable(dict(wildcards.items()) if hasattr(wildcards, "items") else (wildcards or {})),
        "params": job_params_,
        "params_sha256": params_hash(job_params_),
        "inputs": input_hashes,
        "code": {**code_version(), "files": code_files(code_extra)},
        "packages": package_versions(),
        "device": device if device is not None else describe_device(),
        "seed": None if seed is None else int(seed),
        "started_utc": _utc(t0) if t0 is not None else None,
        "created_utc": _utc(now),
        "wall_time_s": (now - t0) if t0 is not None else None,
        "hostname": socket.gethostname(),
        "workdir": workdir.as_posix(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "extra": _jsonable(dict(extra)) if extra else {},
    }


def write_record(artifact: str | os.PathLike, *, rule: str, wildcards: Any = None,
                 params: Any = None, inputs: Any = (), seed: int | None = None,
                 started: Any = None, extra: Mapping | None = None, device: str | None = None,
                 h5_attr: bool = False, code_extra: Iterable[str | os.PathLike] = (),
                 finished: Any = None) -> Path:
    """Write the provenance record of `artifact` to ``<artifact>.prov.json`` atomically.

    artifact:    the file or directory just written (must exist).
    rule:        the rule/script name; wildcards: mapping (a Snakemake Wildcards object works).
    params:      the params of the job that made it (Snakemake's ``params``, a mapping, or
                 None for none): stored in canonical form (`job_params`).
    inputs:      paths (str/Path, lists, or a mapping of name -> path(s), e.g. Snakemake's
                 ``input``); each must exist and is hashed.
    started:     ``time.time()`` (or a datetime) taken when the job began -> ``wall_time_s``.
    h5_attr:     also store the record (without the artifact's own hash) in the HDF5 root
                 attribute ``provenance`` before hashing the file.
    code_extra:  source files that made the artifact besides the imported modules (a script).
    finished:    when the job ended (default now): one ``wall_time_s`` for all its outputs.
    Returns the path of the sidecar.
    """
    kwargs = dict(rule=rule, wildcards=wildcards, params=params,
                  inputs=inputs, seed=seed, started=started, extra=extra, device=device,
                  code_extra=list(code_extra), finished=finished)
    if h5_attr:
        import h5py

        pre = build_record(artifact, hash_artifact=False, **kwargs)
        try:
            with h5py.File(artifact, "r+") as f:
                f.attrs[H5_ATTR] = json.dumps(pre, sort_keys=True)
        except OSError as exc:
            raise DataError(f"cannot add the provenance attribute to {artifact}: not a writable HDF5 file ({exc})") from None
    record = build_record(artifact, **kwargs)
    return write_json_atomic(record_path(artifact), record)


def read_record(artifact: str | os.PathLike, *, missing_ok: bool = False) -> dict | None:
    """The record of `artifact`: its sidecar, else (HDF5) its ``provenance`` root attribute.

    Raises DataError when there is none (or returns None with ``missing_ok=True``) and when
    the sidecar is not valid JSON.
    """
    art = Path(artifact)
    side = record_path(art)
    if side.is_file():
        try:
            return json.loads(side.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataError(f"provenance record {side} is not valid JSON: {exc}") from None
    if art.is_file() and art.suffix in (".h5", ".hdf5"):
        try:
            import h5py

            with h5py.File(art, "r") as f:
                raw = f.attrs.get(H5_ATTR)
            if raw is not None:
                return json.loads(raw)
        except (OSError, json.JSONDecodeError):
            pass
    if missing_ok:
        return None
    raise DataError(f"no provenance record for {art}: expected {side}")


def record_root(record: Mapping | None, artifact: str | os.PathLike | None = None) -> Path:
    """The folder that relative paths in `record` are relative to, on this machine.

    Tried in order: the root implied by where `artifact` actually lies (its path minus the
    recorded relative ``id``: survives moving or copying the whole tree), the recorded
    ``workdir`` if it exists here, the current working directory.
    """
    rec = record or {}
    rid = rec.get("id")
    if artifact is not None and rid and not Path(rid).is_absolute():
        actual = Path(os.path.abspath(artifact))
        parts = Path(rid).parts
        if len(actual.parts) > len(parts) and actual.parts[-len(parts):] == parts:
            return Path(*actual.parts[: -len(parts)])
    workdir = rec.get("workdir")
    if workdir and Path(workdir).is_dir():
        return Path(workdir)
    return Path.cwd()


def resolve_recorded_path(path: str, record: Mapping | None,
                          artifact: str | os.PathLike | None = None) -> Path:
    """Turn a path as written in `record` into a path on this machine (see `record_root`)."""
    p = Path(path)
    if p.is_absolute():
        return p
    return record_root(record, artifact) / p
