"""The run's report (oracle.report.html_report): claims first, tables as tables, each caption with
its figure; and the report of a smoke run rendered in headless Chromium."""

from __future__ import annotations

import base64
import html.parser
import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from oracle.errors import DataError
from oracle.report.captions import write_caption
from oracle.report.figures import save_figure
from oracle.report.html_report import Item, Section, render_report, report_items, write_report
from oracle.report.tables import read_markdown_table, write_csv_markdown, write_table


class Tree(html.parser.HTMLParser):
    """The elements of a page as (tag, attrs, text inside it), in document order."""

    def __init__(self):
        super().__init__()
        self.elements, self.open = [], []

    def handle_starttag(self, tag, attrs):
        el = [tag, dict(attrs), ""]
        self.elements.append(el)
        if tag not in ("img", "meta", "br", "link"):
            self.open.append(el)

    def handle_endtag(self, tag):
        while self.open:
            if self.open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for el in self.open:
            el[2] += data


def parse(text: str) -> list:
    tree = Tree()
    tree.feed(text)
    return tree.elements


def figure_file(stem, caption):
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().plot([0, 1], [0, 1])
    save_figure(fig, stem)
    write_caption(f"{stem}.caption.rst", caption)


@pytest.fixture
def run(tmp_path):
    """A run folder with claims (figure and table), one experiment (a figure, a table) and timings."""
    r = tmp_path / "results" / "r"
    figure_file(r / "claims", "Every interval | the rules compared.")
    write_csv_markdown(pd.DataFrame({"id": ["power_law", "plateau"], "rule": ["KL ∝ N^-alpha | R^2 >= 0.9", "x < y"],
                                     "verdict": ["supported", "not posed"]}), r / "claims.csv", r / "claims.md",
                       "The paper's findings", notes="Verdicts: supported 1, not posed 1.")
    figure_file(r / "scaling" / "s" / "figures" / "panels", "Loss against N_train. This run: alpha 0.42.")
    table = pd.DataFrame({"Arch": ["a|b", "c"], "N": [100, 2000], "Accuracy (%)": [91.234567, 95.0]})
    write_table(table, r / "scaling" / "s" / "tables" / "acc", "Accuracy <caption>")
    write_caption(r / "scaling" / "s" / "tables" / "acc.caption.rst", "Accuracy against Bayes, E[KL(p || q)].")
    write_csv_markdown(pd.DataFrame({"rule": ["total"], "job_s": [3.5]}), r / "timings.csv", r / "timings.md",
                       "Where the time went", notes="- Wall time: 9 s\n- Critical path: `data` 1 s")
    return r


def sections_of(r):
    exp = [{"name": "s", "kind": "scaling", "artifacts": [
        {"name": "acc", "type": "table", "stem": str(r / "scaling/s/tables/acc")},
        {"name": "panels", "type": "figure", "stem": str(r / "scaling/s/figures/panels")}]}]
    return report_items(str(r), str(r / "claims"), exp, [], str(r / "timings"),
                        {"s/panels": ["Figure 2"], "s/acc": ["Table 1"]})


def test_report_opens_with_the_claims_and_shows_tables_and_captions(run):
    out = write_report(sections_of(run), run / "report.html", "Run r", "A run of `config.yaml`.")
    text = out.read_text()
    els = parse(text)
    sections = [a["id"] for tag, a, _ in els if tag == "section"]
    assert sections == ["claims", "s", "timings"]
    # the claims: the forest plot with its caption, then the claims table, pipes and < intact
    claims = next(t for tag, a, t in els if tag == "section" and a["id"] == "claims")
    assert claims.index("Every interval | the rules compared.") < claims.index("power_law")
    cells = [t for tag, _, t in els if tag == "td"]
    assert "KL ∝ N^-alpha | R^2 >= 0.9" in cells and "x < y" in cells and "&lt;" in text
    assert [a.get("class") for tag, a, t in els if tag == "td" and t in ("supported", "not posed")] == [
        "verdict-supported", "verdict-not-posed"]
    # every figure: its PNG embedded (the bytes of the file) and its caption right after it
    figures = [i for i, (tag, a, _) in enumerate(els) if tag == "figure" and "figure" in a.get("class", "")]
    assert len(figures) == 2
    for i in figures:
        img = next(el for el in els[i:] if el[0] == "img")
        assert img[1]["src"].startswith("data:image/png;base64,")
        after = els[els.index(img) + 1]
        assert after[0] == "figcaption" and after[2].strip()
    png = base64.b64decode(next(a["src"] for tag, a, _ in els if tag == "img" and "Figure 2" in a["alt"]).split(",")[1])
    assert png == (run / "scaling/s/figures/panels.png").read_bytes()
    assert "Loss against N_train. This run: alpha 0.42." in text  # the caption file, rst escapes undone
    # the table: the Markdown's cells and alignment, its caption above it, files linked beside the report
    acc = next(t for tag, a, t in els if tag == "figure" and a.get("id") == "s-acc")
    assert acc.index("Accuracy against Bayes, E[KL(p || q)].") < acc.index("91.23")
    assert "a|b" in cells and "2000" in cells and "95.00" in cells
    assert [a.get("class") for tag, a, t in els if tag == "td" and t == "91.23"] == ["r"]
    links = [a["href"] for tag, a, _ in els if tag == "a" and "href" in a and not a["href"].startswith("#")]
    assert "scaling/s/tables/acc.tex" in links and "claims.pdf" in links
    assert all(not re.match(r"(/|[a-z]+:)", h) for h in links)  # relative: the run folder moves as a whole
    # headings carry the paper's numbering; the notes under a table stay
    assert any(tag == "h3" and t == "Figure 2 · s/panels" for tag, _, t in els)
    assert [t for tag, _, t in els if tag == "li" and t.startswith(("Wall", "Critical"))] == [
        "Wall time: 9 s", "Critical path: data 1 s"]
    assert "<script" not in text and "http" not in text.split("<body>")[1]  # nothing runs, nothing fetched


def test_a_missing_artifact_is_named(run):
    (run / "scaling/s/figures/panels.png").unlink()
    with pytest.raises(DataError, match=r"panels\.png"):
        render_report(sections_of(run), run / "report.html", "t")
    assert not (run / "report.html").exists()


def test_markdown_tables_read_back_as_written(tmp_path):
    df = pd.DataFrame({"name": ["x|y", "z"], "value (%)": [1.23456, np.nan], "n": [3, 4]})
    write_table(df, tmp_path / "t", "a caption")
    md = read_markdown_table(tmp_path / "t.md")
    assert md.caption == "a caption" and md.header == ["name", "value (%)", "n"]
    assert md.align == ["left", "right", "right"] and md.rows == [["x|y", "1.23", "3"], ["z", "–", "4"]]
    (tmp_path / "bad.md").write_text("Table: no table here\n\njust text\n")
    with pytest.raises(DataError, match=r"bad\.md: no Markdown pipe table"):
        read_markdown_table(tmp_path / "bad.md")


def test_item_kinds_are_checked():
    with pytest.raises(ValueError, match="figure or table"):
        Item("movie", "x", "x", "x")
    assert Section("t", "t").items == ()
