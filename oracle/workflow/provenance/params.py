"""A job's params: the one statement of what, besides its inputs and code, a job depends on.

Every rule hands its script all it reads of the config through ``params:`` (a test holds the
scripts to it: none reads the config itself). So the params a job ran with, stored in each of
its outputs' records (``params``), are what its artifacts were made under, and the params
Snakemake computes for the same job now say whether they still are. The start check of a run
(`oracle.workflow.provenance.stale`) and the audit compare the two through `params_differ`;
nothing keeps a second list of the config keys a rule depends on.

The audit runs outside Snakemake: `workflow_params` asks the workflow itself for the params of
the jobs that make a run's artifacts under a config (a dry run whose start check writes them,
`PARAMS_OUT`).

Light: standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from oracle.errors import DataError
from oracle.workflow.plan.paths import REPO_ROOT, RESULTS, run_relative

__all__ = ["PARAMS_OUT", "clear_answers", "job_params", "params_differ", "params_hash", "run_params", "workflow_params",
           "write_params_out"]

#: Environment variable naming the file the workflow's start check writes every job's params
#: to ({output path: params}); set by `workflow_params` for its dry run.
PARAMS_OUT = "ORACLE_PARAMS_OUT"


def _plain(value: Any) -> Any:
    """`value` as JSON values: mappings with string keys, lists, str, numbers, bool, None."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if not callable(v)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return _plain(value.item())
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def job_params(params: Any) -> dict:
    """The canonical form of a job's params: {name: value as JSON values}, every named param
    except callables (a param given as a function is called by Snakemake before the job sees it;
    one still callable is code, not a setting).

    params: Snakemake's ``job.params`` / ``snakemake.params`` (named entries, ``.items()``),
            a mapping, or None (no params: {}).
    """
    if params is None:
        return {}
    items = params.items() if hasattr(params, "items") else vars(params).items()
    return {str(k): _plain(v) for k, v in sorted(items, key=lambda kv: str(kv[0])) if not callable(v)}


def params_hash(params: Mapping) -> str:
    """sha256 of the canonical JSON of `params` (sorted keys, no whitespace, UTF-8)."""
    text = json.dumps(_plain(params), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _short(value: object, width: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= width else text[: width - 3] + "..."


def _leaves(key: str, recorded: object, now: object) -> list[tuple[str, object, object]]:
    """The leaves under `key` whose values differ (one value changed in a whole section)."""
    if isinstance(recorded, Mapping) and isinstance(now, Mapping):
        out = []
        for k in list(recorded) + [k for k in now if k not in recorded]:
            sub = f"{key}[{k}]" if "." in str(k) else f"{key}.{k}"
            a, b = recorded.get(k, "<missing>"), now.get(k, "<missing>")
            if a != b:
                out += _leaves(sub, a, b)
        return out
    return [(key, recorded, now)]


def params_differ(recorded: Mapping, now: Mapping) -> list[str]:
    """One phrase per leaf where the params a job ran with (`recorded`, a record's ``params``)
    differ from the params of the same job now (`now`, `job_params`): "params training.lr was
    0.001, is 0.003"; a param present on one side only reads "<missing>" on the other. [] when
    they agree."""
    rec, cur = _plain(dict(recorded)), _plain(dict(now))
    if rec == cur:
        return []
    out = []
    for name in list(rec) + [n for n in cur if n not in rec]:
        a, b = rec.get(name, "<missing>"), cur.get(name, "<missing>")
        if a != b:
            out += [f"params {k} was {_short(x)}, is {_short(y)}" for k, x, y in _leaves(name, a, b)]
    return out


# --------------------------------------------------------------------------- the workflow's params
def write_params_out(jobs: Iterable[tuple[Iterable[str], Any]], path: str | os.PathLike) -> None:
    """Write {output path (as the workflow names it): `job_params` of its job} for `jobs`
    ((outputs, params) pairs) to `path`, as JSON: what `workflow_params` reads."""
    out = {str(o): job_params(p) for outputs, p in jobs for o in outputs}
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(out, sort_keys=True))
    os.replace(tmp, path)


def workflow_params(workdir: str | os.PathLike, configfile: str | os.PathLike, targets: Iterable[str],
                    snakefile: str | os.PathLike | None = None) -> dict[str, dict]:
    """{output path relative to `workdir`: the params of the job that makes it} for every job of
    the DAG that makes `targets` (paths relative to `workdir`) under `configfile`: the params
    Snakemake computes for those jobs now, from a dry run of the workflow in `workdir` (nothing
    runs, nothing is written there but Snakemake's own metadata folder).

    DataError, one line, when the workflow cannot build that DAG under the config (a value it
    refuses, an artifact no rule makes any more).
    """
    snakefile = Path(snakefile) if snakefile is not None else REPO_ROOT / "Snakefile"
    with tempfile.TemporaryDirectory(prefix="oracle-params-") as tmp:
        out = Path(tmp) / "params.json"
        cmd = [sys.executable, "-m", "snakemake", "-s", str(snakefile), "-d", os.path.abspath(workdir),
               "--configfile", os.path.abspath(configfile), "--dry-run", "--quiet", "all", "--cores", "1",
               "--", *targets]
        proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                              env={**os.environ, PARAMS_OUT: str(out)})
        if not out.is_file():
            lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if "Error" in ln or "error" in ln]
            why = lines[0] if lines else f"snakemake exited with status {proc.returncode}"
            raise DataError(f"the workflow cannot say the params of {', '.join(targets)} under {configfile}: {why}")
        return json.loads(out.read_text())


def run_params(paths: Iterable[str | os.PathLike], run_dir: str | os.PathLike | None, configfile: str | os.PathLike,
               config: Mapping) -> dict[str, dict]:
    """{path below results/<run>/: the params of the job that makes it} for every job behind
    the artifacts `paths` of the run folder `run_dir` under `configfile` (`config`, loaded), as
    the workflow computes them (`workflow_params`, run in the folder that holds the run's
    ``results/``; a run folder copied or moved as a whole keeps its run-relative paths).
    DataError when the artifacts lie in no ``results/<run>/`` folder."""
    paths = list(paths)
    rels = [r for r in (run_relative(p) for p in paths) if r is not None]
    folder = Path(os.path.abspath(run_dir)) if run_dir is not None else None
    if not rels or folder is None or folder.parent.name != RESULTS:
        raise DataError(f"{', '.join(map(str, paths))} lie(s) in no {RESULTS}/<run> folder")
    workdir = folder.parent.parent
    run_name = str(config.get("run") or folder.name)
    wanted = [f"{RESULTS}/{run_name}/{r}" for r in rels]
    key = (os.path.abspath(workdir), hashlib.sha256(Path(configfile).read_bytes()).hexdigest())
    # one dry run answers for every job of its DAG (a number's DAG holds nearly the whole run), so
    # an audit of many numbers in one process asks the workflow once, not once per number
    found = next((f for f in _ANSWERS.get(key, []) if all(w in f for w in wanted)), None)
    if found is None:
        found = workflow_params(workdir, configfile, wanted)
        _ANSWERS.setdefault(key, []).append(found)
    return {rel: p for k, p in found.items() if (rel := run_relative(workdir / k)) is not None}


#: What `workflow_params` answered in this process, by (workdir, sha256 of the config file's
#: bytes): the code cannot change under a running process, and another config is another key.
_ANSWERS: dict[tuple[str, str], list[dict[str, dict]]] = {}


def clear_answers() -> None:
    """Forget what the workflow answered in this process (`run_params`'s cache)."""
    _ANSWERS.clear()
