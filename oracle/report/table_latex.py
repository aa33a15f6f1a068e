"""The LaTeX of a table (`oracle.report.tables.write_table` writes it): laid out to fit a width
by font size, value and spread in one cell, headers on short lines, wrapped text columns and
column parts that repeat the key columns (joined into one wrapped cell in a narrow column), never
by scaling unless nothing else fits; a table taller than a page continues in further floats. Two
widths: a plain article's text (`TEXT_WIDTH_PT`) and one column of ``[twocolumn]{article}``
(`COLUMN_WIDTH_PT`). Plain LaTeX with booktabs, ASCII only (`oracle.report.tables.latex_escape`).
"""

from __future__ import annotations

import re

from oracle.errors import OracleError

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
                          "to oracle.report.table_latex._LATEX_MATH or _LATEX_SPECIAL")

    return "".join(one(ch) for ch in str(text))


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


def render_latex(headers: list[str], cells: list[list[str]], numeric: list[bool], keys: int, caption: str, label: str,
                 width_pt: float = TEXT_WIDTH_PT) -> str:
    """The table as LaTeX that fits `width_pt`: value and spread in one cell, headers on
    short lines, the largest of `LATEX_SIZES` at which the estimated width fits; when none does,
    split (at the first smaller size where that works) into parts stacked in one float, each repeating the key columns
    (the leading columns that are not floats; in a narrow column joined into one wrapped cell
    where they alone fill it); only when a part cannot fit, ``\\resizebox`` to
    the line width (graphicx; the comment line says so). A table taller than `FLOAT_HEIGHT_PT`
    continues in further floats (`_floats`) under the same number, captioned "(continued)", the label
    on the first. The caption says only what the table shows: the run's finding is the note file
    (`write_table`), outside the float. `headers`, `cells` (LaTeX), `numeric` (right-aligned) per
    column, of which the first `keys` say what a row is: `oracle.report.tables.write_table`'s."""
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
                  # a continuation keeps the table's number: "Table 4: (continued)"
                  "\\addtocounter{table}{-1}\\caption{(continued)}" if k else f"\\caption{{{latex_escape(caption)}}}"]
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


def render_note(note: str, label: str) -> str:
    """The run's finding beside table `tab:<label>` as a LaTeX paragraph (``<stem>.note.tex``),
    for the text that discusses the table; a comment line alone when there is none."""
    head = f"% generated by oracle.report.tables.write_table: the finding beside Table~\\ref{{tab:{label}}} (\\input it)"
    return head + "\n" + (latex_escape(note.strip()) + "\n" if note.strip() else "")
