"""The verdicts of the claims table and how they are counted: `VERDICTS` in their order, which
rows count (`counted`: a row marked ``counted`` other than "yes" is a check shown beside the
findings, e.g. a check of the world, not a finding), and the counts as tables, captions and the
end-of-run summary show them. Rows are claims.csv rows (`oracle.report.claims.claims`)."""

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
