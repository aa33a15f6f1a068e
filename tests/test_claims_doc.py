"""claims.csv's margin and paper verdict, and claims.md as a reader sees it (oracle.report.claims_doc,
the margins of oracle.report.verdicts)."""

from __future__ import annotations

import json

import pytest

from oracle.report import claims as cl
from oracle.report import claims_doc as cd
from oracle.report import verdicts as vd
from oracle.report.paper_numbers import paper_verdicts
from oracle.report.tables import read_markdown_table
from tests.test_claims import EXPERIMENTS, base_numbers, seeds


def by_id(rows):
    return {r["id"]: r for r in rows}


def test_a_checks_margin_is_its_nearer_ends_distance_in_its_own_ses():
    # [2, 4] against 1, SE 0.5: 2 SE clear of it; against 2.5: it holds it, 1 SE from clearing
    assert vd.check_margin({"lo": 2.0, "hi": 4.0, "se": 0.5, "reference": 1.0}) == pytest.approx(2.0)
    assert vd.check_margin({"lo": 2.0, "hi": 4.0, "se": 0.5, "reference": 5.0}) == pytest.approx(2.0)
    assert vd.check_margin({"lo": 2.0, "hi": 4.0, "se": 0.5, "reference": 2.5}) == pytest.approx(-1.0)
    # the same interval from another SE (e.g. a t quantile of fewer degrees of freedom) has another margin
    assert vd.check_margin({"lo": 2.0, "hi": 4.0, "se": 0.25, "reference": 1.0}) == pytest.approx(4.0)
    for missing in ({"lo": None}, {"se": None}, {"se": 0.0}):
        assert vd.check_margin({"lo": 2.0, "hi": 4.0, "se": 0.5, "reference": 1.0, **missing}) is None
    assert not vd.close(None) and vd.close(0.99) and not vd.close(1.0)


def test_moving_a_value_by_its_margin_flips_the_verdict_and_less_does_not():
    """The margin is the distance to the flip: shift_type's interval (one check) moved toward its
    reference by just over its margin is unresolved, by just under it still supported."""
    n = base_numbers()
    row = by_id(cd.claims_rows(n, EXPERIMENTS))["shift_type"]
    assert row["verdict"] == "supported"
    se = n["shift.noise_vs_imbalance"]["se"]
    margin = row[cd.MARGIN]
    assert margin == pytest.approx(vd.row_margin(row)[0]) and margin > 1
    for step, verdict in ((margin - 0.05, "supported"), (margin + 0.05, "unresolved")):
        moved = {**n, "shift.noise_vs_imbalance": {**n["shift.noise_vs_imbalance"],
                                                   "value": n["shift.noise_vs_imbalance"]["value"] - step * se}}
        assert by_id(cl.claims(moved, EXPERIMENTS))["shift_type"]["verdict"] == verdict, step


def test_every_row_carries_its_margin_and_the_papers_verdict():
    rows = cd.claims_rows(base_numbers(), EXPERIMENTS)
    paper = paper_verdicts()
    for r in rows:
        assert r[cd.PAPER_VERDICT] == paper[r["id"]]
        checks = json.loads(r["checks"])
        if any(c.get("se") for c in checks):
            assert r[cd.MARGIN] >= 0, r["id"]
        else:
            assert r[cd.MARGIN] is None, r["id"]
    # a not posed row has no interval, so no margin
    n = {**base_numbers(), "scaling.n_sizes": {"value": 2}}
    assert by_id(cd.claims_rows(n, EXPERIMENTS))["power_law"][cd.MARGIN] is None


def near_miss_numbers() -> dict:
    """base_numbers with soft_calibration's true ECE half an SE below its 0.03 threshold (a close call: t(0.975, 2) = 4.30)."""
    return {**base_numbers(), "labels.true_ece_soft_max_n": seeds(0.0252, 0.001)}


def test_a_verdict_within_one_se_of_flipping_is_marked_close(tmp_path):
    rows = cd.claims_rows(near_miss_numbers(), EXPERIMENTS)
    soft = by_id(rows)["soft_calibration"]
    assert soft["verdict"] == "supported" and vd.close(soft[cd.MARGIN])
    table = [ln for ln in cd.short_table(rows) if ln.startswith("| soft_calibration ")]
    assert "supported (close)" in table[0]
    assert "(close)" not in [ln for ln in cd.short_table(rows) if ln.startswith("| power_law ")][0]


def test_claims_md_reads_at_100_columns_with_a_short_table_first(tmp_path):
    rows = cd.claims_rows(near_miss_numbers(), EXPERIMENTS)
    text = cd.claims_markdown(rows, "The paper's findings against this run")
    lines = text.splitlines()
    path = tmp_path / "claims.md"
    path.write_text(text)
    table = read_markdown_table(path)
    assert table.header == ["id", "verdict", "this run", "the paper", "paper's verdict", "margin (SE)"]
    assert [r[0] for r in table.rows] == [f.id for f in cl.FINDINGS]
    assert [r[1].split(" (")[0] for r in table.rows] == [r["verdict"] for r in rows]
    table_lines = [ln for ln in lines if ln.startswith("|")]
    assert len(table_lines) == len(rows) + 2 and max(map(len, table_lines)) < cd.MAX_ROW
    assert max(len(ln) for ln in lines if not ln.startswith("|")) <= cd.WIDTH
    # the table comes before any claim's section; every claim has its heading, rule and numbers below
    assert lines.index(table_lines[0]) < lines.index("## Each claim")
    for r in rows:
        head = lines.index(f"### `{r['id']}`: {r['verdict']}")
        section = "\n".join(lines[head:head + 60])
        assert "- rule: " in section and "- the paper: " in section
    assert f"Verdicts: {vd.counts_text(rows)}".split(" (not counted")[0] in text.replace("\n", " ")


def test_claims_md_text_renders_as_written():
    """No emphasis, HTML tag, or list started by a wrapped line: a rule's text reads as in the CSV."""
    row = {**cd.claims_rows(base_numbers(), EXPERIMENTS)[0],
           "rule": "a * b and <arch> with _CI_ " + "word " * 17 + "- a dash that wraps to the start of a line",
           "this run": "x"}
    out = cd.claim_section(row)
    rule = [ln for ln in out if ln.startswith("- rule:")][0]
    assert "a \\* b and \\<arch> with \\_CI\\_" in rule
    continued = out[out.index(rule) + 1:]
    assert continued and all(not ln.lstrip().startswith(("- ", "* ", "+ ")) for ln in continued if ln.startswith(" "))


def test_one_sentence_per_claim_says_what_this_run_found():
    rows = cd.claims_rows(near_miss_numbers(), EXPERIMENTS)
    sentences = cd.claim_sentences(rows)
    assert len(sentences) == len(rows)
    soft = next(s for s in sentences if s.startswith("soft_calibration: supported:"))
    assert "true ECE, soft labels is 0.0252" in soft and "SE from flipping (close)" in soft
    assert soft.endswith(f"the rule on the paper's printed numbers: {paper_verdicts()['soft_calibration']}.")
    floor = next(s for s in sentences if s.startswith("floor_exact"))
    assert "(a check, not counted)" in floor
    n = {**base_numbers(), "scaling.n_sizes": {"value": 2}}
    power = cd.claim_sentences(cd.claims_rows(n, EXPERIMENTS))[0]
    assert power.startswith("power_law: not posed: scaling: 2 sizes N")


def test_a_rows_to_decide_shows_under_its_claim_and_in_an_unresolved_rows_sentence():
    """The power analysis's column ("to decide", where the rows carry it) is shown, not computed here."""
    rows = cd.claims_rows({**base_numbers(), "labels.true_ece_soft_max_n": seeds(0.029, 0.001)}, EXPERIMENTS)
    soft = by_id(rows)["soft_calibration"]
    assert soft["verdict"] == "unresolved"
    soft[cd.TO_DECIDE] = "about 3 seeds"
    assert "- to decide: about 3 seeds" in cd.claim_section(soft)
    assert cd.claim_sentences([soft])[0].endswith("; to decide: about 3 seeds.")
    assert "to decide" not in " ".join(cd.claim_sentences([by_id(rows)["power_law"]]))
