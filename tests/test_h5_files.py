"""oracle.io.h5_files: the one "exists, complete, right format" check of the library's HDF5
readers (images, splits, predictions, sample shards, the input layout check)."""

from __future__ import annotations

import re
from pathlib import Path

import h5py
import numpy as np
import pytest

from oracle.errors import DataError, ShardError
from oracle.io.h5_files import open_complete, reading

REPO = Path(__file__).resolve().parents[1]


def _file(path: Path, complete: bool = True, version: int | None = None) -> Path:
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
        if version is not None:
            f.attrs["format_version"] = version
        if complete:
            f.attrs["complete"] = True
    return path


def test_each_failure_is_one_line_naming_the_file(tmp_path):
    cases = {
        tmp_path / "none.h5": "no such splits file",
        (tmp_path / "junk.h5"): "not a readable HDF5 splits file",
        _file(tmp_path / "cut.h5", complete=False): "is incomplete .*the writer did not finish; rerun it",
        _file(tmp_path / "old.h5", version=1): "is in splits format 1, not 2: rerun it",
    }
    (tmp_path / "junk.h5").write_bytes(b"not hdf5")
    for path, message in cases.items():
        with pytest.raises(DataError, match=message) as exc:
            open_complete(path, "splits", "rerun it", format_version=2)
        assert str(path) in str(exc.value) and "\n" not in str(exc.value)
    with open_complete(_file(tmp_path / "ok.h5", version=2), "splits", "rerun it", 2) as f:
        assert f["x"][()].tolist() == [0, 1, 2]
    with pytest.raises(ShardError, match="no such sample file"):
        open_complete(tmp_path / "none.h5", "sample", "rerun it", error=ShardError)


def test_reading_names_the_file_of_a_failed_read_and_closes_it(tmp_path):
    path = _file(tmp_path / "a.h5")
    with pytest.raises(DataError, match=r"cannot read images file .*a\.h5: KeyError") as exc:
        with reading(path, "images", "rerun it") as f:
            f["missing"]
    assert "\n" not in str(exc.value)
    with pytest.raises(ShardError, match="own"):  # the block's own one-line errors pass unchanged
        with reading(path, "images", "rerun it") as f:
            raise ShardError("its own line")
    assert not f.id.valid  # closed


def test_no_reader_checks_completeness_by_itself():
    """The completeness prologue lives once: no other module of oracle/ reads the flag itself."""
    own = REPO / "oracle" / "io" / "h5_files.py"
    readers = [str(p.relative_to(REPO)) for p in sorted((REPO / "oracle").rglob("*.py"))
               if p != own and re.search(r"attrs\.get\(\s*[\"']complete[\"']", p.read_text())]
    assert readers == []
