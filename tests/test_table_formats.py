"""Tables work in the tools they are made for: the LaTeX of every table compiles under pdflatex
with booktabs only (Unicode written as plain LaTeX), and a Markdown cell holding a pipe keeps the
table's columns. Every table of a smoke run is checked the same way in the smoke-run tests."""

from __future__ import annotations

import pandas as pd
import pytest

from oracle.errors import OracleError
from oracle.report.tables import _LATEX_MATH, _LATEX_SPECIAL, latex_escape, markdown_cell, write_table
from tests.table_formats import compile_tables, markdown_column_counts

#: What the tables of this project write: Greek letters, math signs, arrows, a hat, dashes.
UNICODE = "σ τ ρ π Δ α − ≈ ↑ ↓ ± ∝ → ² ŷ – — ‖ µ ≤ ≥ ×"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"Set": ["base-noise0.1 (σ=0.1)", "p(y|x') | labels", "50% & $5 #1 _a {b} ~c ^d \\e"],
                         "Δ acc (pp)": [-3.5, 0.25, float("nan")], "Spearman ρ ↑": [0.9, -0.3, 1.0],
                         "Labels": ["y ~ p(y|x)", "clean rows' labels", UNICODE]})


def test_every_table_compiles_with_booktabs_alone(tmp_path):
    paths = write_table(_frame(), tmp_path / "weird_table", caption=f"Caption with {UNICODE} and | and %")
    tex = paths["tex"].read_text()
    assert tex.isascii()
    # a file of every mapped character besides, so a mapping that does not compile fails here
    every = write_table(pd.DataFrame({"char": list(_LATEX_MATH) + list(_LATEX_SPECIAL)}), tmp_path / "every",
                        caption="every mapped character")
    status, errors = compile_tables([paths["tex"], every["tex"]], tmp_path)
    assert status == 0, errors


def test_an_unmapped_character_is_named_not_written():
    with pytest.raises(OracleError, match=r"U\+263A"):
        latex_escape("smile ☺")
    assert latex_escape("ŷ") == r"\ensuremath{\hat{y}}" and latex_escape("a|b") == r"a\textbar{}b"


def test_markdown_tables_keep_their_columns_with_a_pipe_in_a_cell(tmp_path):
    md = write_table(_frame(), tmp_path / "t", caption="c")["md"].read_text()
    counts = markdown_column_counts(md)
    assert len(counts) == 5 and set(counts) == {4}, md
    assert markdown_cell("a | b\nc") == "a \\| b c"
    # the checker itself: an unescaped pipe does shift the count
    assert markdown_column_counts("| a | b |\n|---|---|\n| x | y | z |") == [2, 2, 3]
