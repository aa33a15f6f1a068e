"""Tables work in the tools they are made for: the LaTeX of every table compiles under pdflatex
with booktabs only (Unicode written as plain LaTeX), and a Markdown cell holding a pipe keeps the
table's columns. Every table of a smoke run is checked the same way in the smoke-run tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from oracle.errors import OracleError
from oracle.report.tables import _LATEX_MATH, _LATEX_SPECIAL, latex_escape, markdown_cell, write_table
from tests.table_formats import compile_tables, floats_too_large_pt, latex_labels, markdown_column_counts, overfull_pt

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


def _wide_frames() -> dict[str, pd.DataFrame]:
    """Tables shaped like the widest a run writes: 7 seed-averaged measures with a std each
    beside 5 key columns (calibration_under_shift), and text columns with long cells and a
    comma list without spaces (shift_configurations)."""
    rng = np.random.default_rng(0)
    n = 12
    keys = {"Architecture": ["EfficientNet (test)"] * n, "N": [2000] * n, "Set": [f"tau0.7-noise0.{i:02d}" for i in range(n)],
            "Shift": [f"σ=0.{i}" for i in range(n)], "Seeds": [2] * n}
    measures = {}
    for name in ("Accuracy (%)", "ECE", "True ECE", "Pointwise true CE", "Brier", "Overconf.", "Overconf. (truth)"):
        measures[name] = rng.uniform(0.01, 0.9, n)
        measures[f"{name} std"] = rng.uniform(1e-4, 1e-2, n)
    text = {"Configuration": ["Mild imbalance, the second configuration"] * 4,
            "pi": ["(0.2,0.16,0.13,0.11,0.09,0.08,0.07,0.06,0.05,0.05)"] * 4,
            "World": ["tau0.7"] * 4, "KL_y (target)": [0.1, 0.2, 0.3, 0.4], "± std": [0.01] * 4,
            "Exact KL": [0.1, 0.2, 0.3, 0.4], "Monte Carlo KL": [0.11, 0.2, 0.3, 0.4], "± SE": [0.01] * 4}
    metrics = {"Metric": ["FD (domain features) ↓", "IS-like score (domain classifier) ↑"], "Value": ["1.11", "3.95 ± 0.22"],
               "Feature space": ["domain CNN trained on digits train split (128-d penultimate layer)"] * 2}
    return {"measures": pd.DataFrame({**keys, **measures}), "text": pd.DataFrame(text), "metrics": pd.DataFrame(metrics)}


def test_wide_tables_fit_the_text_width_of_a_plain_article(tmp_path):
    paths = [write_table(frame, tmp_path / name, caption=f"a wide table ({name})", label=f"exp:{name}")["tex"]
             for name, frame in _wide_frames().items()]
    status, errors = compile_tables(paths, tmp_path)
    assert status == 0, errors
    assert max(overfull_pt(tmp_path), default=0.0) <= 1.0, [p.read_text()[:400] for p in paths]
    for p in paths:
        tex = p.read_text()
        assert "resizebox" not in tex  # narrowed by layout (size, split, wrapped text), not scaled
    measures = paths[0].read_text()
    # value and std in one cell: "0.0203 $\\pm$ 0.0013", the std column gone from the header
    assert "$\\pm$" in measures and "ECE std" not in measures


def test_every_table_has_a_column_variant_that_fits_a_twocolumn_article(tmp_path):
    """`<stem>.column.tex` (same caption and label) compiles in ``[twocolumn]{article}`` (a 229.5 pt
    column) without an overfull box over 1 pt, where the text-width table does not fit."""
    written = {name: write_table(frame, tmp_path / name, caption=f"a wide table ({name})", label=f"exp:{name}")
               for name, frame in _wide_frames().items()}
    columns = [w["column.tex"] for w in written.values()]
    status, errors = compile_tables(columns, tmp_path, twocolumn=True)
    assert status == 0, errors
    assert max(overfull_pt(tmp_path), default=0.0) <= 1.0, [p.read_text()[:600] for p in columns]
    assert latex_labels(columns) == latex_labels([w["tex"] for w in written.values()])  # swap one for the other
    # the check can fail: the text-width tables are too wide for the column
    status, errors = compile_tables([w["tex"] for w in written.values()], tmp_path, twocolumn=True)
    assert status == 0 and max(overfull_pt(tmp_path), default=0.0) > 1.0, errors


def test_a_narrower_venue_narrows_the_tables_a_wider_one_does_not_widen_them(tmp_path):
    """Config `figures` (width_in, column_width_in) narrows a variant below the plain article's
    widths, never widens it past them (the tables still fit a plain article)."""
    frame = _wide_frames()["measures"]
    plain = write_table(frame, tmp_path / "plain", caption="c", label="t")
    wide = write_table(frame, tmp_path / "wide", caption="c", label="t", widths_in={"width_in": 7.0, "column_width_in": 3.5})
    narrow = write_table(frame, tmp_path / "narrow", caption="c", label="t",
                         widths_in={"width_in": 4.0, "column_width_in": 2.5})
    for key in ("tex", "column.tex"):
        assert wide[key].read_text() == plain[key].read_text()
    assert "fits 289.08 pt" in narrow["tex"].read_text() and "fits 180.675 pt" in narrow["column.tex"].read_text()
    assert narrow["tex"].read_text().count("\\begin{tabular}") > plain["tex"].read_text().count("\\begin{tabular}")


def test_a_long_table_continues_in_floats_that_fit_the_page(tmp_path):
    """A table of many rows (with wrapped text) is split into floats that each fit a plain
    article's page, under one label, the later captions marked "(continued)"."""
    n = 90
    frame = pd.DataFrame({"Configuration": [f"row {i}: a configuration with a long description" for i in range(n)],
                          "Set": [f"tau0.7-noise0.{i:02d}" for i in range(n)], "Accuracy (%)": np.linspace(50, 99, n)})
    paths = write_table(frame, tmp_path / "long", caption="a long table", label="exp:long")
    for key, twocolumn in (("tex", False), ("column.tex", True)):
        tex = paths[key].read_text()
        assert tex.count("\\begin{table}") >= 2
        assert tex.count("\\addtocounter{table}{-1}\\caption{(continued)}") == tex.count("\\begin{table}") - 1
        assert latex_labels([paths[key]]) == ["tab:exp:long"] and tex.count("row 89:") == 1
        status, errors = compile_tables([paths[key]], tmp_path, twocolumn=twocolumn)
        assert status == 0, errors
        assert floats_too_large_pt(tmp_path) == [] and max(overfull_pt(tmp_path), default=0.0) <= 1.0
    # one number for every part of the table: the table after it is Table 2
    after = write_table(pd.DataFrame({"a": [1.0]}), tmp_path / "after", caption="after", label="exp:after")["tex"]
    status, errors = compile_tables([paths["tex"], after], tmp_path)
    assert status == 0 and "\\newlabel{tab:exp:after}{{2}" in (tmp_path / "tables.aux").read_text(), errors


def test_labels_name_the_experiment(tmp_path):
    frame = pd.DataFrame({"a": [1.0]})
    one = write_table(frame, tmp_path / "scaling" / "rounds", caption="c", label="scaling:rounds")["tex"]
    two = write_table(frame, tmp_path / "scaling-floor" / "rounds", caption="c", label="scaling-floor:rounds")["tex"]
    assert latex_labels([one, two]) == ["tab:scaling:rounds", "tab:scaling-floor:rounds"]
    assert latex_labels([write_table(frame, tmp_path / "plain", caption="c")["tex"]]) == ["tab:plain"]


def test_the_caption_says_what_the_table_shows_and_the_finding_is_a_note_file(tmp_path):
    import re

    from oracle.report.tables import read_markdown_table

    description = "Test accuracy against the Bayes accuracy (percent), mean ± std over seeds."
    finding = ("This run: at the largest N the gap is 8.07 to 13.6 percentage points. "
               "The paper: 97-98% against 99.77% (Table 1).")
    paths = write_table(pd.DataFrame({"Arch": ["ResNet"], "Accuracy (%)": [91.2]}), tmp_path / "acc",
                        caption=description, note=finding, label="scaling:acc")
    tex = paths["tex"].read_text()
    caption = re.search(r"\\caption\{(.*)\}\n", tex).group(1)
    assert "This run" not in caption and "paper:" not in caption and caption.startswith("Test accuracy")
    # the finding is no part of the float: it is the note file, a paragraph for the text
    assert "This run" not in tex and "This run" not in paths["column.tex"].read_text()
    note = paths["note.tex"].read_text()
    assert "This run: at the largest N" in note and "The paper: 97-98\\%" in note and "tab:scaling:acc" in note
    # the Markdown (and so the report) still shows the description and the finding
    assert read_markdown_table(paths["md"]).caption == f"{description} {finding}"
    status, errors = compile_tables([paths["tex"], paths["note.tex"]], tmp_path)
    assert status == 0, errors
    assert max(overfull_pt(tmp_path), default=0.0) <= 1.0
    assert write_table(pd.DataFrame({"a": [1.0]}), tmp_path / "bare", caption="c")["note.tex"].read_text().startswith("%")
