"""Generated blocks between markers (oracle.report.generated_text): read, replaced, refused."""

from __future__ import annotations

import pytest

from oracle.errors import DataError
from oracle.report.generated_text import generated_part, write_generated_part

B, E = "<!-- gen -->", "<!-- end gen -->"


def test_replace_keeps_the_hand_written_text(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{B}\n\nold\n\n{E}\noutro\n")
    assert generated_part(doc, B, E) == "old\n"
    write_generated_part(doc, B, E, "new 1\nnew 2\n")
    assert doc.read_text() == f"intro\n{B}\nnew 1\nnew 2\n{E}\noutro\n"
    assert generated_part(doc, B, E) == "new 1\nnew 2\n"


def test_missing_marker_names_the_file_and_leaves_it(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{B}\nold\n")
    with pytest.raises(DataError, match="doc.md: the markers"):
        write_generated_part(doc, B, E, "new\n")
    assert doc.read_text() == f"intro\n{B}\nold\n"
