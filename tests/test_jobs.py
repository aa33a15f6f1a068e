"""oracle.workflow.jobs: the wrapper every workflow script runs in."""

from __future__ import annotations

import pytest

from oracle.errors import DataError, OracleError
from oracle.workflow.jobs import script_job


def test_script_job_turns_oracle_errors_into_one_line(tmp_path, capsys):
    log = tmp_path / "job.log"
    with pytest.raises(SystemExit) as stop:
        with script_job(log):
            print("working")
            raise DataError("data root /x not found: expected <root>/<split>/<class>/")
    assert stop.value.code == 1
    assert "DataError: data root /x not found" in capsys.readouterr().err
    text = log.read_text()
    assert "working" in text and "DataError: data root /x" in text
    with pytest.raises(KeyError):  # bugs keep their traceback
        with script_job(tmp_path / "other.log"):
            raise KeyError("bug")
    assert issubclass(DataError, OracleError)
