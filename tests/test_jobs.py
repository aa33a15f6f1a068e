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
    with pytest.raises(KeyError):  # bugs keep their traceback
        with script_job(log_path=tmp_path / "other.log"):
            raise KeyError("bug")
    assert issubclass(DataError, OracleError)


def _made(path, text, rule="make", **extra):
    from oracle.workflow.provenance import write_record

    path.write_text(text)
    write_record(path, rule=rule, config={}, config_keys=[], extra=extra or None)
    return path


def test_inputs_are_checked_against_their_records(tmp_path, monkeypatch):
    """A job never computes from an artifact that changed since it was made: one flipped byte
    (same size) is a one-line DataError naming the file and the rule to rerun; a file without
    a record (raw data) is not checked; an untouched file is not even rehashed."""
    from oracle.workflow.jobs import verify_inputs

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
