"""claims.csv and claims.md of a run, as a reader sees them (the rows: `oracle.report.claims`).

`claims_rows` adds to each row of `oracle.report.claims.claims` its ``margin`` (how many of its
interval's own SEs the interval end nearest its reference lies from it: how far the interval moves
before the verdict can change, `oracle.report.verdicts.row_margin`) and ``paper verdict`` (the same rule on the paper's
printed numbers, `oracle.report.paper_numbers.paper_verdicts`).

claims.md (`claims_markdown`) is GitHub-flavoured Markdown that also reads in a terminal at 100
columns: a heading, the one verdict count (`oracle.report.verdicts.counts_text`, the uncounted
checks named beside it), a short table (id, verdict, this run in a few words, the paper's value,
the paper's verdict, the margin) whose lines stay under `MAX_ROW` characters, then per claim its
sentence, values, interval, rule and numbers as a list wrapped at `WIDTH` columns. A verdict
within one SE of flipping (`oracle.report.verdicts.close`) is marked "(close)" in the table.
`claim_sentences` gives the one sentence per claim that opens the run's report.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping

from oracle.report.tables import markdown_cell
from oracle.report.verdicts import close, counted, counts_text, row_margin

#: The lines of claims.md are wrapped at this width (a terminal's 100 columns).
WIDTH = 100
#: A line of the short table stays under this many characters.
MAX_ROW = 200
#: The columns claims.csv gains here, after those of `oracle.report.claims.claims`.
MARGIN, PAPER_VERDICT = "margin", "paper verdict"
#: A row's seeds or test rows that would decide it, where the claims rows carry it (the power
#: analysis's column): shown under the claim and in its sentence.
TO_DECIDE = "to decide"
#: The short table's columns: (header, the most characters a cell keeps; None: as it is).
_SHORT = (("id", None), ("verdict", None), ("this run", 60), ("the paper", 40), ("paper's verdict", None),
          ("margin (SE)", None))


def claims_rows(numbers: Mapping[str, Mapping], experiments: Mapping[str, Mapping],
                judged_on: Mapping[str, str] | None = None) -> list[dict]:
    """The rows of `oracle.report.claims.claims` (judged_on: the config's ``claims.judged_on``)
    with ``margin`` (float, SEs; None where the row has no interval with an SE) and ``paper
    verdict`` added."""
    from oracle.report.claims import claims
    from oracle.report.paper_numbers import paper_verdicts

    paper = paper_verdicts()
    rows = claims(numbers, experiments, judged_on)
    for r in rows:
        r[MARGIN] = row_margin(r)[0]
        r[PAPER_VERDICT] = paper.get(r["id"], "")
    return rows


def _cut(text: str, most: int) -> str:
    """`text` cut at a word boundary to at most `most` characters, "…" marking the cut."""
    text = " ".join(str(text).split())
    if len(text) <= most:
        return text
    head = text[:most - 1]
    space = head.rfind(" ")
    return (head[:space] if space > most // 2 else head).rstrip(" ,;:(") + "…"


def _num(v: float) -> str:
    return f"{v:.3g}"


def _nearest_check(row: Mapping) -> dict | None:
    """The row's check record nearest its reference (`oracle.report.verdicts.row_margin`), or None."""
    import json

    margin, label = row_margin(row)
    if margin is None:
        return None
    return next(c for c in json.loads(row.get("checks") or "[]") if str(c.get("label", "")) == label)


def _interval(c: Mapping) -> str:
    return f"{_num(c['value'])} [{_num(c['lo'])}, {_num(c['hi'])}]"


def few_words(row: Mapping) -> str:
    """This run's finding in a few words: the check nearest its reference ("0.41 [0.33, 0.49] vs 0:
    alpha resnet") where the row has one, else the start of its "this run" (why not posed, the
    missing number)."""
    c = _nearest_check(row)
    if c is not None:
        return f"{_interval(c)} vs {_num(c['reference'])}: {c['label']}"
    return " ".join(str(row.get("this run", "")).split())


def _margin_cell(margin: object) -> str:
    if margin is None or margin == "" or margin != margin:
        return "–"
    return f"{float(margin):.2f}"


def margin_of(row: Mapping) -> float | None:
    m = row.get(MARGIN)
    return None if m is None or m == "" or m != m else float(m)


def _verdict_cell(row: Mapping) -> str:
    marks = [m for m, on in (("close", close(margin_of(row))), ("not counted", not counted(row))) if on]
    return f"{row['verdict']} ({', '.join(marks)})" if marks else str(row["verdict"])


def short_table(rows: list[Mapping]) -> list[str]:
    """The short GFM table of claims.md, its lines under `MAX_ROW` characters (the "this run"
    cell is cut further where a row would reach it)."""
    cells = [[str(r["id"]), _verdict_cell(r), few_words(r), str(r.get("paper", "")), str(r.get(PAPER_VERDICT, "")),
              _margin_cell(r.get(MARGIN))] for r in rows]
    most = [m for _, m in _SHORT]
    for row in cells:
        for i, m in enumerate(most):
            row[i] = markdown_cell(_cut(row[i], m) if m else row[i])
    header = [h for h, _ in _SHORT]

    def widths() -> list[int]:
        return [max(len(c) for c in col) for col in zip(header, *cells)]

    # the table pads every cell to its column's width: shorten the longest "this run" cells until it fits
    while sum(widths()) + 3 * len(header) + 1 >= MAX_ROW and widths()[2] > len(header[2]) + 4:
        w = widths()[2]
        for row in cells:
            if len(row[2]) == w:
                row[2] = markdown_cell(_cut(row[2].replace("\\|", "|"), w - 4))
    w = widths()
    right = {len(header) - 1}
    line = lambda cs: "| " + " | ".join(c.rjust(w[i]) if i in right else c.ljust(w[i])  # noqa: E731
                                        for i, c in enumerate(cs)) + " |"
    rule = "|" + "|".join("-" * (w[i] + 1) + ":" if i in right else "-" * (w[i] + 2) for i in range(len(w))) + "|"
    return [line(header), rule, *(line(c) for c in cells)]


_LEAD_MARK = re.compile(r"^(\s*)([-+*>#]|\d+[.)])(?=\s|$)")


def md_text(text: object) -> str:
    """Plain text as Markdown that renders as written: emphasis and HTML characters escaped
    (``*``, ``<``, a backtick, an underscore at a word's edge)."""
    s = str(text).replace("\\", "\\\\").replace("*", "\\*").replace("<", "\\<").replace("`", "\\`")
    return re.sub(r"(?<!\w)_|_(?!\w)", r"\\_", s)


def _item(label: str, text: str, *, escape: bool = True) -> list[str]:
    """One list item wrapped at `WIDTH`; a continuation line that would start a list or a heading
    has its mark escaped."""
    body = md_text(text) if escape else text
    lines = textwrap.wrap(f"- {label}: {body}", WIDTH, subsequent_indent="  ", break_long_words=False,
                          break_on_hyphens=False)
    return [lines[0], *(_LEAD_MARK.sub(r"\1\\\2", ln, count=1) if ln.strip()[:1] in "-+*>#0123456789" else ln
                        for ln in lines[1:])]


def claim_section(row: Mapping) -> list[str]:
    """One claim's part of claims.md: a heading, its sentence, then its values as a list."""
    label = row_margin(row)[1]
    m = margin_of(row)
    out = [f"### `{row['id']}`: {row['verdict']}", "", *textwrap.wrap(md_text(row.get("finding", "")), WIDTH), ""]
    out += _item("the paper", row.get("paper", ""))
    if row.get(PAPER_VERDICT):
        out += _item("the rule on the paper's printed numbers", row[PAPER_VERDICT])
    out += _item("this run", row.get("this run", "") or "–")
    if row.get("uncertainty"):
        out += _item("interval", row["uncertainty"])
    if m is not None:
        where = f" (check: {label})" if label else ""
        out += _item("margin", f"{m:.2f} SE{where}: the distance from the interval's end nearest its "
                     "reference to the reference" + ("; within one SE of flipping" if close(m) else ""))
    if row.get(TO_DECIDE):
        out += _item("to decide", row[TO_DECIDE])
    out += _item("rule", row.get("rule", ""))
    if not counted(row):
        out += _item("not counted", row.get("counted", ""))
    if row.get("numbers"):
        out += _item("numbers", " ".join(f"`{k}`" for k in str(row["numbers"]).split()), escape=False)
    return [*out, ""]


def claims_markdown(rows: Iterable[Mapping], title: str) -> str:
    """claims.md (module docstring): `title` as its heading, the verdict count, the short table
    (the first pipe table of the file: `oracle.report.tables.read_markdown_table` reads it), then
    each claim."""
    rows = list(rows)
    out = [f"# {title}", "", *textwrap.wrap(f"Verdicts: {md_text(counts_text(rows))}.", WIDTH), "",
           *short_table(rows), "",
           *textwrap.wrap("margin (SE): how far the end of the interval nearest its reference lies from it, in its own "
                          "SEs (how far it moves before the verdict can change); (close): within one SE. paper's verdict: "
                          "the same rule on the paper's printed numbers. Each claim's rule and numbers follow.",
                          WIDTH), "", "## Each claim", ""]
    for r in rows:
        out += claim_section(r)
    return "\n".join(out).rstrip() + "\n"


def claim_sentences(rows: Iterable[Mapping]) -> list[str]:
    """One sentence per claim saying what this run found: its id and verdict, the interval that
    decides it against its reference and how many SEs it lies from flipping (or why the row has
    none), and the paper's verdict beside it."""
    out = []
    for r in rows:
        c, m = _nearest_check(r), margin_of(r)
        tag = "" if counted(r) else " (a check, not counted)"
        if c is not None and m is not None:
            found = (f"{c['label']} is {_interval(c)} against {_num(c['reference'])}, {m:.2f} SE from flipping"
                     + (" (close)" if close(m) else ""))
        else:
            found = _cut(few_words(r), 160)
        paper = f"; the rule on the paper's printed numbers: {r[PAPER_VERDICT]}" if r.get(PAPER_VERDICT) else ""
        decide = f"; to decide: {r[TO_DECIDE]}" if r.get(TO_DECIDE) and r["verdict"] == "unresolved" else ""
        out.append(f"{r['id']}: {r['verdict']}{tag}: {found}{paper}{decide}.")
    return out
