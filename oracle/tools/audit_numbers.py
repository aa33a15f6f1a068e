"""Re-derive numbers.json from the artifacts its numbers name, with the project's own code.

Every part of ``numbers/`` is recomputed from its recorded source the way its rule computes
it: a world's numbers from ``samples/<world>/constants.json``
(`oracle.measures.world_constants.world_numbers`), an experiment's from its data files
(``kind_module(kind).numbers``, the spec resolved from the run config), the validation
numbers from ``validation/metrics.json`` (`oracle.validation.artifacts.validation_numbers`).
The parts merged as the ``numbers`` rule merges them (`oracle.report.numbers.merge_numbers`)
must give numbers.json entry for entry: exactly, since they are computed from the same files
by the same code and written as JSON, which round-trips every float.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oracle.errors import ConfigError, DataError, OracleError
from oracle.io.atomic import read_json, to_jsonable
from oracle.workflow.provenance import read_record, record_path, resolve_recorded_path


def _as_written(obj: Any) -> Any:
    """`obj` as it reads back from the JSON write_json_atomic writes."""
    return json.loads(json.dumps(to_jsonable(obj), allow_nan=True))


def recompute_part(part_path: str | os.PathLike, config: Mapping | None) -> dict[str, dict]:
    """The entries of one numbers part (``numbers/<part>.json``) recomputed from the source its
    record names, as its rule computes them. DataError when the part has no record, its rule
    is not a numbers rule, a source is missing, or (experiments) there is no config."""
    part = Path(part_path)
    rec = read_record(part)
    rule = rec.get("rule")
    inputs = list((rec.get("inputs") or {}))
    sources = {inp: resolve_recorded_path(inp, rec, part) for inp in inputs}
    for inp, p in sources.items():
        if not p.exists():
            raise DataError(f"{part}: its source {inp} is missing")
    if rule == "world_numbers" and len(inputs) == 1:
        from oracle.measures.world_constants import world_numbers

        return world_numbers(read_json(sources[inputs[0]]), inputs[0])
    if rule == "validation_numbers" and len(inputs) == 1:
        from oracle.validation.artifacts import validation_numbers

        return validation_numbers(read_json(sources[inputs[0]]), inputs[0])
    if rule == "experiment_numbers":
        import pandas as pd

        from oracle.experiments import kind_module
        from oracle.workflow.plan import experiment_spec

        name = (rec.get("wildcards") or {}).get("experiment")
        if config is None or name is None:
            raise DataError(f"{part}: an experiment's numbers need the run config and the experiment's name")
        try:
            spec = experiment_spec(config, name)
            module = kind_module(spec["kind"])
        except ConfigError as exc:
            raise DataError(f"{part}: cannot resolve experiment {name!r} in the config ({exc})") from None
        by_stem = {Path(inp).stem: inp for inp in inputs}
        missing = [d for d in module.DATA if d not in by_stem]
        if missing:
            raise DataError(f"{part}: its record lists no data file {missing} of kind {spec['kind']!r}")
        paths = {d: by_stem[d] for d in module.DATA}
        data = {d: pd.read_csv(sources[p]) for d, p in paths.items()}
        return module.numbers(data, spec, paths)
    raise DataError(f"{part}: made by rule {rule!r}, which is not a numbers rule this audit can recompute")


def numbers_parts(numbers_path: str | os.PathLike) -> dict[str, Path]:
    """{prefix: part file} that numbers.json's record lists as its inputs (``numbers/<prefix>.json``)."""
    path = Path(numbers_path)
    rec = read_record(path)
    return {Path(inp).stem: resolve_recorded_path(inp, rec, path) for inp in (rec.get("inputs") or {})}


def compare_entries(stored: Mapping[str, Any], derived: Mapping[str, Any], where: str) -> list[str]:
    """One line per key whose stored entry differs from the re-derived one (or is only in one)."""
    out = []
    for key in sorted(set(stored) | set(derived)):
        if key not in derived:
            out.append(f"{key}: in {where} but not re-derived from any source")
        elif key not in stored:
            out.append(f"{key}: re-derived from {derived[key].get('artifact')} but missing from {where}")
        elif _as_written(stored[key]) != derived[key]:
            diff = [f for f in sorted(set(stored[key]) | set(derived[key]))
                    if _as_written(stored[key]).get(f) != derived[key].get(f)]
            out.append(f"{key}: {where} has {_fields(stored[key], diff)} but {derived[key].get('artifact')} gives "
                       f"{_fields(derived[key], diff)}")
    return out


def _fields(entry: Mapping, fields: list[str]) -> str:
    return ", ".join(f"{f}={entry.get(f)!r}" for f in fields)


def rederive_problems(numbers_path: str | os.PathLike, config: Mapping | None) -> list[str]:
    """Every difference between numbers.json (and each of its parts) and the numbers
    re-derived from their sources, one line each; [] when every number is what its source
    gives. A part that cannot be recomputed is one line too."""
    from oracle.report.numbers import merge_numbers

    path = Path(numbers_path)
    derived: dict[str, dict] = {}
    problems: list[str] = []
    failed: list[str] = []
    try:
        parts = numbers_parts(path)
    except DataError as exc:
        return [f"{path.name} cannot be re-derived: {exc}"]
    for prefix, part in parts.items():
        try:
            derived[prefix] = _as_written(recompute_part(part, config))
        except DataError as exc:
            problems.append(str(exc))
            failed.append(prefix + ".")
            continue
        if part.is_file():
            problems += compare_entries({f"{prefix}.{k}": v for k, v in read_json(part).items()},
                                        {f"{prefix}.{k}": v for k, v in derived[prefix].items()},
                                        f"numbers/{part.name}")
    stored = {k: v for k, v in read_json(path).items() if not k.startswith(tuple(failed))}
    return problems + compare_entries(stored, _as_written(merge_numbers(derived)), path.name)


def rederive_entry(part_path: str | os.PathLike, inner_key: str, config: Mapping | None) -> dict | None:
    """The entry `inner_key` of a numbers part re-derived from its source (None: the source
    gives no such number). DataError when the part cannot be recomputed.

    A part is recomputed once per process for as long as it, its record, its sources and the
    config stay as they were (`_part_key`): an audit of every number of a run asks for each part
    once per number it holds (a scaling part: 40 numbers, 0.3 s each)."""
    key = _part_key(part_path, config)
    derived = _DERIVED.get(key) if key is not None else None
    if derived is None:
        derived = _as_written(recompute_part(part_path, config))
        if key is not None:
            _DERIVED[key] = derived
    entry = derived.get(inner_key)
    return copy.deepcopy(entry) if entry is not None else None


#: Parts recomputed in this process (`rederive_entry`), by `_part_key`.
_DERIVED: dict[tuple, dict] = {}


def _part_key(part_path: str | os.PathLike, config: Mapping | None) -> tuple | None:
    """What a part's recomputation depends on: the part and its record (path, inode, size, mtime), each
    source its record names (the same), and the config's contents; None when any of them cannot be
    read (then nothing is cached and `recompute_part` says why)."""
    part = Path(part_path)
    try:
        rec = read_record(part)
        files = [part, record_path(part), *(resolve_recorded_path(inp, rec, part) for inp in (rec.get("inputs") or {}))]
        stats = tuple((os.path.abspath(f), st.st_ino, st.st_size, st.st_mtime_ns) for f in files for st in [os.stat(f)])
        return stats + (json.dumps(to_jsonable(config), sort_keys=True, allow_nan=True),)
    except (OSError, OracleError, TypeError, ValueError):
        return None


def rederived_value_problem(number: Mapping, part_path: str | os.PathLike, inner_key: str,
                            config: Mapping | None) -> str | None:
    """Why the numbers.json entry `number` (with its ``key``) is not what its source gives,
    re-derived through its part `part_path` (key `inner_key` there); None when it is."""
    try:
        derived = rederive_entry(part_path, inner_key, config)
    except DataError as exc:
        return f"{number['key']!r} cannot be re-derived from its source: {exc}"
    if derived is None:
        return f"{number['key']!r} is not a number its source gives (re-derived through {Path(part_path).name})"
    stored = _as_written({k: v for k, v in number.items() if k not in ("key", "numbers_file")})
    if stored != derived:
        diff = [f for f in sorted(set(stored) | set(derived)) if stored.get(f) != derived.get(f)]
        return (f"numbers.json has {_fields(stored, diff)} for {number['key']!r}, but re-deriving it from "
                f"{derived.get('artifact')} with the project's code gives {_fields(derived, diff)}")
    return None


def recorded_input_problems(path: str | os.PathLike) -> list[str]:
    """The inputs `path`'s record lists whose sha256 differs now (or which are missing)."""
    from oracle.io.hashing import path_sha256

    p = Path(path)
    try:
        rec = read_record(p, missing_ok=True)
    except DataError:
        return []  # flagged by the check of the file itself
    out = []
    for inp, h in ((rec or {}).get("inputs") or {}).items():
        q = resolve_recorded_path(inp, rec, p)
        if not q.exists():
            out.append(f"its input {inp} is missing")
        elif path_sha256(q) != h:
            out.append(f"its input {inp} changed since it was made: recorded {str(h)[:12]}, now {path_sha256(q)[:12]}")
    return out


# --------------------------------------------------------------------------- numbers.json as the audit reads it
def load_numbers(numbers_path: str | os.PathLike) -> dict[str, dict]:
    """numbers.json flattened to {dotted key: entry}; an entry is a dict with "value" or "artifact"."""
    path = Path(numbers_path)
    if not path.is_file():
        raise DataError(f"numbers file {path} not found: expected results/<run>/numbers.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise DataError(f"{path} holds a {type(data).__name__}: expected an object of number entries")
    out: dict[str, dict] = {}

    def walk(node: Mapping, prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping) and ("value" in v or "artifact" in v):
                out[key] = dict(v)
            elif isinstance(v, Mapping):
                walk(v, key + ".")
            else:
                out[key] = {"value": v}  # a bare number: check_numbers reports it names no artifact

    walk(data, "")
    return out


def number_artifact(entry_path: str, numbers_path: Path, run: Path | None) -> Path:
    """The file a number entry names: absolute, or relative to the cwd, the run or numbers.json."""
    p = Path(entry_path)
    if p.is_absolute():
        return p
    cands = [Path.cwd() / p] + ([run / p] if run else []) + [numbers_path.parent / p]
    for c in cands:
        if c.exists():
            return c
    return cands[0]


def check_numbers(numbers_path: str | os.PathLike, *, run: str | os.PathLike | None = None,
                  require_record: bool = False, config: Mapping | None = None,
                  rederive: bool = True) -> list[str]:
    """Problems with `numbers_path`: entries without a value or an artifact, artifacts that do
    not exist (and, with `require_record`, artifacts without a provenance record), and, with
    `rederive`, every number that differs from what its source artifact gives when recomputed
    with the project's code (`rederive_problems`; `config`:
    the run config, default ``<run>/config.yaml``).

    Returns one line per problem; an empty list means every number names an existing artifact
    and is what that artifact gives. Raises DataError if the file itself is missing or not JSON.
    """
    path = Path(numbers_path)
    run_dir = Path(run) if run is not None else path.parent
    problems = []
    if rederive:
        if config is None and (run_dir / "config.yaml").is_file():
            config = load_config(run_dir / "config.yaml")
        problems += rederive_problems(path, config)
    for key, entry in load_numbers(path).items():
        if "value" not in entry:
            problems.append(f"{key}: entry has no 'value'")
        art = entry.get("artifact")
        if not art or not isinstance(art, str):
            problems.append(f"{key}: entry names no 'artifact'")
            continue
        resolved = number_artifact(art, path, run_dir)
        if not resolved.exists():
            problems.append(f"{key}: artifact {art} does not exist")
        elif require_record and read_record(resolved, missing_ok=True) is None:
            problems.append(f"{key}: artifact {art} has no provenance record")
    return problems


def load_config(path: str | os.PathLike) -> dict:
    """A config file as the workflow sees it (`oracle.workflow.plan.config.effective_config`: validated,
    the schema's defaults filled in), so the run's own config file compares equal to the
    effective config its records were written from. DataError when missing; ConfigError when
    it does not load or check."""
    from oracle.workflow.plan.config import effective_config

    p = Path(path)
    if not p.is_file():
        raise DataError(f"config file {p} not found")
    return effective_config(p)
