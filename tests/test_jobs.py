"""oracle.workflow.jobs: the wrapper every workflow script runs in."""

from __future__ import annotations

import pytest

from oracle.errors import DataError, OracleError
from oracle.workflow.jobs import script_job


def test_script_job_turns_oracle_errors_into_one_line(tmp_path, capsys):
    log = tmp_path / "job.log"
    with pytest.raises(SystemExit) as stop:
        with script_job(log_path=log):
            print("working")
            raise DataError("data root /x not found: expected <root>/<split>/<class>/")
    assert stop.value.code == 1
    assert "DataError: data root /x not found" in capsys.readouterr().err
    text = log.read_text()
    assert "working" in text and "DataError: data root /x" in text
    with pytest.raises(KeyError):  # bugs keep their traceback, in the log as well
        with script_job(log_path=tmp_path / "other.log"):
            raise KeyError("bug")
    other = (tmp_path / "other.log").read_text()
    assert "Traceback" in other and "KeyError: 'bug'" in other
    assert issubclass(DataError, OracleError)


def _made(path, text, rule="make", **extra):
    from oracle.workflow.provenance import write_record

    path.write_text(text)
    write_record(path, rule=rule, params={}, extra=extra or None)
    return path


def test_inputs_are_checked_against_their_records(tmp_path, monkeypatch):
    """A job never computes from an artifact that changed since it was made: one flipped byte
    (same size) is a one-line DataError naming the file and the rule to rerun; a file without
    a record (raw data) is not checked; an untouched file is not even rehashed."""
    from oracle.workflow.jobs import verify_inputs

    # stand-in bytes: identity is tested here, the layout in tests/test_input_layout.py
    monkeypatch.setattr("oracle.workflow.provenance.input_identity.check_layout", lambda path: None)

    monkeypatch.chdir(tmp_path)
    flow = _made(tmp_path / "flow.pt", "weights", rule="oracle_train")
    raw = tmp_path / "raw.csv"
    raw.write_text("anything")
    assert verify_inputs([str(flow), [str(raw)]]) == [flow]
    flow.write_text("weightz")
    with pytest.raises(DataError, match=r"flow\.pt changed since rule 'oracle_train' made it.*--forcerun \S*flow\.pt") as err:
        verify_inputs({"world": str(flow)})
    assert "\n" not in str(err.value)


def test_a_merged_file_has_the_files_it_refers_to_checked(tmp_path, monkeypatch):
    from oracle.workflow.jobs import verify_inputs

    # stand-in bytes: identity is tested here, the layout in tests/test_input_layout.py
    monkeypatch.setattr("oracle.workflow.provenance.input_identity.check_layout", lambda path: None)

    monkeypatch.chdir(tmp_path)
    shard = _made(tmp_path / "shard-0000.h5", "rows")
    merged = _made(tmp_path / "all.h5", "virtual", rule="merge_samples", references=["shard-0000.h5"])
    assert verify_inputs([str(merged)]) == [merged, shard]
    shard.write_text("rowz")
    with pytest.raises(DataError, match="shard-0000.h5 changed"):
        verify_inputs([str(merged)])


def test_script_job_verifies_the_jobs_inputs(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    monkeypatch.chdir(tmp_path)
    flow = _made(tmp_path / "flow.pt", "weights", rule="oracle_train")
    flow.write_text("weightz")
    job = SimpleNamespace(input=[str(flow)], log=[str(tmp_path / "job.log")], threads=1)
    ran = []
    with pytest.raises(SystemExit):
        with script_job(job):
            ran.append(True)
    assert not ran and "DataError: " in capsys.readouterr().err


# --------------------------------------------------------------------------- run_job

def _job(tmp_path, **kw):
    from types import SimpleNamespace

    src = _made(tmp_path / "in.txt", "input", rule="merge_samples")
    base = dict(input=[str(src)], output=[str(tmp_path / "out.txt")], log=[str(tmp_path / "job.log")], threads=1,
                rule="use", wildcards={}, config={}, params=SimpleNamespace())
    return SimpleNamespace(**{**base, **kw})


def test_run_job_runs_main_and_records_what_it_returns(tmp_path, monkeypatch):
    from pathlib import Path

    from oracle.workflow.jobs import run_job
    from oracle.workflow.provenance import read_record

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORACLE_JOB_SERVER", "off")  # server=True, switched off: inline
    job = _job(tmp_path)

    def main(sm):
        Path(sm.output[0]).write_text(Path(sm.input[0]).read_text().upper())
        print("in the log")
        return {"extra": {"device": "cpu"}, "seed": 7}

    run_job(job, main)
    rec = read_record(tmp_path / "out.txt")
    assert rec["rule"] == "use" and rec["extra"] == {"device": "cpu"} and rec["seed"] == 7
    assert "in.txt" in " ".join(rec["inputs"]) and "in the log" in (tmp_path / "job.log").read_text()
    (tmp_path / "out.txt.prov.json").unlink()
    monkeypatch.setenv("RANK", "1")  # a torchrun rank other than 0 writes no record
    run_job(job, lambda sm: None, server=False)
    assert read_record(tmp_path / "out.txt", missing_ok=True) is None


def test_run_job_checks_inputs_before_main_and_stops_on_a_bad_switch(tmp_path, monkeypatch, capsys):
    from oracle.workflow.jobs import run_job

    monkeypatch.chdir(tmp_path)
    job = _job(tmp_path)
    (tmp_path / "in.txt").write_text("changed")
    ran = []
    with pytest.raises(SystemExit):
        run_job(job, ran.append, server=False)
    assert not ran and "in.txt changed since rule 'merge_samples'" in capsys.readouterr().err
    monkeypatch.setenv("ORACLE_JOB_SERVER", "maybe")
    with pytest.raises(SystemExit) as stop:
        run_job(job, ran.append)
    assert stop.value.code == 1 and not ran
    assert capsys.readouterr().err.strip() == "ConfigError: environment ORACLE_JOB_SERVER='maybe': expected auto, on or off"


def test_threads_apply_to_torch_imported_inside_main(tmp_path):
    """`run_job` scripts import torch inside `main`, after `script_job` started: the thread
    count still reaches it (a fresh process: torch not yet imported)."""
    import subprocess
    import sys

    code = ("from oracle.workflow.jobs import script_job\n"
            "with script_job(None, log_path=None, threads=1):\n"
            "    import torch\n"
            "    print(torch.get_num_threads())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr


def test_a_failed_job_leaves_no_record_of_its_outputs(tmp_path, monkeypatch, capsys):
    """Issue 31 case 7: the record of an output from an earlier run, and any record the failed
    job wrote, go with the outputs Snakemake removes (no record beside a missing output)."""
    from pathlib import Path

    from oracle.errors import DataError
    from oracle.workflow.jobs import run_job

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORACLE_JOB_SERVER", "off")
    job = _job(tmp_path)
    stale = tmp_path / "out.txt.prov.json"
    stale.write_text("{}")  # an earlier run's record; Snakemake removed out.txt before the job

    def main(sm):
        Path(sm.output[0]).write_text("half")
        raise DataError("bad input")

    with pytest.raises(SystemExit):
        run_job(job, main)
    assert not stale.exists() and "DataError: bad input" in capsys.readouterr().err
