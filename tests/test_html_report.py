"""The run's report (oracle.report.html_report): claims first, tables as tables, each caption with
its figure; and the report of a smoke run rendered in headless Chromium."""

from __future__ import annotations

import base64
import html.parser
import os
import re
import shutil
import subprocess
from pathlib import Path

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
    fig = Figure(figsize=(3.3, 2), layout="constrained")
    fig.add_subplot().plot([0, 1], [0, 1])
    save_figure(fig, stem)
    write_caption(f"{stem}.caption.rst", caption)


@pytest.fixture
def run(tmp_path):
    """A run folder with claims (figure and table), one experiment (a figure, a table) and timings."""
    r = tmp_path / "results" / "r"
    figure_file(r / "claims", "Every interval | the rules compared.")
    write_csv_markdown(pd.DataFrame({"id": ["power_law", "plateau", "long"],
                                     "rule": ["KL ∝ N^-alpha | R^2 >= 0.9", "x < y",
                                              "In a long cell " + "many words " * 20 + "the end of it."],
                                     "verdict": ["supported", "not posed", "unresolved"]}), r / "claims.csv",
                       r / "claims.md",
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
    # the claims: the claims table, then the forest plot with its caption; pipes and < intact
    claims = next(t for tag, a, t in els if tag == "section" and a["id"] == "claims")
    assert claims.index("power_law") < claims.index("Every interval | the rules compared.")
    cells = [t for tag, _, t in els if tag == "td"]
    assert "KL ∝ N^-alpha | R^2 >= 0.9" in cells and "x < y" in cells and "&lt;" in text
    assert [a.get("class") for tag, a, t in els if tag == "td" and t in ("supported", "not posed", "unresolved")] == [
        "verdict-supported", "verdict-not-posed", "verdict-unresolved"]
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
    width = int.from_bytes(png[16:20], "big")  # the PNG's width (IHDR), saved at 200 dpi: shown at 96 per inch
    assert next(a["width"] for tag, a, _ in els if tag == "img" and "Figure 2" in a["alt"]) == str(round(width * 0.48))
    assert "Loss against N_train. This run: alpha 0.42." in text  # the caption file, rst escapes undone
    # the table: the Markdown's cells and alignment, its caption above it, files linked beside the report
    acc = next(t for tag, a, t in els if tag == "figure" and a.get("id") == "s-acc")
    assert acc.index("Accuracy against Bayes, E[KL(p || q)].") < acc.index("91.23")
    assert "a|b" in cells and "2000" in cells and "95.00" in cells
    # a long cell opens on a click to its whole text; its first words show
    long = next(t for tag, _, t in els if tag == "details")
    assert long.startswith("In a long cell") and long.endswith("the end of it.")
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


# ----------------------------------------------------------------------------- in a real browser
REPO = Path(__file__).resolve().parents[1]
#: Headless Chromium as CI starts it: no sandbox (root in a container), no GPU, nothing fetched
#: in the background, a fresh profile per run.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars")
#: Test code run in the page after it loads (the report itself has no script): what the browser
#: made of it, written into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener('load', () => {
  for (const img of document.images) img.dataset.naturalWidth = img.naturalWidth;
  for (const fig of document.querySelectorAll('figure.figure')) {
    const a = fig.querySelector('img').getBoundingClientRect(), b = fig.querySelector('figcaption').getBoundingClientRect();
    fig.dataset.captionGap = Math.round(b.top - a.bottom);
    fig.dataset.captionOverlap = Math.round(Math.min(a.right, b.right) - Math.max(a.left, b.left));
  }
  for (const t of document.querySelectorAll('table'))
    t.dataset.shownRows = [...t.rows].filter(r => r.getBoundingClientRect().height > 0).length;
  const tops = [...document.querySelectorAll('section')].map(s => [s.getBoundingClientRect().top, s.id]);
  document.body.dataset.firstSection = tops.sort((x, y) => x[0] - y[0])[0][1];
  document.body.dataset.probe = 'done';
});
</script>"""


def chromium_binary() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def run_chromium(exe: str, url: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def smoke_results(gaussian_smoke) -> Path:
    """results/<run> of the session's Gaussian smoke run (tests/conftest.py)."""
    return gaussian_smoke


@pytest.mark.slow
def test_the_report_of_a_smoke_run_in_headless_chromium(smoke_results, tmp_path):
    """The smoke run's report.html as Chromium renders it: the claims section on top, every figure's
    PNG decoded with its caption right under it, every table shown row by row."""
    exe = chromium_binary()
    if exe is None:
        if os.environ.get("ORACLE_REQUIRE_CHROMIUM") == "1":
            pytest.fail("ORACLE_REQUIRE_CHROMIUM=1 but no chromium on the PATH (scripts/ci/install_chromium.sh)")
        pytest.skip("no chromium on the PATH (scripts/ci/install_chromium.sh installs it)")
    report = smoke_results / "report.html"
    text = report.read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = run_chromium(exe, probe.as_uri(), tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom")
    assert proc.returncode == 0 and "data-probe=\"done\"" in proc.stdout, proc.stderr[-3000:]
    els = parse(proc.stdout)
    body = next(a for tag, a, _ in els if tag == "body")
    assert body["data-first-section"] == "claims"
    figures = [(a, i) for i, (tag, a, _) in enumerate(els) if tag == "figure" and "figure" in a.get("class", "")]
    tables = [a for tag, a, _ in els if tag == "table" and "worlds" not in a.get("class", "")]
    assert any(tag == "table" and "worlds" in a.get("class", "") for tag, a, _ in els)  # the worlds, on top
    made = {p.with_suffix("") for p in smoke_results.rglob("*.png")}
    assert len(figures) == len(made) >= 9  # claims.png and every experiment figure, none left out
    for a, i in figures:
        img = next(el for el in els[i:] if el[0] == "img")
        assert int(img[1]["data-natural-width"]) > 300, a["id"]  # the PNG decoded
        assert 0 <= int(a["data-caption-gap"]) <= 40 and int(a["data-caption-overlap"]) > 100, a["id"]
    md_tables = [smoke_results / "claims.md", smoke_results / "timings.md", *smoke_results.rglob("tables/*.md")]
    assert len(tables) == len(md_tables)
    assert sorted(int(t["data-shown-rows"]) for t in tables) == sorted(
        len(read_markdown_table(p).rows) + 1 for p in md_tables)
    claims = read_markdown_table(smoke_results / "claims.md")
    cells = [t for tag, _, t in els if tag == "td"]
    assert all(row[0] in cells and row[1] in cells for row in claims.rows)  # id and verdict of every finding
    shot = tmp_path / "report.png"
    proc = run_chromium(exe, report.as_uri(), tmp_path / "profile2", "--window-size=1280,2400", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.stat().st_size > 50_000, proc.stderr[-2000:]
    if os.environ.get("ORACLE_REPORT_SCREENSHOT"):  # where a person looks at it
        shutil.copy(shot, os.environ["ORACLE_REPORT_SCREENSHOT"])


def test_the_first_screen_says_what_run_this_is_and_what_it_found(run):
    from oracle.report.claims_figure import VERDICT_COLORS
    from oracle.report.html_report import run_facts

    record = {"code": {"commit": "8aa4875c552d80fb9d47e5701274fcf95f7109e1", "dirty": False},
              "hostname": "vm", "device": "cpu: x86_64 x2", "created_utc": "2026-11-28T08:59:52Z",
              "params_sha256": "efff906a36b9127a318094b46d5ca77547d6a4053077f1d81067c4dc712837a0"}
    facts = run_facts(record, run / "claims.csv", 402.0)
    assert facts.verdicts["supported"] == 1 and facts.verdicts["not posed"] == 1 and facts.verdicts["contradicted"] == 0
    text = write_report(sections_of(run), run / "report.html", "Run r", "intro", facts=facts).read_text()
    els = parse(text)
    facts_text = " ".join(t for tag, _, t in els if tag in ("dt", "dd"))
    for shown in ("8aa4875c552d", "2026-11-28T08:59:52Z", "vm (cpu: x86_64 x2)", "sha256 efff906a36b9", "6m42s"):
        assert shown in facts_text, (shown, facts_text)
    badges = [t for tag, a, t in els if tag == "span" and "badge" in a.get("class", "")]
    assert "supported 1" in badges and "unresolved 1" in badges and "contradicted 0" in badges
    # the header, then the first table: commit and verdict counts come before it
    assert text.index("8aa4875c552d") < text.index("verdicts") < text.index("<table")
    # one colour per verdict, the claims figure's, in the page's style
    for verdict, color in VERDICT_COLORS.items():
        assert re.search(rf"\.verdict-{verdict.replace(' ', '-')} {{[^}}]*{color}", text), verdict
    with pytest.raises(DataError, match="lacks 'params_sha256'"):
        run_facts({k: v for k, v in record.items() if k != "params_sha256"}, run / "claims.csv", None)


def world_constants_file(path, bayes_error, floor, n=500, k=10):
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"all": {"aleatoric": {"mean": floor, "se": floor / 100},
                                        "bayes_error": {"mean": bayes_error, "se": 0.004},
                                        "bayes_accuracy": {"mean": 1 - bayes_error, "se": 0.004},
                                        "n": n, "num_classes": k}}))
    return str(path)


def test_after_the_header_the_worlds_then_the_claims_with_their_verdict_second(run):
    from oracle.report.html_report import world_rows

    worlds = world_rows([
        {"name": "base", "constants": world_constants_file(run / "samples/base/constants.json", 0.0123, 0.0456),
         "experiments": ["scaling (scaling)", "shift (shift)"]},
        {"name": "tau1.2", "constants": world_constants_file(run / "samples/tau1.2/constants.json", 0.25, 0.61),
         "experiments": ["shift (shift)"]}])
    text = write_report(sections_of(run), run / "report.html", "Run r", "intro", worlds=worlds).read_text()
    els = parse(text)
    tables = [(a, t) for tag, a, t in els if tag == "table"]
    assert tables[0][0].get("class") == "worlds"  # the first table of the page
    rows = [t for tag, _, t in els if tag == "tr"]
    assert "basescaling (scaling), shift (shift)1.23 ± 0.400.0456 ± 0.000510500" in rows
    assert "tau1.2shift (shift)25.00 ± 0.400.6100 ± 0.006110500" in rows
    # the claims table comes next, its verdict the second column though claims.md has it last
    claims = [i for i, (tag, a, _) in enumerate(els) if tag == "table"][1]
    header = [t for tag, _, t in els[claims:] if tag == "th"][:3]
    assert header == ["id", "verdict", "rule"], header
    first_row = next(i for i in range(claims, len(els)) if els[i][0] == "tr" and "power_law" in els[i][2])
    assert [t for tag, _, t in els[first_row + 1:first_row + 3]] == ["power_law", "supported"]
    assert read_markdown_table(run / "claims.md").header == ["id", "rule", "verdict"]  # the file is unchanged
    with pytest.raises(DataError, match=r"constants.json: no 'bayes_error'"):
        bad = run / "samples/bad/constants.json"
        bad.parent.mkdir(parents=True)
        bad.write_text('{"all": {"aleatoric": {"mean": 1, "se": 0}, "n": 5, "num_classes": 2}}')
        world_rows([{"name": "bad", "constants": str(bad), "experiments": []}])


#: The page's width as the browser laid it out: the document's scroll width, the window's, the
#: widest element's right edge and the right edge of the last verdict cell (not scrolled to).
WIDTH_PROBE = """<script>
window.addEventListener('load', () => {
  const b = document.body, right = el => Math.ceil(el.getBoundingClientRect().right);
  b.dataset.scrollWidth = document.documentElement.scrollWidth;
  b.dataset.innerWidth = window.innerWidth;
  b.dataset.widest = Math.max(...[...document.querySelectorAll('body *')]
    .filter(el => !el.closest('.table-wrap') || el.classList.contains('table-wrap')).map(right));
  b.dataset.verdictRight = Math.max(...[...document.querySelectorAll('td[class^=verdict]')].map(right));
  b.dataset.worldsRight = right(document.querySelector('table.worlds'));
  b.dataset.probe = 'done';
});
</script>"""


@pytest.mark.parametrize("width,height", [(1280, 800), (800, 1400)])
def test_nothing_of_the_first_screen_is_clipped_at_1280_or_800_px(run, tmp_path, width, height):
    """The report at 1280 and 800 px wide in headless Chromium: no horizontal scroll of the page,
    no element past the window, and the verdicts and the world table in view without scrolling
    a table sideways (a claims table as long as a real run's)."""
    from oracle.report.html_report import RunFacts, world_rows

    exe = chromium_binary()
    if exe is None:
        if os.environ.get("ORACLE_REQUIRE_CHROMIUM") == "1":
            pytest.fail("ORACLE_REQUIRE_CHROMIUM=1 but no chromium on the PATH (scripts/ci/install_chromium.sh)")
        pytest.skip("no chromium on the PATH (scripts/ci/install_chromium.sh installs it)")
    # a claims table with the columns and cell lengths of a real run's claims.md
    words = "the 95% CI (value ± t SE: over seeds, and over the shared test rows) of alpha lies above 0 " * 4
    write_csv_markdown(pd.DataFrame({
        "id": ["power_law", "archs_differ_at_the_largest_training_size"],
        "finding": ["epistemic error follows a power law KL ∝ N^-alpha (a nearly perfect straight line)"] * 2,
        "paper": ["KL ∝ N^-alpha, alpha > 0 for every architecture (Figure 2b)"] * 2,
        "this run": ["epistemic KL at the largest N (nats): test_resnet 0.2294, test_vit 0.2567"] * 2,
        "uncertainty": ["Bonferroni 95% (m=1) CI [-0.06979, 0.01503]"] * 2, "rule": [words] * 2,
        "verdict": ["supported", "not posed"],
        "numbers": ["scaling.epistemic_max_n.test_resnet scaling.epistemic_max_n.test_vit"] * 2}),
        run / "claims.csv", run / "claims.md", "The paper's findings")
    worlds = world_rows([{"name": f"world_with_a_long_name_{i}", "experiments": [
        "scaling-floor (scaling)", "shift (shift)", "calibration (calibration)", "labels (labels)"],
        "constants": world_constants_file(run / f"samples/w{i}/constants.json", 0.0123, 0.0456)} for i in range(2)])
    facts = RunFacts("8aa4875c552d80fb9d47e5701274fcf95f7109e1", True, "2026-11-28T08:59:52Z",
                     "a-rather-long-hostname.cluster.example.org (cuda: NVIDIA H200 x1)", "e" * 64, 402.0,
                     {"supported": 1, "contradicted": 0, "unresolved": 0, "not posed": 1})
    text = write_report(sections_of(run), run / "report.html", "Run r: " + "a long title " * 8, "intro",
                        facts=facts, worlds=worlds).read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", WIDTH_PROBE + "</body>"), encoding="utf-8")
    proc = run_chromium(exe, probe.as_uri(), tmp_path / "profile", f"--window-size={width},{height}",
                        "--virtual-time-budget=5000", "--dump-dom")
    assert proc.returncode == 0 and "data-probe=\"done\"" in proc.stdout, proc.stderr[-3000:]
    body = next(a for tag, a, _ in parse(proc.stdout) if tag == "body")
    inner = int(body["data-inner-width"])
    assert inner == width
    assert int(body["data-scroll-width"]) <= inner, body
    assert int(body["data-widest"]) <= inner, body
    assert int(body["data-verdict-right"]) <= inner, body  # every verdict in view, no sideways scroll
    assert int(body["data-worlds-right"]) <= inner, body


def test_one_verdict_count_in_the_report_claims_md_the_caption_and_the_summary(tmp_path):
    """Issue 48: the report's badges, the end-of-run summary, claims.md and the forest plot's
    caption give the same count (the counted rows; the uncounted checks named beside it), and
    the report opens with one sentence per claim."""
    import re as re_

    from oracle.report.claims_doc import claims_markdown, claims_rows
    from oracle.report.claims_figure import claims_caption
    from oracle.report.html_report import run_facts
    from oracle.report.summary import claims_line
    from oracle.report.verdicts import counts_text
    from tests.test_claims import EXPERIMENTS, base_numbers, mc

    run = tmp_path / "results" / "r"
    run.mkdir(parents=True)
    rows = claims_rows({**base_numbers(), "scaling.label_check": mc(0.05, 0.003)}, EXPERIMENTS)
    pd.DataFrame(rows).to_csv(run / "claims.csv", index=False)
    (run / "claims.md").write_text(claims_markdown(rows, "Claims"))
    frame = pd.read_csv(run / "claims.csv", keep_default_na=False)
    record = {"code": {"commit": "8aa4875c552d", "dirty": False}, "hostname": "vm", "created_utc": "t",
              "params_sha256": "e" * 64}
    facts = run_facts(record, run / "claims.csv", 1.0)
    text = counts_text(rows)  # "supported 10, contradicted 0, ... (not counted: floor_exact, shift_exact)"
    counts = {v: int(n) for v, n in re_.findall(r"([a-z ]+?) (\d+)", text.split(" (not counted")[0].replace(",", ""))}
    assert dict(facts.verdicts) == {v.strip(): n for v, n in counts.items()}
    assert sum(facts.verdicts.values()) == len(rows) - 2 and facts.uncounted == ("floor_exact", "shift_exact")
    assert claims_line(run / "claims.csv") == text
    assert text in (run / "claims.md").read_text().replace("\n", " ")
    assert f"{sum(facts.verdicts.values())} findings counted" in claims_caption(frame)
    page = write_report([], run / "report.html", "Run r", facts=facts).read_text()
    assert f"The paper's {len(rows) - 2} findings counted on this run" in page
    assert "Shown, not counted: floor_exact, shift_exact." in page
    findings = [t for tag, _, t in parse(page) if tag == "li"]
    assert len(findings) == len(rows) and findings[0].startswith("power_law: supported: ")
    assert any(f.startswith("floor_exact: contradicted (a check, not counted)") for f in findings)


def test_the_report_shows_claims_md_short_table_then_each_claim(run):
    """claims.md's short table is the report's claims table (verdict second, coloured by the
    verdict without its marks), and each claim's section below it renders as headings and lists,
    its Markdown escapes resolved."""
    from oracle.report.claims_doc import claims_markdown, claims_rows
    from tests.test_claims import EXPERIMENTS, base_numbers, seeds

    rows = claims_rows({**base_numbers(), "labels.true_ece_soft_max_n": seeds(0.0252, 0.001)}, EXPERIMENTS)
    rows[0]["rule"] = "a * b <arch> _CI_"
    (run / "claims.md").write_text(claims_markdown(rows, "Claims"))
    text = write_report(sections_of(run), run / "report.html", "Run r").read_text()
    els = parse(text)
    claims = [i for i, (tag, a, _) in enumerate(els) if tag == "table"][0]
    assert [t for tag, _, t in els[claims:] if tag == "th"][:6] == [
        "id", "verdict", "this run", "the paper", "paper's verdict", "margin (SE)"]
    assert 'class="verdict-supported">supported (close)</td>' in text
    heads = [t for tag, _, t in els if tag in ("h4", "h5")]
    assert "Each claim" in heads and "power_law: supported" in heads and len(heads) == len(rows) + 1
    items = [t for tag, _, t in els if tag == "li"]
    assert "rule: a * b <arch> _CI_" in items and not any("\\" in t for t in items)
