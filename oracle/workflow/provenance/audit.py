"""Audit where an artifact or a reported number came from.

    python -m oracle.workflow.provenance.audit PATH_OR_NUMBER_KEY [--run results/<run>] [--configfile FILE]
                           [--json] [--strict-code]
    python -m oracle.workflow.provenance.audit --check-numbers [NUMBERS_JSON] [--run results/<run>]   # re-derives every number

TARGET is an artifact path, or a key of ``<run>/numbers.json``; a number entry looks like
``{"value": .., "unit": .., "se": .., "artifact": "<path of the artifact it was read from>"}``
(entries may be nested under group keys; a nested key is written ``group.key``). The artifact
path of an entry is resolved against the working directory, then the run folder, then the
folder of numbers.json. Without ``--run`` the run is the ``results/<run>`` folder above the
artifact, or the only ``results/*/numbers.json`` below the working directory.

The audit walks the provenance records (`oracle.workflow.provenance`) from the target back through
every input that has a record of its own, down to raw inputs without one (the data root) and
the oracle checkpoint, and for each artifact prints its rule, inputs with their hashes, the
recorded config subset and the code version. It FLAGS:

- an artifact whose own hash differs from its record, or which is missing;
- an input whose hash differs from the hash recorded by its consumer, or which is missing;
- a recorded config value that differs from the current config (``--configfile`` or
  ``<run>/config.yaml``). Only the recorded keys are compared: each leaf of the recorded
  subset, or the whole value at each of the record's ``config_keys``; a key present only
  in the current config is not a difference;
- an artifact that is not the one its rule would make for this run: its record names another
  place, or (oracle samples) another world, seed, shard or oracle
  (`oracle.workflow.provenance.input_identity`, the check every job makes of its inputs);
- the target itself having no record, and an input without one that lies under ``results/``
  or is no file the config names (only those are raw data);
- for a number key, numbers.json itself when it changed since its record was written, was
  made under other config values, was computed from another version of the number's
  artifact or of a part it lists, and the number when recomputing it from its source with
  the project's code (`oracle.workflow.provenance.audit_numbers`) gives another entry.

Code that differs from what made an artifact is a WARNING: the repository files the job
imported (its record's ``code.files``) whose hash differs on disk now, or, for records
without file hashes, a different commit / dirty state. The artifact may be stale, but code
moves on without changing old results; ``--strict-code`` turns these into flags. The report
ends with where the chain ends: the raw data (inputs without a record) and the oracle
checkpoint (``results/<run>/oracle/*.pt``: flow.pt, or gaussian_world.pt for an analytic
world). Exit status: 0 when nothing was flagged, 1 when something was, 2 for a bad command
line or an unreadable file.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oracle.errors import DataError, OracleError
from oracle.workflow.provenance.audit_numbers import recorded_input_problems, rederive_problems, rederived_value_problem
from oracle.workflow.provenance.audit_text import SHORT, code_str, render
from oracle.code_version import code_version
from oracle.io.hashing import file_sha256, path_sha256
from oracle.workflow.plan.config_paths import compare_config
from oracle.workflow.provenance.input_identity import (in_results, named_by_config, oracle_hasher, place_problems,
                                            sample_attr_problems)
from oracle.workflow.plan.paths import CONFIG_FILE, NUMBERS_FILE, RESULTS
from oracle.workflow.provenance import REPO_ROOT, read_record, record_root, resolve_recorded_path



# --------------------------------------------------------------------------- numbers.json
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


def _number_artifact(entry_path: str, numbers_path: Path, run: Path | None) -> Path:
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
    with the project's code (`oracle.workflow.provenance.audit_numbers.rederive_problems`; `config`:
    the run config, default ``<run>/config.yaml``).

    Returns one line per problem; an empty list means every number names an existing artifact
    and is what that artifact gives. Raises DataError if the file itself is missing or not JSON.
    """
    path = Path(numbers_path)
    run_dir = Path(run) if run is not None else path.parent
    problems = []
    if rederive:
        if config is None and (run_dir / CONFIG_FILE).is_file():
            config = load_config(run_dir / CONFIG_FILE)
        problems += rederive_problems(path, config)
    for key, entry in load_numbers(path).items():
        if "value" not in entry:
            problems.append(f"{key}: entry has no 'value'")
        art = entry.get("artifact")
        if not art or not isinstance(art, str):
            problems.append(f"{key}: entry names no 'artifact'")
            continue
        resolved = _number_artifact(art, path, run_dir)
        if not resolved.exists():
            problems.append(f"{key}: artifact {art} does not exist")
        elif require_record and read_record(resolved, missing_ok=True) is None:
            problems.append(f"{key}: artifact {art} has no provenance record")
    return problems


# --------------------------------------------------------------------------- config helpers
def load_config(path: str | os.PathLike) -> dict:
    """A YAML (or JSON) config file as a dict."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise DataError(f"config file {p} not found")
    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataError(f"config file {p} is not valid YAML: {' '.join(str(exc).split())}") from None
    return cfg or {}


def changed_code_files(rec: Mapping | None, root: Path = REPO_ROOT) -> list[str]:
    """The repository files of a record's ``code.files`` whose sha256 differs from the file
    under `root` now ("path changed" / "path removed"); [] when none or nothing was recorded."""
    out = []
    for rel, h in sorted(((rec or {}).get("files") or {}).items()):
        p = root / rel
        if not p.is_file():
            out.append(f"{rel} removed")
        elif file_sha256(p) != h:
            out.append(f"{rel} changed")
    return out


def _code_differs(rec: Mapping | None, cur: Mapping) -> str | None:
    """Why the code that made an artifact may differ from the checkout now, or None.

    With per-file hashes in the record (``code.files``) only those files count: a commit
    that touched other files leaves the artifact reproducible by the code on disk. Older
    records fall back to commit, dirty flag and the hash of the uncommitted diff.
    """
    rec = rec or {}
    if rec.get("files"):
        changed = changed_code_files(rec)
        if not changed:
            return None
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        return f"code on disk differs from what made it ({code_str(rec)}): {shown}"
    if rec.get("commit", "unknown") == "unknown":
        return "the record's code version is unknown (built outside git)"
    if cur.get("commit", "unknown") == "unknown":
        return "the current code version is unknown (not a git checkout)"
    if rec.get("commit") != cur.get("commit"):
        return f"built by commit {str(rec.get('commit'))[:SHORT]}, current checkout is {str(cur.get('commit'))[:SHORT]}"
    if bool(rec.get("dirty")) != bool(cur.get("dirty")) or (rec.get("dirty") and rec.get("diff_sha256") != cur.get("diff_sha256")):
        return f"built from {code_str(rec)}, current checkout is {code_str(cur)}"
    return None


# --------------------------------------------------------------------------- the audit
def _is_oracle_checkpoint(path: Path) -> bool:
    """A frozen world of a run: ``results/<run>/oracle/<name>.pt`` (flow.pt, gaussian_world.pt)."""
    p = Path(os.path.abspath(path))
    return p.parent.name == "oracle" and p.suffix == ".pt" and p.parent.parent.parent.name == RESULTS


class _Auditor:
    def __init__(self, current_config: Mapping | None, strict_code: bool, run_dir: Path | None = None):
        self.config = current_config
        self.oracle_sha256 = oracle_hasher(current_config, run_dir)
        self.strict_code = strict_code
        self.code_now = code_version()
        self.visited: dict[str, str] = {}
        self.flags: list[dict] = []
        self.warnings: list[dict] = []
        self.raw: list[str] = []          # inputs without a record: where the chain ends
        self.checkpoints: list[str] = []  # frozen worlds (results/<run>/oracle/*.pt)

    def _flag(self, node: dict, msg: str) -> None:
        node["flags"].append(msg)
        self.flags.append({"artifact": node["artifact"], "message": msg})

    def _warn(self, node: dict, msg: str) -> None:
        node["warnings"].append(msg)
        self.warnings.append({"artifact": node["artifact"], "message": msg})

    def check(self, path: Path, shown: str, *, is_target: bool = False,
              root: Path | None = None) -> tuple[dict, dict | None]:
        """The node of one artifact with its own checks (hash, config, code), inputs not followed."""
        node: dict[str, Any] = {"artifact": shown, "path": os.path.abspath(path), "exists": path.exists(),
                                "record": None, "flags": [], "warnings": [], "inputs": []}
        try:
            record = read_record(path, missing_ok=True)
        except DataError as exc:
            record = None
            self._flag(node, str(exc))
        if record is None:
            node["raw"] = True
            if not node["exists"]:
                self._flag(node, "missing: the file or folder does not exist")
            elif is_target:
                self._flag(node, "no provenance record (expected a .prov.json sidecar)")
            else:
                node["sha256"] = path_sha256(path)
                if in_results(path):  # only files outside results/ that the config names are raw
                    node["unrecorded_output"] = True
                    self._flag(node, "no provenance record: a pipeline output without its record is not raw data")
                else:
                    self.raw.append(shown)
                    if self.config is not None and not named_by_config(path, self.config, root):
                        self._flag(node, "no provenance record, and the config names no such raw file")
            return node, None

        node["raw"] = False
        node["record"] = record.get("id")
        for field in ("rule", "wildcards", "seed", "config", "config_keys", "code", "created_utc", "wall_time_s", "device"):
            node[field] = record.get(field)
        if _is_oracle_checkpoint(path):
            self.checkpoints.append(shown)
        recorded_hash = (record.get("artifact") or {}).get("sha256")
        node["recorded_sha256"] = recorded_hash
        # is it the artifact its rule would make for this run: its place, world, oracle, seed, shard
        for msg in place_problems(path, record) + sample_attr_problems(path, record, self.config, self.oracle_sha256):
            self._flag(node, f"not the artifact this run's rule would make: {msg}")
        if not node["exists"]:
            self._flag(node, "missing: the artifact named by this record does not exist")
        else:
            node["sha256"] = path_sha256(path)
            if recorded_hash and node["sha256"] != recorded_hash:
                self._flag(node, f"artifact changed since its record was written: recorded "
                                 f"{recorded_hash[:SHORT]}, now {node['sha256'][:SHORT]}")

        if self.config is not None:
            node["config_check"] = compare_config(record, self.config)
            for c in node["config_check"]:
                if not c["ok"]:
                    self._flag(node, f"config {c['key']} changed: recorded {json.dumps(c['recorded'])}, "
                                     f"current {json.dumps(c['current'])}")
        else:
            node["config_check"] = None

        diff = _code_differs(record.get("code"), self.code_now)
        if diff:
            (self._flag if self.strict_code else self._warn)(node, f"code: {diff}")
        return node, record

    def visit(self, path: Path, shown: str, *, is_target: bool = False, root: Path | None = None) -> dict:
        """`check` the artifact, then its recorded inputs, recursively (each artifact once)."""
        key = os.path.abspath(path)
        if key in self.visited:
            return {"artifact": shown, "ref": self.visited[key]}
        self.visited[key] = shown
        node, record = self.check(path, shown, is_target=is_target, root=root)
        if record is None:
            return node
        for inp, rec_hash in (record.get("inputs") or {}).items():
            ipath = resolve_recorded_path(inp, record, path)
            entry: dict[str, Any] = {"path": inp, "recorded_sha256": rec_hash, "exists": ipath.exists()}
            if not entry["exists"]:
                entry["status"] = "missing"
                self._flag(node, f"input {inp} is missing (expected at {ipath})")
            else:
                entry["current_sha256"] = path_sha256(ipath)
                entry["status"] = "ok" if entry["current_sha256"] == rec_hash else "changed"
                if entry["status"] == "changed":
                    self._flag(node, f"input {inp} changed: recorded {str(rec_hash)[:SHORT]}, "
                                     f"now {entry['current_sha256'][:SHORT]}")
                entry["node"] = self.visit(ipath, inp, root=record_root(record, path))
            node["inputs"].append(entry)
        return node


def _find_run(target_path: Path | None) -> Path | None:
    if target_path is not None:
        for parent in Path(os.path.abspath(target_path)).parents:
            if parent.parent.name == RESULTS:
                return parent
    return None


def audit(target: str, *, run: str | os.PathLike | None = None,
          configfile: str | os.PathLike | None = None, strict_code: bool = False) -> dict[str, Any]:
    """Audit `target` (an artifact path or a numbers.json key); see the module docstring.

    Returns {"target", "number" (the numbers.json entry or None), "run", "config_source",
    "code_now", "tree" (nested nodes), "flags": [{"artifact", "message"}], "warnings": [...],
    "artifacts": count, "ok": bool}. Raises DataError when the target cannot be resolved.
    """
    run_dir = Path(run) if run is not None else None
    number = None
    if Path(target).exists():
        art_path, shown = Path(target), target
    else:
        if run_dir is None:
            cands = sorted(Path(RESULTS).glob(f"*/{NUMBERS_FILE}")) if Path(RESULTS).is_dir() else []
            if len(cands) != 1:
                raise DataError(f"{target!r} is neither an existing path nor resolvable as a number key: "
                                f"pass --run results/<run> ({len(cands)} runs with numbers.json found)")
            run_dir = cands[0].parent
        numbers_path = run_dir / NUMBERS_FILE
        numbers = load_numbers(numbers_path)
        if target not in numbers:
            close = difflib.get_close_matches(target, list(numbers), n=3)
            raise DataError(f"{target!r} is not a path nor a key of {numbers_path}"
                            + (f"; close keys: {close}" if close else ""))
        entry = numbers[target]
        if not isinstance(entry.get("artifact"), str):
            raise DataError(f"key {target!r} of {numbers_path} names no 'artifact'")
        art_path = _number_artifact(entry["artifact"], numbers_path, run_dir)
        shown = entry["artifact"]
        number = {"key": target, "numbers_file": str(numbers_path), **entry}

    if run_dir is None:
        run_dir = _find_run(art_path)
    current_config = None
    config_source = None
    if configfile is not None:
        current_config, config_source = load_config(configfile), str(configfile)
    elif run_dir is not None and (run_dir / CONFIG_FILE).is_file():
        current_config, config_source = load_config(run_dir / CONFIG_FILE), str(run_dir / CONFIG_FILE)

    auditor = _Auditor(current_config, strict_code, run_dir)
    number_chain: list[dict] = []
    if number is not None:
        # numbers.json, then the part it merged the number from (numbers/<part>.json): edited by
        # hand, made under another config or by other code? (their other inputs are not
        # followed: only the number's own artifact matters)
        numbers_path = Path(number["numbers_file"])
        node, _ = auditor.check(numbers_path, number["numbers_file"], is_target=True)
        number_chain.append(node)
        for msg in recorded_input_problems(numbers_path):
            auditor._flag(node, msg)
        holder = numbers_path
        part = _number_part(number, numbers_path)
        if part is None:
            auditor._flag(node, f"{target!r} cannot be re-derived: the record names no numbers part it came from")
        else:
            part_path, inner_key = part
            node, _ = auditor.check(part_path, _shown(part_path), is_target=True)
            number_chain.append(node)
            _check_part_entry(number, part_path, inner_key, auditor, node)
            # the value shown must be the one its source gives (a forged, re-signed pair is not)
            msg = rederived_value_problem(number, part_path, inner_key, current_config)
            if msg:
                auditor._flag(node, msg)
            holder = part_path
        _check_number_in_record(number, art_path, holder, auditor, number_chain[-1])
    tree = auditor.visit(art_path, shown, is_target=True)
    if current_config is None:
        auditor.warnings.append({"artifact": shown, "message": "no current config found (--configfile or "
                                 "<run>/config.yaml): recorded config values were not compared"})
    return {"target": target, "number": number, "number_chain": number_chain,
            "run": str(run_dir) if run_dir else None,
            "config_source": config_source, "code_now": auditor.code_now, "tree": tree,
            "raw_inputs": auditor.raw, "oracle_checkpoints": auditor.checkpoints,
            "flags": auditor.flags, "warnings": auditor.warnings,
            "artifacts": len(auditor.visited), "ok": not auditor.flags}


def _shown(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def _number_part(number: dict, numbers_path: Path) -> tuple[Path, str] | None:
    """The part file numbers.json merged `number` from, and the key inside it: the input of
    numbers.json's record whose stem is the longest prefix of the key (``world.base`` for
    ``world.base.aleatoric_floor``); None when there is no such record or input."""
    try:
        rec = read_record(numbers_path, missing_ok=True)
    except DataError:
        return None  # already flagged by the check of numbers.json
    best: tuple[Path, str] | None = None
    for inp in (rec or {}).get("inputs") or {}:
        stem = Path(inp).stem
        if number["key"].startswith(stem + ".") and (best is None or len(stem) > len(best[0].stem)):
            best = (resolve_recorded_path(inp, rec, numbers_path), number["key"][len(stem) + 1:])
    return best


def _check_part_entry(number: dict, part_path: Path, inner_key: str, auditor: _Auditor, node: dict) -> None:
    """numbers.json must hold the part's entry unchanged."""
    try:
        part = json.loads(part_path.read_text())
    except (OSError, json.JSONDecodeError):
        return  # a missing or broken part is flagged by its own check
    if part.get(inner_key, {}).get("value") != number.get("value"):
        auditor._flag(node, f"numbers.json has {number.get('value')!r} for {number['key']!r} but its part "
                            f"{part_path.name} has {part.get(inner_key, {}).get('value')!r} for {inner_key!r}")


def _check_number_in_record(number: dict, art_path: Path, holder: Path, auditor: _Auditor, node: dict) -> None:
    """The record of the file that holds the number (its numbers part) must list the number's
    artifact among its inputs, with the artifact's current hash."""
    try:
        rec = read_record(holder, missing_ok=True)
    except DataError:
        return  # already flagged by the check of that file
    if rec is None or not art_path.exists():
        return
    target = os.path.abspath(art_path)
    for inp, h in (rec.get("inputs") or {}).items():
        if os.path.abspath(resolve_recorded_path(inp, rec, holder)) == target:
            if h != path_sha256(art_path):
                auditor._flag(node, f"{holder.name} was computed from another version of {inp}: "
                                    f"recorded {h[:SHORT]}, now {path_sha256(art_path)[:SHORT]}")
            return
    auditor._warn(node, f"the record of {holder.name} does not list {number['artifact']} among its inputs")


# --------------------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 flagged, 2 bad input)."""
    ap = argparse.ArgumentParser(prog="python -m oracle.workflow.provenance.audit", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", help="artifact path or numbers.json key (with --check-numbers: numbers.json path)")
    ap.add_argument("--run", help="results/<run> folder (numbers.json and config.yaml live there)")
    ap.add_argument("--configfile", help="current config to compare recorded values with (default <run>/config.yaml)")
    ap.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    ap.add_argument("--strict-code", action="store_true", help="flag (not just warn about) code version differences")
    ap.add_argument("--check-numbers", action="store_true",
                    help="check every entry of numbers.json: it names an existing artifact and is what "
                         "that artifact gives, recomputed with the project's code")
    args = ap.parse_args(argv)
    try:
        if args.check_numbers:
            path = Path(args.target) if args.target else (Path(args.run) / "numbers.json" if args.run else None)
            if path is None:
                ap.error("--check-numbers needs a numbers.json path or --run")
            problems = check_numbers(path, run=args.run,
                                     config=load_config(args.configfile) if args.configfile else None)
            if args.json:
                print(json.dumps({"numbers": str(path), "problems": problems, "ok": not problems}, indent=2))
            else:
                print("\n".join(problems) if problems else f"{path}: every number names an existing artifact "
                      "and is what it gives")
            return 1 if problems else 0
        if not args.target:
            ap.error("TARGET is required")
        report = audit(args.target, run=args.run, configfile=args.configfile, strict_code=args.strict_code)
    except OracleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, default=str) if args.json else render(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
