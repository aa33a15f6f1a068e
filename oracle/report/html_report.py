"""The run's report: one self-contained HTML page (``results/<run>/report.html``) that opens
with the claims and shows every table as a table and every figure with its caption under it.

What a reader opens first is the paper's findings against this run (the claims table, a cell
too long to read in a row folded to its first words, then claims.png), then, per experiment and for the validation, each figure (its PNG embedded, its caption
right under it) and each table (rendered from its Markdown, so the numbers read as in the .md;
its caption above it), and last the run's timings. The files behind each artifact (PDF, CSV,
LaTeX) are linked by their paths relative to the report. No script, no external resource: the
page renders the same from a copy, offline, in any browser.

Captions come from the ``<stem>.caption.rst`` files (`oracle.report.captions`); tables from
``<stem>.md`` (`oracle.report.tables.read_markdown_table`). The workflow's `report` rule
(rules/report.smk) names the items in their order; `report_items` builds that order.
"""

from __future__ import annotations

import base64
import html
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oracle.errors import DataError
from oracle.io.atomic import atomic_output
from oracle.report.captions import CAPTION_SUFFIX, read_caption
from oracle.report.verdicts import counted, verdict_counts
from oracle.report.claims_figure import VERDICT_COLORS
from oracle.report.tables import read_markdown_table


@dataclass(frozen=True)
class RunFacts:
    """What the report's first screen says about the run, before any table: the code
    (`commit`, `dirty`), when (`date_utc`, ISO), where (`machine`), the effective config's
    hash `config_sha256` (its record's ``params_sha256``: that job's one param is the whole
    config), the wall time `wall_s` (seconds; None when unknown), the number of counted
    findings per verdict (`verdicts`: `oracle.report.verdicts.verdict_counts`, the one count of
    every output), the ids of the rows shown but not counted (`uncounted`) and one sentence per
    claim saying what the run found (`findings`: `oracle.report.claims_doc.claim_sentences`)."""

    commit: str
    dirty: bool
    date_utc: str
    machine: str
    config_sha256: str
    wall_s: float | None
    verdicts: Mapping[str, int]
    uncounted: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()


def claims_rows(claims_csv: str | os.PathLike) -> list[dict]:
    """The rows of a claims.csv. DataError naming the file when it cannot be read or has no
    ``verdict`` column."""
    import csv

    try:
        with open(claims_csv, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise DataError(f"report: cannot read {claims_csv}: {exc}") from None
    if rows and "verdict" not in rows[0]:
        raise DataError(f"{claims_csv}: no verdict column (rerun the claims rule)")
    return rows


def run_facts(record: Mapping, claims_csv: str | os.PathLike, wall_s: float | None) -> RunFacts:
    """The `RunFacts` of a run from the provenance record of its claims.csv (`record`: the code,
    the job's host and device, the config hash, when it was made), the verdicts and findings of
    `claims_csv` and its wall time `wall_s` (NaN or None: unknown). DataError naming the
    missing field of the record."""
    from oracle.report.claims_doc import claim_sentences

    rows = claims_rows(claims_csv)
    try:
        code = record["code"]
        machine = f"{record['hostname']} ({record['device']})" if record.get("device") else str(record["hostname"])
        facts = RunFacts(commit=str(code["commit"] or "unknown"), dirty=bool(code.get("dirty")),
                         date_utc=str(record["created_utc"]), machine=machine,
                         config_sha256=str(record["params_sha256"]),
                         wall_s=None if wall_s is None or wall_s != wall_s else float(wall_s),
                         verdicts=verdict_counts(rows), uncounted=tuple(r["id"] for r in rows if not counted(r)),
                         findings=tuple(claim_sentences(rows)))
    except (KeyError, TypeError) as exc:
        raise DataError(f"report: the provenance record of {claims_csv} lacks {exc} (rerun the claims rule)") from None
    return facts


def _facts_html(facts: RunFacts) -> str:
    """The run's facts as a definition list and the verdict counts as coloured badges."""
    from oracle.progress import format_seconds

    commit = facts.commit[:12] + (" (uncommitted changes)" if facts.dirty else "")
    wall = "unknown" if facts.wall_s is None else f"{format_seconds(facts.wall_s)} ({facts.wall_s:.0f} s)"
    rows = [("commit", commit), ("date", facts.date_utc), ("machine", facts.machine),
            ("config hash", f"sha256 {facts.config_sha256[:12]}"), ("wall time", wall)]
    facts_dl = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rows)
    badges = "".join(f'<span class="badge verdict-{_anchor(v)}">{html.escape(v)} <b>{int(n)}</b></span>'
                     for v, n in facts.verdicts.items())
    total = sum(int(n) for n in facts.verdicts.values())
    left = f" Shown, not counted: {html.escape(', '.join(facts.uncounted))}." if facts.uncounted else ""
    found = "".join(f"<li>{_inline(f)}</li>" for f in facts.findings)
    return (f'<dl class="run-facts">{facts_dl}</dl>'
            f'<p class="verdicts">The paper\'s {total} findings counted on this run: {badges}{left}</p>'
            + (f'<ol class="findings">{found}</ol>' if found else ""))


@dataclass(frozen=True)
class WorldRow:
    """One world of the run as the first screen shows it: its `name`, the experiments that use
    it (`questions`, "<experiment> (<kind>)"), its Bayes error (fraction) and aleatoric floor
    E[H(p(y|x))] (nats), each with its Monte Carlo SE over `n` samples, and `num_classes`."""

    name: str
    questions: tuple[str, ...]
    bayes_error: float
    bayes_error_se: float
    aleatoric_nats: float
    aleatoric_se: float
    n: int
    num_classes: int


def world_rows(worlds: Sequence[Mapping]) -> list[WorldRow]:
    """The `WorldRow` of each world of `worlds` ([{"name", "constants": path of its
    constants.json, "experiments": [...]}], `RunPaths.report_contents`), read from the numbers
    of its constants.json (``all``: `oracle.measures.world_constants`). DataError naming the file
    and the missing key."""
    import json

    rows = []
    for w in worlds:
        path = w["constants"]
        try:
            with open(path, encoding="utf-8") as f:
                c = json.load(f)["all"]
            rows.append(WorldRow(str(w["name"]), tuple(w.get("experiments") or ()),
                                 float(c["bayes_error"]["mean"]), float(c["bayes_error"]["se"]),
                                 float(c["aleatoric"]["mean"]), float(c["aleatoric"]["se"]),
                                 int(c["n"]), int(c["num_classes"])))
        except OSError as exc:
            raise DataError(f"report: cannot read {path}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"{path}: no {exc} among the world's constants (rerun the samples rule)") from None
    return rows


def _worlds_html(rows: Sequence[WorldRow]) -> str:
    """The worlds as a table: which experiments each serves, its Bayes error and floor ± SE."""
    body = "".join(
        f"<tr><td>{html.escape(r.name)}</td><td>{html.escape(', '.join(r.questions) or 'none')}</td>"
        f'<td class="r">{100 * r.bayes_error:.2f} ± {100 * r.bayes_error_se:.2f}</td>'
        f'<td class="r">{r.aleatoric_nats:.4f} ± {r.aleatoric_se:.4f}</td>'
        f'<td class="r">{r.num_classes}</td><td class="r">{r.n}</td></tr>' for r in rows)
    return ('<div class="table-wrap"><table class="worlds"><caption>The worlds of this run: the experiments that '
            "ask a question of each, its exact Bayes error and aleatoric floor (means over all of its oracle "
            "samples ± Monte Carlo SE; a figure's floor is over its experiment's test rows)</caption><thead><tr><th>world</th><th>used by (experiment, kind)</th>"
            '<th class="r">Bayes error (%)</th><th class="r">aleatoric floor (nats)</th><th class="r">K</th>'
            f'<th class="r">samples</th></tr></thead><tbody>{body}</tbody></table></div>')


@dataclass(frozen=True)
class Item:
    """One artifact of the report: a ``figure`` (<stem>.png and .pdf) or a ``table`` (<stem>.md,
    .csv and .tex, or only .md and .csv), each with <stem>.caption.rst unless `caption` is
    False. `label` heads it ("Figure 2 · scaling/scaling_panels"); `anchor` is its id."""

    kind: str
    stem: str
    label: str
    anchor: str
    caption: bool = True
    files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("figure", "table"):
            raise ValueError(f"report item {self.stem}: kind must be figure or table, got {self.kind!r}")


@dataclass(frozen=True)
class Section:
    """A heading and its items, in order."""

    title: str
    anchor: str
    items: tuple[Item, ...] = field(default_factory=tuple)
    note: str = ""


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "item"


def report_items(run: str, claims_stem: str, experiments: Sequence[Mapping], validation: Sequence[Mapping],
                 timings_stem: str | None, paper_labels: Mapping[str, Sequence[str]]) -> list[Section]:
    """The report's sections in order: the claims (table and forest plot), each experiment in
    config order and the validation (their artifacts in the order their kind declares them),
    then the run's timings.

    experiments: [{"name", "kind", "artifacts": [{"name", "type", "stem"}]}]; validation: the
    validation's artifacts in the same form ([] when it is off); paper_labels: {"<owner>/<name>":
    ["Figure 2", ...]}, the paper's numbering of an artifact (`oracle.report.paper`).
    """
    sections = [Section("The paper's claims against this run", "claims", (
        Item("table", claims_stem, "Claims: one row per finding of the paper", "claims-table", caption=False,
             files=("csv", "md")),
        Item("figure", claims_stem, "Claims: every interval the rules compared", "claims-figure")),
        note="Each finding of the paper with this run's value, its interval and the verdict of the rule "
             "its row states (claims.md).")]
    for owner, title, arts in ([(e["name"], f"{e['name']} (kind {e['kind']})", e["artifacts"]) for e in experiments]
                               + ([("validation", "validation of the oracle world", validation)] if validation else [])):
        items = []
        for a in sorted(arts, key=lambda a: a["type"] != "figure"):  # figures first, each kind's order kept
            ids = list(paper_labels.get(f"{owner}/{a['name']}", ()))
            label = f"{', '.join(ids)} · {owner}/{a['name']}" if ids else f"{owner}/{a['name']}"
            items.append(Item(a["type"], a["stem"], label, _anchor(f"{owner}-{a['name']}")))
        sections.append(Section(title, _anchor(owner), tuple(items)))
    if timings_stem:
        sections.append(Section("Where this run's time went", "timings", (
            Item("table", timings_stem, "Timings: job-seconds per rule, wall time, critical path", "timings-table",
                 caption=False, files=("csv", "md")),)))
    return sections


#: The paper the workflow reproduces (the report's title).
PAPER_TITLE = "What lies beneath the curve? Scaling laws in the presence of exact posteriors"


def report_intro(run: str) -> tuple[str, str]:
    """(title, intro) of the report of run folder `run` (results/<run>)."""
    name = Path(run).name
    return (f"Run {name}: {PAPER_TITLE}",
            f"Every table and figure of the run `{run}` (its effective config: `{run}/config.yaml`), each with "
            "its caption: what it shows, then what this run's data show, the paper's value beside ours. First the "
            "paper's findings judged on this run's numbers; every file named here has a provenance record beside it "
            "(`<file>.prov.json`).")


_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px;
       padding: 1em 2em 4em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin: 1.8em 0 .4em; }
nav ul { columns: 2; padding-left: 1.2em; } nav li { break-inside: avoid; }
figure { margin: 0 0 1.5em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: .92em; color: #333; margin: .4em 0; max-width: 60em; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: .85em; margin: .3em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; vertical-align: top; text-align: left;
         overflow-wrap: break-word; }
th { border-bottom: 2px solid #888; background: #f6f6f6; position: sticky; top: 0; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; } td.c, th.c { text-align: center; }
td.long { min-width: 14em; max-width: 28em; } summary { cursor: pointer; }
details[open] summary { display: none; }
.run-facts { display: grid; grid-template-columns: max-content 1fr; gap: .1em 1em; margin: .6em 0; }
.run-facts dt { color: #555; } .run-facts dd { margin: 0; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; padding: .1em .6em; margin: 0 .3em .3em 0; border-radius: .3em; }
.files { font-size: .8em; color: #666; } .files a { color: #555; }
.note { color: #444; max-width: 60em; } code { font-size: .9em; }
ol.findings { max-width: 60em; font-size: .92em; padding-left: 1.6em; } ol.findings li { margin: .15em 0; }
"""


def _verdict_css() -> str:
    """One colour per verdict, the claims figure's (`VERDICT_COLORS`): a tint of it behind the
    verdict's cells and badges, the colour itself as their left border."""
    return "\n".join(f".verdict-{_anchor(v)} {{ background: {c}26; border-left: 4px solid {c}; }}"
                     for v, c in VERDICT_COLORS.items())


def _files(item: Item, out_dir: Path) -> str:
    suffixes = item.files or (("pdf", "png") if item.kind == "figure" else ("csv", "md", "tex"))
    links = []
    for s in suffixes:
        path = Path(f"{item.stem}.{s}")
        if path.is_file():
            rel = Path(os.path.relpath(path, out_dir)).as_posix()
            links.append(f'<a href="{html.escape(rel)}">{html.escape(path.name)}</a>')
    return f'<p class="files">files: {" · ".join(links)}</p>' if links else ""


def _inline(text: str) -> str:
    """Markdown-ish text as HTML: escaped, with `code` spans and backslash escapes resolved."""
    text = re.sub(r"\\([\\`*_<>#+\-.!\[\]])", lambda m: f"\x00{ord(m.group(1))}\x00", text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    return re.sub("\x00(\\d+)\x00", lambda m: html.escape(chr(int(m.group(1)))), out)


def _notes(text: str) -> str:
    """The Markdown under a table: "#" headings, "- " items (a wrapped item's indented lines
    joined to it) as a list, other lines as paragraphs (consecutive lines joined)."""
    out, bullets, para = [], [], []

    def flush(lists: bool = True) -> None:
        if para:
            out.append(f'<p class="note">{_inline(" ".join(para))}</p>')
            para.clear()
        if lists and bullets:
            out.append(f"<ul>{''.join(f'<li>{_inline(b)}</li>' for b in bullets)}</ul>")
            bullets.clear()

    for line in text.splitlines():
        if line.startswith("- "):
            flush(lists=False)
            bullets.append(line[2:])
        elif bullets and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()
        elif line.startswith("#"):
            flush()
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            flush()
            para.append(line.strip())
        else:
            flush()
    flush()
    return "".join(out)


_ALIGN = {"right": ' class="r"', "center": ' class="c"', "left": ""}
#: A cell longer than this (characters: a claim's rule, a list of numbers) shows its first words
#: and opens to its whole text on a click (<details>, no script), so the columns after it (the
#: verdict) stay in view.
LONG_CELL = 160


def _folded(text: str, head: int = 90) -> str:
    cut = text.rfind(" ", 0, head)
    short = text[:cut if cut > 40 else head]
    return f"<details><summary>{html.escape(short)} …</summary>{html.escape(text)}</details>"


def _table(item: Item) -> tuple[str, str]:
    """(the table as HTML, the caption of its .md) of a table item."""
    md = read_markdown_table(f"{item.stem}.md")
    # the verdict right after the row's name (claims.md keeps its column order; only the page
    # moves it), so what was found reads before the long rule and numbers cells
    order = list(range(len(md.header)))
    verdict = [i for i, h in enumerate(md.header) if h.strip().lower() == "verdict"]
    if verdict and verdict[0] > 1:
        order.remove(verdict[0])
        order.insert(1, verdict[0])
    md = md._replace(header=[md.header[i] for i in order], align=[md.align[i] for i in order],
                     rows=[[row[i] for i in order] for row in md.rows])
    head = "".join(f"<th{_ALIGN[a]}>{html.escape(h)}</th>" for h, a in zip(md.header, md.align))
    verdict = [1] if verdict else []
    rows = []
    for row in md.rows:
        cells = []
        for i, (cell, a) in enumerate(zip(row, md.align)):
            cls = _ALIGN[a]
            if i in verdict:  # "supported (close)": the verdict's colour
                cls = f' class="verdict-{_anchor(cell.split(" (")[0])}"'
            elif len(cell) > LONG_CELL:
                cells.append(f'<td class="long">{_folded(cell)}</td>')
                continue
            cells.append(f"<td{cls}>{html.escape(cell)}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    table = (f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
             f"</div>{_notes(md.notes)}")
    return table, md.caption


def _figure(item: Item) -> str:
    from oracle.report.figures import FIGURE_DPI

    png = Path(f"{item.stem}.png")
    try:
        raw = png.read_bytes()
    except OSError as exc:
        raise DataError(f"report: cannot read figure {png}: {exc}") from None
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        raise DataError(f"report: {png} is not a PNG file")
    # shown at its size in inches (saved at FIGURE_DPI, a CSS pixel is 1/96 inch), at most the page's width
    width = round(int.from_bytes(raw[16:20], "big") * 96 / FIGURE_DPI)
    data = base64.b64encode(raw).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" width="{width}" alt="{html.escape(item.label)}">'


def _caption(item: Item, fallback: str = "") -> str:
    if not item.caption:
        return fallback
    return read_caption(f"{item.stem}.{CAPTION_SUFFIX}")


def render_report(sections: Sequence[Section], out: str | os.PathLike, title: str, intro: str = "",
                  facts: RunFacts | None = None, worlds: Sequence[WorldRow] = ()) -> str:
    """The report page as HTML text (`out` is where it will be written: the artifacts' links
    are relative to its folder); `facts`, when given, right under the title, then the table of
    `worlds`, before the intro and any other table. DataError naming the file when an artifact
    is missing."""
    out_dir = Path(out).parent
    nav, body = [], []
    for sec in sections:
        nav.append(f'<li><a href="#{sec.anchor}">{html.escape(sec.title)}</a>'
                   + (f" ({', '.join(html.escape(i.label.split(' · ')[0]) for i in sec.items if ' · ' in i.label)})"
                      if any(" · " in i.label for i in sec.items) else "") + "</li>")
        body.append(f'<section id="{sec.anchor}"><h2>{html.escape(sec.title)}</h2>')
        if sec.note:
            body.append(f'<p class="note">{html.escape(sec.note)}</p>')
        for item in sec.items:
            body.append(f'<figure class="{item.kind}" id="{item.anchor}"><h3>{html.escape(item.label)}</h3>')
            if item.kind == "figure":
                body.append(_figure(item))
                body.append(f"<figcaption>{html.escape(_caption(item))}</figcaption>")
            else:
                table, md_caption = _table(item)
                body.append(f"<figcaption>{html.escape(_caption(item, md_caption))}</figcaption>")
                body.append(table)
            body.append(_files(item, out_dir) + "</figure>")
        body.append("</section>")
    return page_html(title, f"{_facts_html(facts) if facts else ''}{_worlds_html(worlds) if worlds else ''}"
                            f"{''.join(f'<p class=note>{_inline(p)}</p>' for p in intro.split(chr(10) * 2) if p.strip())}"
                            f"<nav><ul>{''.join(nav)}</ul></nav>", chr(10).join(body))


def page_html(title: str, header: str, body: str) -> str:
    """A self-contained page in the report's style (no script, no external resource): `title`
    as its title and heading, then `header` and `body` (HTML)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{_CSS}{_verdict_css()}</style></head><body><header><h1>{html.escape(title)}</h1>"
            f"{header}</header>\n{body}\n</body></html>\n")


def table_html(header: Sequence[str], rows: Sequence[Sequence[str]], verdict_columns: Sequence[int] = ()) -> str:
    """A table of plain text cells as HTML: escaped, a cell longer than `LONG_CELL` folded to
    its first words, the cells of `verdict_columns` (indices) in their verdict's colour (the
    claims table's, "supported (close)" as supported)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(map(str, row)):
            if i in verdict_columns and cell:
                cells.append(f'<td class="verdict-{_anchor(cell.split(" (")[0])}">{html.escape(cell)}</td>')
            elif len(cell) > LONG_CELL:
                cells.append(f'<td class="long">{_folded(cell)}</td>')
            else:
                cells.append(f"<td>{html.escape(cell)}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def write_report(sections: Sequence[Section], out: str | os.PathLike, title: str, intro: str = "",
                 facts: RunFacts | None = None, worlds: Sequence[WorldRow] = ()) -> Path:
    """Render the report (`render_report`) and write it to `out` atomically."""
    text = render_report(sections, out, title, intro, facts, worlds)
    with atomic_output(out) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out)
