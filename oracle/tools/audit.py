"""Audit where an artifact or a reported number came from.

    python -m oracle.tools.audit PATH_OR_NUMBER_KEY [--run results/<run>] [--configfile FILE]
                           [--full] [--json] [--strict-code]
    python -m oracle.tools.audit --check-numbers [NUMBERS_JSON] [--run results/<run>]   # re-derives every number

TARGET is an artifact path, or a key of ``<run>/numbers.json``; a number entry looks like
``{"value": .., "unit": .., "se": .., "artifact": "<path of the artifact it was read from>"}``
(entries may be nested under group keys; a nested key is written ``group.key``). The artifact
path of an entry is resolved against the working directory, then the run folder, then the
folder of numbers.json. Without ``--run`` the run is the ``results/<run>`` folder above the
artifact, or the only ``results/*/numbers.json`` below the working directory.

The audit walks the provenance records (`oracle.workflow.provenance`) from the target back through
every input that has a record of its own, down to raw inputs without one (the data root) and
the oracle checkpoint. It prints a summary of at most 40 lines (`audit_text.summary`: one line
per level of the chain with counts, the problems, the verdict); ``--full`` prints, for each
artifact, its rule, inputs with their hashes, the params its job ran with and the code version. It FLAGS:

- an artifact whose own hash differs from its record, or which is missing;
- an input whose hash differs from the hash recorded by its consumer, or which is missing;
- params its job ran with (its record's ``params``) that differ from the params the workflow
  computes for the same job under the current config (``--configfile`` or
  ``<run>/config.yaml``; `oracle.workflow.provenance.params.workflow_params`, a dry run of the
  workflow), one flag per differing value; an artifact no job of that workflow makes, and a
  record written before records kept params, are flagged too;
- an artifact that is not the one its rule would make for this run: its record names another
  place, or (oracle samples) another world, seed, shard or oracle
  (`oracle.workflow.provenance.input_identity`, the check every job makes of its inputs);
- the target itself having no record, and an input without one that lies under ``results/``
  or is no file the config names (only those are raw data);
- for a number key, numbers.json itself when it changed since its record was written, was
  made under other config values, was computed from another version of the number's
  artifact or of a part it lists, and the number when recomputing it from its source with
  the project's code (`oracle.tools.audit_numbers`) gives another entry.

Code that differs from what made an artifact is a WARNING: the repository files the job
imported (its record's ``code.files``) whose hash differs on disk now, or, for records
without file hashes, a different commit / dirty state; so are the versions of the packages
that shape results (torch, timm, numpy, ...: `package_drift`) when they differ from the
environment's. The artifact may be stale, but code moves on without changing old results;
``--strict-code`` turns these into flags. The report
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
from oracle.tools.audit_numbers import recorded_input_problems, rederive_problems, rederived_value_problem
from oracle.tools.audit_text import SHORT, code_str, render, summary
from oracle.code_version import code_version
from oracle.io.hashing import file_sha256, path_sha256
from oracle.workflow.provenance.input_identity import (in_results, named_by_config, oracle_hasher, place_problems,
                                                       run_relative, sample_attr_problems)
from oracle.workflow.provenance.params import params_differ, run_params
from oracle.workflow.plan.paths import CONFIG_FILE, NUMBERS_FILE, RESULTS
from oracle.workflow.provenance import REPO_ROOT, package_drift, read_record, record_root, resolve_recorded_path
from oracle.tools.audit_numbers import (check_numbers, load_config, load_numbers,  # noqa: F401 - the audit API
                                           number_artifact)


def changed_code_files(rec: Mapping | None, root: Path = REPO_ROOT, now: dict | None = None) -> list[str]:
    """The repository files of a record's ``code.files`` whose sha256 differs from the file
    under `root` now ("path changed" / "path removed"); [] when none or nothing was recorded.
    `now`: {path: sha256 now or None}, filled as it goes (an audit's records share their files)."""
    now, out = ({} if now is None else now), []
    for rel, h in sorted(((rec or {}).get("files") or {}).items()):
        if rel not in now:
            now[rel] = file_sha256(root / rel) if (root / rel).is_file() else None
        if now[rel] is None:
            out.append(f"{rel} removed")
        elif now[rel] != h:
            out.append(f"{rel} changed")
    return out


def _code_differs(rec: Mapping | None, cur: Mapping, now: dict | None = None) -> str | None:
    """Why the code that made an artifact may differ from the checkout now, or None.

    With per-file hashes in the record (``code.files``) only those files count: a commit
    that touched other files leaves the artifact reproducible by the code on disk. Older
    records fall back to commit, dirty flag and the hash of the uncommitted diff.
    """
    rec = rec or {}
    if rec.get("files"):
        changed = changed_code_files(rec, now=now)
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
    def __init__(self, current_config: Mapping | None, strict_code: bool, run_dir: Path | None = None,
                 params_now: Mapping[str, dict] | None = None):
        # {path below results/<run>/: the params of the job that makes it now}; None: not compared
        self.params_now = params_now
        self.config = current_config
        self.oracle_sha256 = oracle_hasher(current_config, run_dir)
        self.strict_code = strict_code
        self.code_now = code_version()
        self.code_files_now: dict[str, str | None] = {}  # the checkout's files, hashed once (`changed_code_files`)
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
        for field in ("rule", "wildcards", "seed", "params", "code", "created_utc", "wall_time_s", "device"):
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

        if self.params_now is not None:
            rel = run_relative(path)
            now = self.params_now.get(rel) if rel is not None else None
            if now is None:
                self._flag(node, f"no job of the workflow makes it under the current config (rule "
                                 f"{record.get('rule')!r}, wildcards {record.get('wildcards') or {}})")
            elif "params" not in record:
                self._flag(node, "its record was written before records kept their job's params: "
                                 "what it was made under cannot be compared")
            else:
                node["params_check"] = params_differ(record["params"], now)
                for why in node["params_check"]:
                    self._flag(node, why)

        diff = _code_differs(record.get("code"), self.code_now, self.code_files_now)
        if diff:
            (self._flag if self.strict_code else self._warn)(node, f"code: {diff}")
        if drift := package_drift(record.get("packages")):
            (self._flag if self.strict_code else self._warn)(
                node, f"packages differ from what made it: {', '.join(drift)}")
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


def resolve_target(target: str, run: str | os.PathLike | None = None) -> tuple[Path, str, dict | None, Path | None]:
    """(artifact path, its name as shown, the numbers.json entry or None, the run folder) of an
    audit target: an existing path, or a key of ``<run>/numbers.json`` (without `run`: of the
    only ``results/*/numbers.json``). DataError when it is neither."""
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
        art_path = number_artifact(entry["artifact"], numbers_path, run_dir)
        shown = entry["artifact"]
        number = {"key": target, "numbers_file": str(numbers_path), **entry}
    if run_dir is None:
        run_dir = _find_run(art_path)
    return art_path, shown, number, run_dir


def audit(target: str, *, run: str | os.PathLike | None = None,
          configfile: str | os.PathLike | None = None, strict_code: bool = False) -> dict[str, Any]:
    """Audit `target` (an artifact path or a numbers.json key); see the module docstring.

    Returns {"target", "number" (the numbers.json entry or None), "run", "config_source",
    "code_now", "tree" (nested nodes), "flags": [{"artifact", "message"}], "warnings": [...],
    "artifacts": count, "ok": bool}. Raises DataError when the target cannot be resolved.
    """
    art_path, shown, number, run_dir = resolve_target(target, run)
    current_config = None
    config_source = None
    if configfile is not None:
        current_config, config_source = load_config(configfile), str(configfile)
    elif run_dir is not None and (run_dir / CONFIG_FILE).is_file():
        current_config, config_source = load_config(run_dir / CONFIG_FILE), str(run_dir / CONFIG_FILE)

    auditor = _Auditor(current_config, strict_code, run_dir)
    if current_config is not None:
        try:
            paths = [art_path] + ([Path(number["numbers_file"])] if number is not None else [])
            auditor.params_now = run_params(paths, run_dir, Path(config_source), current_config)
        except OracleError as exc:
            auditor.flags.append({"artifact": shown, "message": f"params not compared: {exc}"})
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
    ap = parser()
    args = ap.parse_args(argv)
    try:
        if args.check_numbers:
            return _check_numbers_cli(ap, args)
        if not args.target:
            ap.error("TARGET is required")
        if args.rebuild:
            return _rebuild_cli(args)
        report = audit(args.target, run=args.run, configfile=args.configfile, strict_code=args.strict_code)
    except OracleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2, default=str) if args.json else render(report) if args.full else summary(report))
    return 0 if report["ok"] else 1


def parser() -> argparse.ArgumentParser:
    """The audit's command line."""
    from oracle.tools.audit_shards import parse_rows

    ap = argparse.ArgumentParser(prog="python -m oracle.tools.audit", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", nargs="?", help="artifact path or numbers.json key (with --check-numbers: numbers.json path)")
    ap.add_argument("--run", help="results/<run> folder (numbers.json and config.yaml live there)")
    ap.add_argument("--configfile", help="current config to compare recorded values with (default <run>/config.yaml)")
    ap.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    ap.add_argument("--full", action="store_true", help="print the whole chain, every artifact with its rule, "
                    "hashes, code, params and inputs (default: a summary of at most 40 lines, one line per level "
                    "of the chain, the problems and the verdict; the checks are the same)")
    ap.add_argument("--strict-code", action="store_true", help="flag (not just warn about) code version differences")
    ap.add_argument("--check-numbers", action="store_true",
                    help="re-derive: every entry of numbers.json names an existing artifact and is what that "
                         "artifact gives, recomputed with the project's code; the jobs that derive data files, "
                         "tables, numbers, numbers.tex and claims rebuilt in a scratch folder and compared "
                         "byte for byte; every row of every shard (or ROWS random rows) re-scored with the oracle file")
    ap.add_argument("--rows", type=parse_rows, default=None, metavar="ROWS",
                    help="--check-numbers: rows re-scored per shard: 'all' (the default), K random rows "
                         "(drawn from --seed, or a fresh seed that is printed), or 0 (none)")
    ap.add_argument("--rebuild", action="store_true",
                    help="re-execute the jobs behind TARGET in a scratch folder and compare their outputs "
                         "with the run's (exit 1 on a mismatch)")
    ap.add_argument("--sample", type=int, metavar="K", help="--rebuild: only K jobs of the chain, drawn at random")
    ap.add_argument("--seed", type=int, default=None,
                    help="--rebuild --sample / --check-numbers --rows K: the random draw (default a fresh seed, printed)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                    help="--rebuild / --check-numbers: snakemake --cores (default: this machine's CPUs)")
    ap.add_argument("--scratch", help="--rebuild / --check-numbers: where the scratch folder is made "
                                      "(default the system's temporary folder)")
    ap.add_argument("--keep", action="store_true", help="--rebuild / --check-numbers: keep the scratch folder")
    return ap


def _run_config(args: argparse.Namespace, run_dir: Path | None) -> Path:
    configfile = Path(args.configfile) if args.configfile else (run_dir / "config.yaml" if run_dir else None)
    if configfile is None or not configfile.is_file():
        raise DataError("no run config found: pass --configfile or --run results/<run> (with its config.yaml)")
    return configfile


def _check_numbers_cli(ap: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from oracle.tools.audit_modes import derivation_problems
    from oracle.tools.audit_shards import rescore_shards

    path = Path(args.target) if args.target else (Path(args.run) / "numbers.json" if args.run else None)
    if path is None:
        ap.error("--check-numbers needs a numbers.json path or --run")
    run_dir = Path(args.run) if args.run else path.parent
    configfile = _run_config(args, run_dir)
    config = load_config(configfile)
    problems = check_numbers(path, run=run_dir, config=config)
    notes: list[str] = []
    if args.rows != 0:
        more, notes = rescore_shards(run_dir, config, rows=args.rows, seed=args.seed)
        problems += more
    more, lines = derivation_problems(run_dir, configfile, cores=args.cores, scratch=args.scratch, keep=args.keep,
                                      log=(lambda m: None) if args.json else print)
    problems += more
    notes += lines
    if args.json:
        print(json.dumps({"numbers": str(path), "problems": problems, "notes": notes, "ok": not problems}, indent=2))
    else:
        print("\n".join(notes + problems) if problems else "\n".join(notes + [
            f"{path}: every number names an existing artifact and is what it gives; every derived file is what its "
            "job makes from its inputs; every re-scored shard row is what its world gives"]))
    return 1 if problems else 0


def _rebuild_cli(args: argparse.Namespace) -> int:
    from oracle.tools.audit_modes import rebuild_target

    art_path, shown, _, run_dir = resolve_target(args.target, args.run)
    if run_dir is None:
        raise DataError(f"{shown} lies in no results/<run> folder: pass --run")
    from oracle.tools.audit_shards import fresh_seed

    seed = fresh_seed() if args.seed is None else args.seed
    report = rebuild_target(art_path, run_dir, _run_config(args, run_dir), sample=args.sample, seed=seed,
                            cores=args.cores, scratch=args.scratch, keep=args.keep,
                            log=(lambda m: None) if args.json else print)
    print(json.dumps(report, indent=2, default=str) if args.json else "\n".join(report["lines"]))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
