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


#: Characters that LaTeX treats specially, and every non-ASCII character a table of this project
#: writes, as commands of plain LaTeX (no package beyond booktabs): a generated .tex compiles in
#: a bare ``article`` under pdflatex, which has no Unicode input by default. Math symbols go
#: through ``\ensuremath`` so two in a row never meet as ``$$``.
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
    "|": r"\textbar{}", "<": r"\textless{}", ">": r"\textgreater{}",
    "–": "--", "—": "---", "‘": "`", "’": "'", "“": "``", "”": "''", "…": r"\ldots{}",
}
_LATEX_MATH = {
    "±": r"\pm", "−": "-", "×": r"\times", "·": r"\cdot", "≈": r"\approx", "≤": r"\leq", "≥": r"\geq",
    "≠": r"\neq", "∝": r"\propto", "→": r"\rightarrow", "←": r"\leftarrow", "↑": r"\uparrow", "↓": r"\downarrow",
    "∞": r"\infty", "∫": r"\int", "‖": r"\|", "²": "^{2}", "³": "^{3}", "√": r"\surd",
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\varepsilon", "η": r"\eta",
    "θ": r"\theta", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu", "µ": r"\mu", "ν": r"\nu", "π": r"\pi",
    "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "φ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega",
    "Δ": r"\Delta", "Σ": r"\Sigma", "Φ": r"\Phi", "Ω": r"\Omega",
}
_LATEX_ACCENTS = {"\u0302": r"\hat", "\u0303": r"\tilde", "\u0304": r"\bar"}  # ŷ -> \hat{y}


def latex_escape(text: str) -> str:
    """`text` as LaTeX for a table cell or caption: special characters escaped, every non-ASCII
    character of `_LATEX_SPECIAL`/`_LATEX_MATH` written as plain LaTeX, a letter with a combining
    hat, tilde or bar as math (``ŷ`` -> ``\ensuremath{\hat{y}}``). OracleError naming any other
    non-ASCII character: add it to the maps (a .tex that does not compile is worse than none)."""
    import unicodedata

    def one(ch: str) -> str:
        if ch in _LATEX_SPECIAL:
            return _LATEX_SPECIAL[ch]
        if ch in _LATEX_MATH:
            return rf"\ensuremath{{{_LATEX_MATH[ch]}}}"
        if ord(ch) < 128:
            return ch
        base, *marks = unicodedata.normalize("NFD", ch)
        if marks and base.isascii() and all(m in _LATEX_ACCENTS for m in marks):
            for m in marks:
                base = f"{_LATEX_ACCENTS[m]}{{{base}}}"
            return rf"\ensuremath{{{base}}}"
        raise OracleError(f"latex_escape: no LaTeX for {ch!r} (U+{ord(ch):04X}) in {str(text)[:60]!r}; add it "
                          "to oracle.report.tables._LATEX_MATH or _LATEX_SPECIAL")

    return "".join(one(ch) for ch in str(text))


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


#: The text width (pt) a table must fit: a plain ``article`` at 10 pt (the narrowest common
#: \\textwidth; a 6.5 in journal text width is 468 pt, ICLR's 5.5 in 397 pt).
TEXT_WIDTH_PT = 345.0
#: The column width (pt) the column variant of a table (``<stem>.column.tex``) must fit: one
#: column of ``[twocolumn]{article}`` at 10 pt (3.18 in; two-column venues print 3.25-3.4 in).
COLUMN_WIDTH_PT = 229.5
#: TeX points per inch.
PT_PER_IN = 72.27
#: The height (pt) one table float may take: a plain ``article``'s 550 pt \\textheight, less room
#: for the text a float leaves on its page; a longer table continues in the next float.
FLOAT_HEIGHT_PT = 430.0
#: Font sizes a table may be set in, largest first: (command, size relative to 10 pt).
LATEX_SIZES = (("\\small", 0.9), ("\\footnotesize", 0.8), ("\\scriptsize", 0.7))
#: Baseline skip (pt) of each of `LATEX_SIZES` in a 10 pt article, by its scale: a table row's height.
_BASELINE_PT = {0.9: 11.0, 0.8: 9.5, 0.7: 8.0}
#: Column separation (pt, each side) of every table: LaTeX's default 6 pt spends 12 pt a column.
TABCOLSEP_PT = 3.0
#: Mean width (pt) of one character of a table cell at 10 pt (Computer Modern digits are 5 pt,
#: capitals 7 pt): an over-estimate, so a table chosen to fit does fit.
_CHAR_PT = 5.5
#: A header is broken into lines of at most this many characters (at spaces).
HEADER_LINE = 11
#: A text column with a longer cell is set as a paragraph column this many characters wide
#: (``p{...}``; the text wraps) instead of one line as wide as its longest cell.
WRAP_CHARS = 26


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


def _header_lines(header: str) -> list[str]:
    """`header` broken at spaces into lines of at most `HEADER_LINE` characters (a longer word
    stays whole)."""
    import textwrap

    return textwrap.wrap(header, HEADER_LINE, break_long_words=False, break_on_hyphens=False) or [""]


def _visible_length(latex: str) -> float:
    """About how many characters wide a LaTeX cell prints (commands count as one character)."""
    text = re.sub(r"\\ensuremath\{\\?([a-zA-Z]*)\}|\\[a-zA-Z]+(\{\})?|\$", "x", latex)
    return len(text.replace("{", "").replace("}", "").replace("\\", ""))


def _wrapped(rows: list[list[str]], numeric: list[bool]) -> set[int]:
    """The text columns set as paragraphs: a cell longer than `WRAP_CHARS`."""
    return {j for j, n in enumerate(numeric) if not n and any(_visible_length(r[j]) > WRAP_CHARS for r in rows)}


def latex_table_width(headers: list[str], rows: list[list[str]], scale: float = 1.0,
                      wrapped: set[int] = frozenset()) -> float:
    """Estimated printed width (pt) of a table of `headers` (broken by `_header_lines`) and
    LaTeX `rows`, at font size `scale` x 10 pt with `TABCOLSEP_PT` between columns; the
    columns `wrapped` are `WRAP_CHARS` wide."""
    width = 0.0
    for j, h in enumerate(headers):
        chars = max([_visible_length(latex_escape(line)) for line in _header_lines(h)]
                    + [WRAP_CHARS if j in wrapped else _visible_length(r[j]) for r in rows])
        width += chars * _CHAR_PT * scale + 2 * TABCOLSEP_PT
    return width


def _column_parts(headers: list[str], cells: list[list[str]], keys: int, scale: float,
                  wrapped: set[int] = frozenset(), width_pt: float = TEXT_WIDTH_PT) -> list[list[int]] | None:
    """The columns of each part when the table is split into parts that each fit
    `width_pt` at `scale`: the first `keys` columns (what a row is) in every part, the
    others filled in order; None when the keys and a single other column do not fit."""
    def width(cols):
        return latex_table_width([headers[j] for j in cols], [[r[j] for j in cols] for r in cells], scale,
                                 {i for i, j in enumerate(cols) if j in wrapped})

    parts, current = [], list(range(keys))
    for j in range(keys, len(headers)):
        if width([*current, j]) <= width_pt:
            current.append(j)
        elif len(current) > keys:
            parts.append(current)
            current = [*range(keys), j]
            if width(current) > width_pt:
                return None
        else:
            return None
    return [*parts, current]


def _floats(headers: list[str], cells: list[list[str]], parts: list[list[int]], wrapped: set[int], scale: float,
            caption: str, width_pt: float) -> list[list[tuple[list[int], list[int]]]]:
    """The blocks of each float, each block (columns, rows) one tabular, so that no float is
    taller than `FLOAT_HEIGHT_PT` (its caption, and per block a header and its rows, a row as
    tall as its longest wrapped cell): the rows are cut into runs that fit a float under one
    header, every run shown in every column part, and the blocks fill the floats in order."""
    line = _BASELINE_PT[scale]
    avail = FLOAT_HEIGHT_PT - (12.0 * (1 + _visible_length(latex_escape(caption)) * 5.0 // max(width_pt, 1.0)) + 10.0)
    head = line * max((len(_header_lines(h)) for h in headers), default=1) + 14.0  # rules and the skip
    row_h = [line * max([1] + [-(-int(_visible_length(r[j])) // WRAP_CHARS) for j in wrapped]) for r in cells]
    runs: list[list[int]] = [[]]
    used = head
    for i, h in enumerate(row_h):
        if runs[-1] and used + h > avail:
            runs.append([])
            used = head
        runs[-1].append(i)
        used += h
    floats: list[list[tuple[list[int], list[int]]]] = [[]]
    used = 0.0
    for rows in runs:
        for cols in parts:
            h = head + sum(row_h[r] for r in rows)
            if floats[-1] and used + h > avail:
                floats.append([])
                used = 0.0
            floats[-1].append((cols, rows))
            used += h
    return floats


def _layout(headers: list[str], cells: list[list[str]], numeric: list[bool], keys: int,
            width_pt: float) -> tuple[str, float, list[list[int]]] | None:
    """(size command, scale, column parts) of a table that fits `width_pt`: the largest of
    `LATEX_SIZES` at which it fits whole, else the first smaller size at which it splits into
    parts that each repeat the `keys` leading columns (`_column_parts`); None when neither works."""
    wrapped = _wrapped(cells, numeric)
    for size, scale in LATEX_SIZES:
        if latex_table_width(headers, cells, scale, wrapped) <= width_pt:
            return size, scale, [list(range(len(headers)))]
    for size, scale in LATEX_SIZES[1:]:
        parts = _column_parts(headers, cells, keys, scale, wrapped, width_pt) if 0 < keys < len(headers) else None
        if parts is not None:
            return size, scale, parts
    return None


def _render_latex(df: pd.DataFrame, caption: str, label: str, width_pt: float = TEXT_WIDTH_PT) -> str:
    """The table as LaTeX that fits `width_pt`: value and spread in one cell, headers on
    short lines, the largest of `LATEX_SIZES` at which the estimated width fits; when none does,
    split (at the first smaller size where that works) into parts stacked in one float, each repeating the key columns
    (the leading columns that are not floats; in a narrow column joined into one wrapped cell
    where they alone fill it); only when a part cannot fit, ``\\resizebox`` to
    the line width (graphicx; the comment line says so). A table taller than `FLOAT_HEIGHT_PT`
    continues in further floats (`_floats`), their captions marked "(continued)", the label
    on the first. The caption says only what the table shows: the run's finding is the note file
    (`write_table`), outside the float."""
    rows, numeric = _format_frame(df, None, missing="--")
    keys = next((j for j, c in enumerate(df.columns) if pd.api.types.is_float_dtype(df[c])), len(df.columns))
    kept = [c for j, c in enumerate(df.columns) if j < keys]
    headers, cells, numeric = _latex_columns(df, rows, numeric)
    keys = len([h for h in headers if h in kept][:keys])
    layout = _layout(headers, cells, numeric, keys, width_pt)
    if layout is None and keys > 1:
        # a narrow column: the key columns (what a row is) become one wrapped cell, "a, b, c"
        headers = [", ".join(headers[:keys]), *headers[keys:]]
        cells = [[", ".join(r[:keys]), *r[keys:]] for r in cells]
        numeric, keys = [False, *numeric[keys:]], 1
        layout = _layout(headers, cells, numeric, keys, width_pt)
    wrapped = _wrapped(cells, numeric)
    shrink = layout is None
    size, scale, parts = layout or (*LATEX_SIZES[-1], [list(range(len(headers)))])
    align = ["r" if n else "l" for n in numeric]
    column = [f"p{{{WRAP_CHARS * _CHAR_PT * scale:.0f}pt}}" if j in wrapped else a for j, a in enumerate(align)]
    floats = _floats(headers, cells, parts, wrapped, scale, caption, width_pt)
    cells = [[c.replace(",", ",\\allowbreak{}") if j in wrapped else c for j, c in enumerate(r)] for r in cells]

    def head(h: str, a: str) -> str:
        lines = [latex_escape(line) for line in _header_lines(h)]
        stacked = " \\\\ ".join(lines)
        return lines[0] if len(lines) == 1 else f"\\begin{{tabular}}[b]{{@{{}}{a}@{{}}}}{stacked}\\end{{tabular}}"

    needs = ("booktabs and graphicx (\\resizebox: too wide at \\scriptsize)" if shrink else "booktabs only")
    lines = [f"% generated by oracle.report.tables.write_table; needs {needs} (plain LaTeX, ASCII); fits "
             f"{width_pt:g} pt" + (f"; {len(floats)} floats (a long table continues)" if len(floats) > 1 else "")]
    for k, blocks in enumerate(floats):
        lines += ["\\begin{table}[tp]", "\\centering", size, f"\\setlength{{\\tabcolsep}}{{{TABCOLSEP_PT:g}pt}}",
                  f"\\caption{{{latex_escape(caption)}{' (continued)' if k else ''}}}"]
        if not k:
            lines.append(f"\\label{{tab:{label}}}")
        for i, (cols, rows) in enumerate(blocks):
            if i:
                lines.append("\\par\\medskip")  # the next part of the same table, under it
            if shrink:
                lines.append("\\resizebox{\\linewidth}{!}{%")
            lines += [
                f"\\begin{{tabular}}{{{''.join(column[j] for j in cols)}}}",
                "\\toprule",
                " & ".join(head(headers[j], align[j]) for j in cols) + " \\\\",
                "\\midrule",
            ]
            lines += [" & ".join(cells[r][j] for j in cols) + " \\\\" for r in rows]
            lines += ["\\bottomrule", "\\end{tabular}" + ("}" if shrink else "")]
        lines.append("\\end{table}")
    return "\n".join(lines) + "\n"


def _render_note(note: str, label: str) -> str:
    """The run's finding beside table `tab:<label>` as a LaTeX paragraph (``<stem>.note.tex``),
    for the text that discusses the table; a comment line alone when there is none."""
    head = f"% generated by oracle.report.tables.write_table: the finding beside Table~\\ref{{tab:{label}}} (\\input it)"
    return head + "\n" + (latex_escape(note.strip()) + "\n" if note.strip() else "")


def write_all(contents: Mapping[Path, bytes]) -> None:
    """Replace each file atomically with its rendered bytes."""
    for path, data in contents.items():
        with atomic_output(path) as tmp:
            tmp.write_bytes(data)


#: The files `write_table` writes per table, by suffix after the stem.
TABLE_FILES = ("csv", "md", "tex", "column.tex", "note.tex")


def write_table(df: pd.DataFrame, stem: str | os.PathLike, caption: str, label: str | None = None,
                note: str = "", widths_in: Mapping[str, float] | None = None) -> dict[str, Path]:
    """Write ``df`` as ``<stem>.csv``, ``<stem>.md``, ``<stem>.tex`` (fits `TEXT_WIDTH_PT`),
    ``<stem>.column.tex`` (the same table fit to one column, `COLUMN_WIDTH_PT`, same label: a
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
            inches): a narrower one than `TEXT_WIDTH_PT` or `COLUMN_WIDTH_PT` narrows its variant
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
    label = label or stem.name
    widths_in = widths_in or {}
    text_pt = min(TEXT_WIDTH_PT, widths_in.get("width_in", math.inf) * PT_PER_IN)
    column_pt = min(COLUMN_WIDTH_PT, widths_in.get("column_width_in", math.inf) * PT_PER_IN)
    contents = {
        paths["csv"]: df.to_csv(index=False, lineterminator="\n").encode("utf-8"),
        paths["md"]: _render_markdown(df, " ".join(p.strip() for p in (caption, note) if p.strip())).encode("utf-8"),
        paths["tex"]: _render_latex(df, caption, label, text_pt).encode("utf-8"),
        paths["column.tex"]: _render_latex(df, caption, label, column_pt).encode("utf-8"),
        paths["note.tex"]: _render_note(note, label).encode("utf-8"),
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
