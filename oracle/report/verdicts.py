"""The verdicts of the claims table and how they are counted: `VERDICTS` in their order, which
rows count (`counted`: a row marked ``counted`` other than "yes" is a check shown beside the
findings, e.g. a check of the world, not a finding), and the counts as tables, captions and the
end-of-run summary show them, and how far each verdict lies from flipping (`row_margin`, in its
interval's own SEs). Rows are claims.csv rows (`oracle.report.claims.claims`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Every verdict a claims rule gives, in the order counts show them.
VERDICTS = ("supported", "contradicted", "unresolved", "not posed", "not run")


def sided(side: int, paper_side: int) -> str:
    """The verdict of one interval's side of its reference (`Estimate.side`: +1 above, -1 below,
    0 across): supported on the paper's side, contradicted on the other, unresolved across."""
    return "unresolved" if side == 0 else "supported" if side == paper_side else "contradicted"


def combine(parts: list[str]) -> str:
    """The verdict of a claim of several parts: every part supported: supported; any
    contradicted: contradicted; else unresolved."""
    if "contradicted" in parts:
        return "contradicted"
    return "supported" if parts and all(p == "supported" for p in parts) else "unresolved"


def counted(row: Mapping) -> bool:
    """Whether a claims row's verdict enters the counts (rows from before the ``counted``
    column all do)."""
    return str(row.get("counted", "yes") or "yes") == "yes"


def verdict_cell(row: Mapping) -> str:
    """The verdict as tables show it: an uncounted row's marked so."""
    return row["verdict"] if counted(row) else f"{row['verdict']} (not counted)"


def verdict_counts(rows: Iterable[Mapping]) -> dict[str, int]:
    """How many counted rows got each verdict of `VERDICTS` (a row whose ``counted`` is not
    "yes" is shown, not counted; rows without the column, from before it, all count)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for r in rows:
        if counted(r) and r["verdict"] in counts:
            counts[r["verdict"]] += 1
    return counts


def counts_text(rows: Iterable[Mapping]) -> str:
    """"supported 3, contradicted 1, ..." over the counted rows, with the uncounted ones named."""
    rows = list(rows)
    left = [r["id"] for r in rows if not counted(r)]
    return (", ".join(f"{v} {c}" for v, c in verdict_counts(rows).items())
            + (f" (not counted: {', '.join(left)})" if left else ""))


#: A verdict is marked close when its margin is under this many of its interval's own SEs.
CLOSE_SE = 1.0


def check_margin(check: Mapping) -> float | None:
    """How far one compared interval (a claims row's check record: ``lo``, ``hi``, ``se``,
    ``reference``; `oracle.report.intervals.Check.record`) lies from its reference, in its own
    SEs: positive when the interval excludes the reference (the distance of its nearer end, how
    far it could move and still decide), negative when it contains it (how far the nearer end
    must move to decide). None without an SE or without both ends. The SE is taken as given,
    however it was computed (over seeds, rows, both, or a printed precision)."""
    lo, hi, se, ref = (check.get(k) for k in ("lo", "hi", "se", "reference"))
    if lo is None or hi is None or ref is None or not se or se <= 0:
        return None
    if lo > ref:
        return (lo - ref) / se
    if hi < ref:
        return (ref - hi) / se
    return -min(ref - lo, hi - ref) / se


def row_margin(row: Mapping) -> tuple[float | None, str]:
    """(margin, the check's label) of a claims row: how many SEs the end of its interval nearest
    its reference lies from it (|`check_margin`| of its nearest check), the distance an interval
    moves before it changes sides and the verdict with it; (None, "") for a row without a check
    that has an SE (not posed, not run, a missing number). Conservative where a row's verdict
    survives one check changing sides (a contradicted row with two contradicting checks, a
    majority over sizes)."""
    import json

    checks = row.get("checks") or "[]"
    records = json.loads(checks) if isinstance(checks, str) else list(checks)
    margins = [(m, str(c.get("label", ""))) for c in records if (m := check_margin(c)) is not None]
    if row.get("verdict") not in ("supported", "contradicted", "unresolved") or not margins:
        return None, ""
    m, label = min(margins, key=lambda t: abs(t[0]))
    return abs(m), label


def close(margin: float | None) -> bool:
    """Whether a margin (`row_margin`) lies within `CLOSE_SE` of flipping its verdict."""
    return margin is not None and abs(margin) < CLOSE_SE
