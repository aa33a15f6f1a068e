"""Tables as CSV (full precision, for audits), Markdown and LaTeX, written atomically.

Every writer renders all of its outputs in memory first and then replaces each file
atomically, so a failure leaves no partial artifact.

One formatting rule for the Markdown and LaTeX of every table (`format_cell`), chosen from
the column's header (`column_kind`):

- ``percent``: a header with ``(%)`` or ``(pp)`` (accuracy, error, gaps, drops, MAE in
  percentage points): 2 decimals, ``78.30``, ``-3.85``, ``0.00``;
- ``parameter``: a configured setting (``tau``, ``sigma``): as configured, ``0.9``;
- ``spread``: a std or SE column (header ``± ...``, or the word ``std`` or ``SE`` in it) of a
  value that is not a percentage: 2 significant digits, ``0.0014`` (the spread of a
  percentage, "± std" right after "Accuracy (%)", is a percentage);
- ``number``: everything else (nats, bits, fractions, R², ρ, z, ratios): 3 significant
  digits, ``0.0532``, ``0.980``, ``60.1``, ``0`` (scientific below 1e-4 and from 1e6 on).

Integers print as integers and missing values as a dash. A spread column stands right after
the value it spreads, so every seed-averaged column has one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple
from pathlib import Path
import os

import numpy as np
import pandas as pd

from oracle.errors import DataError, OracleError
from oracle.io.atomic import atomic_output
from oracle.report.table_latex import _LATEX_MATH, _LATEX_SPECIAL, latex_escape  # noqa: F401 - this module's API too

FloatFormat = str | Callable[[float], str]

_SPREAD_HEADER = re.compile(r"(^|\s)(±|std|SE)(\s|$)")
_PARAMETERS = {"tau", "sigma", "τ", "σ"}


def column_kind(header: str, previous: str | None = None) -> str:
    """``percent``, ``parameter``, ``spread`` or ``number``: how a table column's floats are
    formatted (module docstring), from its header and the kind of the column before it (a
    spread of a percentage, "± std" after "Accuracy (%)", is a percentage too)."""
    h = str(header).strip()
    if "(%)" in h or "(pp)" in h:
        return "percent"
    if h in _PARAMETERS:
        return "parameter"
    if _SPREAD_HEADER.search(h):
        return "percent" if previous == "percent" else "spread"
    return "number"


def column_kinds(headers) -> list[str]:
    """`column_kind` of each header in table order."""
    kinds: list[str] = []
    value_kind = None  # the kind of the last column that is no spread
    for h in headers:
        kinds.append(column_kind(h, value_kind))
        if not _SPREAD_HEADER.search(str(h).strip()):
            value_kind = kinds[-1]
    return kinds


def _significant(v: float, digits: int) -> str:
    if v == 0 or not math.isfinite(v):
        return "0" if v == 0 else str(v)
    e = math.floor(math.log10(abs(v)))
    if e < -4 or e >= 6:
        return f"{v:.{digits - 1}e}"
    return f"{v:.{max(digits - 1 - e, 0)}f}"


def format_cell(v: float, kind: str) -> str:
    """One float of a column of `kind` (`column_kind`) as text, by the module's rule."""
    if kind == "percent":
        r = round(v, 2)
        return f"{(r if r != 0 else 0.0):.2f}"  # no "-0.00"
    if kind == "parameter":
        return f"{v:g}"
    return _significant(v, 2 if kind == "spread" else 3)


def _formatter(float_format: FloatFormat) -> Callable[[float], str]:
    if callable(float_format):
        return float_format
    spec = float_format[1:] if float_format.startswith("%") else float_format
    format(1.0, spec)  # fail early on a bad spec
    return lambda v: format(v, spec)


def _format_frame(df: pd.DataFrame, float_format: FloatFormat | None,
                  missing: str) -> tuple[list[list[str]], list[bool]]:
    """Cells as strings and, per column, whether it is numeric (right-aligned); floats by the
    module's rule, or all by `float_format` when one is given."""
    fixed = _formatter(float_format) if float_format is not None else None
    fmts = [fixed or (lambda v, k=k: format_cell(v, k)) for k in column_kinds(df.columns)]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for value, is_num, fmt in zip(rec, numeric, fmts):
            if value is None or (isinstance(value, float) and math.isnan(value)):
                cells.append(missing)
            elif is_num and isinstance(value, (float, np.floating)):
                cells.append(fmt(float(value)))
            else:
                cells.append(str(value))
        rows.append(cells)
    return rows, numeric


def markdown_cell(text: object) -> str:
    """`text` as one Markdown table cell: a pipe escaped (an unescaped ``|`` ends the cell and
    shifts every column after it) and newlines folded into spaces."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


class MarkdownTable(NamedTuple):
    """A Markdown table as `_render_markdown` writes it: its caption (the ``Table:`` line), the
    header cells, each column's alignment ("left", "right", "center"), the rows of cells (text
    as shown, pipes unescaped) and the Markdown text under the table (notes)."""

    caption: str
    header: list[str]
    align: list[str]
    rows: list[list[str]]
    notes: str


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in _CELL_SPLIT.split(inner)]


def read_markdown_table(path: str | os.PathLike) -> MarkdownTable:
    """The table of a Markdown file written by `write_table` or `write_csv_markdown` (the
    inverse of `_render_markdown`, notes included). DataError naming the file when it holds no
    pipe table."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise DataError(f"cannot read Markdown table {path}: {exc}") from None
    caption = next((ln[len("Table:"):].strip() for ln in lines if ln.startswith("Table:")), "")
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("|")), None)
    if start is None or start + 1 >= len(lines) or not re.fullmatch(r"\s*\|?(\s*:?-+:?\s*\|)*\s*:?-+:?\s*\|?\s*",
                                                                      lines[start + 1]):
        raise DataError(f"{path}: no Markdown pipe table (a header line, then a |---| line)")
    end = start + 2
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    header = _cells(lines[start])
    align = ["center" if a.startswith(":") and a.endswith(":") else "right" if a.endswith(":") else "left"
             for a in (c.strip() for c in _cells(lines[start + 1]))]
    rows = [_cells(ln) for ln in lines[start + 2:end]]
    bad = [i for i, r in enumerate(rows) if len(r) != len(header)]
    if bad or len(align) != len(header):
        raise DataError(f"{path}: table row {bad[0] + 1 if bad else 0} has another number of cells than the header "
                        f"({len(header)})")
    return MarkdownTable(caption, header, align, rows, "\n".join(lines[end:]).strip())


def _render_markdown(df: pd.DataFrame, caption: str, float_format: FloatFormat | None = None) -> str:
    from tabulate import tabulate

    rows, numeric = _format_frame(df, float_format, missing="–")
    table = tabulate([[markdown_cell(c) for c in row] for row in rows], headers=[markdown_cell(c) for c in df.columns],
                     tablefmt="pipe", disable_numparse=True, colalign=["right" if n else "left" for n in numeric])
    return f"Table: {caption}\n\n{table}\n"


def _latex_columns(df: pd.DataFrame, rows: list[list[str]], numeric: list[bool]) -> tuple[list[str], list[list[str]],
                                                                                         list[bool]]:
    """Headers and cells of the LaTeX table: a spread column right after its value (a std or SE,
    `column_kinds`) joins it as ``value $\\pm$ spread`` under the value's header, which halves
    the columns of a seed-averaged table. Returns (headers, rows, numeric)."""
    kinds = column_kinds(df.columns)
    headers, cols, num = [], [], []
    for j, h in enumerate(df.columns):
        joins = (j > 0 and _SPREAD_HEADER.search(str(h).strip()) and numeric[j] and numeric[j - 1]
                 and not _SPREAD_HEADER.search(str(df.columns[j - 1]).strip()))
        cells = [latex_escape(r[j]) for r in rows]
        if joins:
            cols[-1] = [v if s in ("--", "") or v == "--" else f"{v} $\\pm$ {s}" for v, s in zip(cols[-1], cells)]
            headers[-1] = headers[-1] + " ± " + ("SE" if "SE" in str(h) else "std")
            continue
        headers.append(str(h))
        cols.append(cells)
        num.append(numeric[j])
    return headers, [list(r) for r in zip(*cols)] if cols else [], num


def write_all(contents: Mapping[Path, bytes]) -> None:
    """Replace each file atomically with its rendered bytes."""
    for path, data in contents.items():
        with atomic_output(path) as tmp:
            tmp.write_bytes(data)


#: The files `write_table` writes per table, by suffix after the stem.
TABLE_FILES = ("csv", "md", "tex", "column.tex", "note.tex")


def write_table(df: pd.DataFrame, stem: str | os.PathLike, caption: str, label: str | None = None,
                note: str = "", widths_in: Mapping[str, float] | None = None) -> dict[str, Path]:
    """Write ``df`` as ``<stem>.csv``, ``<stem>.md``, ``<stem>.tex`` (fits a plain article's text,
    `oracle.report.table_latex`), ``<stem>.column.tex`` (the same table fit to one column, same label: a
    two-column manuscript inputs it instead) and ``<stem>.note.tex`` (the finding).

    Args:
        df: the table; its index is not written (reset it first if it carries data).
        stem: output path without suffix; parent folders are created.
        caption: what the table shows (LaTeX ``\\caption``; the Markdown ``Table:`` line is it
            and then `note`, the same text as the run's caption file).
        note: what this run found and the paper's value beside it: in LaTeX the paragraph of
            ``<stem>.note.tex``, outside the table float and its caption.
        label: the LaTeX label's name, unique in a run: ``<experiment>:<artifact>`` (two
            experiments of one kind write tables of the same name); default the stem's name.
        widths_in: the venue's widths (config ``figures``: ``width_in``, ``column_width_in``,
            inches): a narrower one than ``TEXT_WIDTH_PT`` or ``COLUMN_WIDTH_PT`` narrows its variant
            (a wider one does not widen it: the tables also fit a plain article).
    Floats in .md and .tex follow the module's rule (`column_kind`, `format_cell`); the CSV
    keeps full precision (``repr`` of each float) for audits.

    Returns:
        ``{"csv", "md", "tex", "column.tex", "note.tex"}`` -> paths. The LaTeX label is ``tab:<label>``.
    """
    if not isinstance(df, pd.DataFrame):
        raise OracleError(f"write_table: expected a pandas DataFrame, got {type(df).__name__}")
    stem = Path(stem)
    paths = {ext: stem.with_name(f"{stem.name}.{ext}") for ext in TABLE_FILES}
    from oracle.report.table_latex import COLUMN_WIDTH_PT, PT_PER_IN, TEXT_WIDTH_PT, render_latex, render_note

    def latex(width_pt: float) -> bytes:
        rows, numeric = _format_frame(df, None, missing="--")
        keys = next((j for j, c in enumerate(df.columns) if pd.api.types.is_float_dtype(df[c])), len(df.columns))
        kept = [c for j, c in enumerate(df.columns) if j < keys]
        headers, cells, numeric = _latex_columns(df, rows, numeric)
        keys = len([h for h in headers if h in kept][:keys])
        return render_latex(headers, cells, numeric, keys, caption, label, width_pt).encode("utf-8")

    label = label or stem.name
    widths_in = widths_in or {}
    text_pt = min(TEXT_WIDTH_PT, widths_in.get("width_in", math.inf) * PT_PER_IN)
    column_pt = min(COLUMN_WIDTH_PT, widths_in.get("column_width_in", math.inf) * PT_PER_IN)
    contents = {
        paths["csv"]: df.to_csv(index=False, lineterminator="\n").encode("utf-8"),
        paths["md"]: _render_markdown(df, " ".join(p.strip() for p in (caption, note) if p.strip())).encode("utf-8"),
        paths["tex"]: latex(text_pt),
        paths["column.tex"]: latex(column_pt),
        paths["note.tex"]: render_note(note, label).encode("utf-8"),
    }
    write_all(contents)
    return paths


def write_csv_markdown(df: pd.DataFrame, csv: str | os.PathLike, md: str | os.PathLike, caption: str,
                       float_format: FloatFormat | None = None, notes: str = "",
                       csv_only: tuple[str, ...] = ()) -> None:
    """Write ``df`` as a CSV (full precision) and a Markdown table, for tables that have no
    place in the paper's LaTeX (e.g. a run's timings); floats by the module's rule unless
    `float_format` (a format spec or callable) is given; `notes` (Markdown) follow the table;
    the columns `csv_only` (machine-readable ones) are left out of the Markdown."""
    if not isinstance(df, pd.DataFrame):
        raise OracleError(f"write_csv_markdown: expected a pandas DataFrame, got {type(df).__name__}")
    shown = df.drop(columns=[c for c in csv_only if c in df.columns])
    write_all({Path(csv): df.to_csv(index=False, lineterminator="\n").encode("utf-8"),
               Path(md): (_render_markdown(shown, caption, float_format) + (f"\n{notes.rstrip()}\n" if notes else ""))
               .encode("utf-8")})
