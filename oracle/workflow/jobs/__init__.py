"""The job wrapper of every workflow script: `run_job` (local job server hand-off, input checks,
logging, threads, one-line errors) and the provenance record of each artifact the job writes."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from oracle.errors import OracleError


def run_job(job: Any, main: Callable[[Any], Mapping[str, Any] | None], *, server: bool = True,
            log_path: str | os.PathLike | None | bool = True, threads: int | None = None) -> None:
    """The one entry point of a rule's script: ``run_job(snakemake, main)``, the script's only
    statement besides ``def main``.

    1. server=True: hand the script to the local job server (`oracle.workflow.jobs.server.delegate`,
       switched by ``ORACLE_JOB_SERVER``) and exit with its status; the server's child runs the
       script again and gets past this step. The script's heavy imports belong inside `main`, so
       the client never pays for them. server=False: run inline (a job that is better off in a
       process of its own).
    2. `script_job`: log, threads, the inputs checked against their records, one-line errors.
    3. ``main(job)``: the work; returns the keyword arguments of `record_job` for the outputs'
       provenance records (``extra``, ``seed``, ``inputs``...), or None for the defaults.
    4. `record_job` writes the records; under torchrun only rank 0 does (it wrote the outputs).
    log_path, threads: as `script_job`. The server writes the child's resource usage (peak RSS,
    CPU seconds) to ``<log>.usage.json`` beside the job's first log.

    The records of the job's outputs from an earlier run go first (Snakemake has removed those
    outputs before starting the job), and a failed job removes any record it wrote: a record
    never stays behind without its output.
    """
    outputs = list(getattr(job, "output", None) or ())
    if server:
        logs = list(getattr(job, "log", None) or ())
        try:
            from oracle.workflow.jobs.server import delegate, server_wanted

            if server_wanted():
                drop_records(outputs)
            delegate(usage_path=f"{logs[0]}.usage.json" if logs else None, rule=getattr(job, "rule", None),
                     on_failure=lambda: drop_records(outputs))
        except OracleError as exc:  # a bad ORACLE_JOB_SERVER value
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            raise SystemExit(1) from None
        except KeyboardInterrupt:  # Ctrl-C before the hand-off (still importing): one line, as after it
            from oracle.workflow.jobs.server import INTERRUPTED

            print(INTERRUPTED, file=sys.stderr, flush=True)
            raise SystemExit(130) from None
    done = False
    try:
        with script_job(job, log_path=log_path, threads=threads) as started:
            drop_records(outputs)
            record = main(job)
            if os.environ.get("RANK", "0") == "0":
                record_job(job, started, **(record or {}))
        done = True
    finally:
        if not done:
            drop_records(outputs)


def drop_records(outputs: Iterable[str | os.PathLike]) -> None:
    """Remove the provenance records of `outputs` (files and directories alike)."""
    from oracle.workflow.provenance import record_path

    for out in outputs:
        with contextlib.suppress(OSError):
            record_path(out).unlink(missing_ok=True)


@contextlib.contextmanager
def script_job(job: Any = None, *, log_path: str | os.PathLike | None | bool = True,
               threads: int | None = None) -> Iterator[float]:
    """Run the body of a workflow script: yields the start time (``time.time()``).

    job:      the ``snakemake`` object of the rule's script (None: a plain log/thread wrapper).
    log_path: where stdout and stderr go (progress lines, warnings, tracebacks); default the rule's
              log, None for the calling stream.
    threads:  torch intra-op threads (default the rule's threads; deterministic on CPU for a
              fixed count); applied when the script imports torch (before or inside the body).

    Before the body runs, every input that has a provenance record is checked against it
    (`verify_inputs`), so a job never computes from an artifact that changed since it was made.
    An :class:`OracleError` (bad input) ends the process with exit status 1 and its one-line
    message on the original stderr, where Snakemake shows it, as well as in the log; Ctrl-C
    (KeyboardInterrupt) ends it with status 130 and the one line ``interrupted; rerun to
    resume``; other exceptions keep their traceback (in the log) since they are bugs.
    """
    started = time.time()
    if log_path is True:
        log_path = job.log[0] if job is not None and len(job.log) else None
    if threads is None and job is not None:
        threads = job.threads
    orig_out, orig_err = sys.stdout, sys.stderr
    fh = open(log_path, "w", buffering=1) if log_path else None  # noqa: SIM115
    try:
        if fh is not None:
            sys.stdout = sys.stderr = fh
        if threads:  # only scripts that use torch pay for importing it
            _torch_threads(max(1, int(threads)))
        try:
            if job is not None:
                verify_inputs(job.input, getattr(job, "config", None))
            yield started
        except OracleError as exc:
            msg = f"{type(exc).__name__}: {exc}"
            print(msg, file=sys.stderr)
            if fh is not None:
                print(msg, file=orig_err)
            raise SystemExit(1) from None
        except KeyboardInterrupt:  # Ctrl-C: not a bug; a rerun resumes from the job's checkpoints
            from oracle.workflow.jobs.server import INTERRUPTED

            print(INTERRUPTED, file=sys.stderr)
            if fh is not None:
                print(INTERRUPTED, file=orig_err)
            raise SystemExit(130) from None
        except Exception:
            # a bug: its traceback in the log too (the interpreter prints it on the original
            # stderr only after this block has closed the log)
            if fh is not None:
                traceback.print_exc(file=fh)
            raise
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "oracle_torch_threads", False)]
        sys.stdout, sys.stderr = orig_out, orig_err
        if fh is not None:
            fh.close()


def _torch_threads(n: int) -> None:
    """torch.set_num_threads(n) now if torch is imported, else right after the job imports it
    (`run_job` scripts import inside `main`, after `script_job` started)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
        return
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.loader is None:
        return
    loader, exec_module = spec.loader, spec.loader.exec_module

    def exec_then_set(module: Any) -> None:
        exec_module(module)
        module.set_num_threads(n)

    class _Finder:  # hands out the spec found above, once, with the thread count attached
        oracle_torch_threads = True

        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            if name != "torch":
                return None
            sys.meta_path.remove(_Finder)
            loader.exec_module = exec_then_set
            return spec

    sys.meta_path.insert(0, _Finder)


def verify_inputs(inputs: Any, config: Mapping | None = None) -> list[Path]:
    """Check that every input is the artifact this run's rule would have made; returns the
    files checked against a record (`oracle.workflow.provenance.input_identity.check_inputs`).

    Each input with a record must have its recorded bytes (same size and modification time,
    or else the same sha256), lie where its record says, and, given the run `config`, (oracle
    samples) come from this run's world and oracle file. Whether it was made under this run's
    settings is the start check's question (its job's params, `oracle.workflow.provenance.stale`). A record that names files the artifact refers to without copying them
    (``extra.references``: the shards behind a merged samples file) has those checked too,
    against the sha256 it recorded for them. An input without a record is an error unless it
    lies outside ``results/`` and the config names it (raw data). DataError with one line.
    """
    from oracle.workflow.provenance.input_identity import check_inputs

    return check_inputs(inputs, config)


# --------------------------------------------------------------------------- provenance records
#
# One helper writes every record of a workflow job: `record_job`, fed by the `snakemake` object
# of the rule's script. What an artifact depends on besides its inputs and code is its job's
# params (the rule's script reads the config only through them), stored in its record.

_SCRIPT_COPY = re.compile(r"^tmp[A-Za-z0-9_]+\.(.+\.py)$")  # Snakemake's copy: tmpXXXXXXXX.<name>.py


def job_script(job: Any, argv0: str | None = None) -> Path | None:
    """The source file of the running Snakemake script (not its temporary copy), or None."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    m = _SCRIPT_COPY.match(name)
    scriptdir = getattr(job, "scriptdir", None)
    if m is None or not scriptdir:
        return None
    src = Path(scriptdir) / m.group(1)
    return src if src.is_file() else None


def _job_seed(job: Any) -> int | None:
    wc = getattr(job, "wildcards", None)
    for source in (wc, getattr(job, "params", None)):
        value = getattr(source, "seed", None) if source is not None else None
        if isinstance(value, (int, str)) and str(value).isdigit():
            return int(value)
    return None


def record_job(job: Any, started: float | None, *, outputs: Iterable[str | os.PathLike] | None = None,
               inputs: Any = None, extra_inputs: Iterable[str | os.PathLike] = (),
               seed: int | None = None,
               extra: Mapping | None = None, device: str | None = None) -> list[Path]:
    """Write the provenance record of every output of one workflow job; returns the sidecars.

    job:          the ``snakemake`` object of a rule's script (rule, wildcards, input, output,
                  params); only attributes are read. Each record stores the job's params.
    started:      ``time.time()`` at the job's start (``script_job`` yields it).
    outputs:      the artifacts (default every ``job.output``).
    inputs:       the inputs to hash (default ``job.input``); `extra_inputs` are added (raw
                  data, a checkpoint outside the DAG).
    seed:         default the ``seed`` wildcard, else ``params.seed``.
    The record's ``code.files`` also covers the rule's script file.
    """
    from oracle.workflow.provenance import write_record

    wildcards = dict(job.wildcards.items()) if hasattr(job.wildcards, "items") else dict(job.wildcards or {})
    script = job_script(job)
    ins = [job.input if inputs is None else inputs, list(extra_inputs)]
    finished = time.time()
    return [
        write_record(a, rule=job.rule, wildcards=wildcards, params=getattr(job, "params", None),
                     inputs=ins, seed=_job_seed(job) if seed is None else seed, started=started,
                     finished=finished, extra=extra, device=device, code_extra=[script] if script else ())
        for a in (job.output if outputs is None else outputs)
    ]
