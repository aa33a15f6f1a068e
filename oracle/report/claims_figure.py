"""The claims as a picture: a forest plot of every interval the claims' rules compared
(claims.csv's ``checks``, `oracle.report.claims.Check`), so a reader sees at a glance what a
run supports.

One row per check: this run's estimate (dot) and 95% interval (bar), the reference the rule
compares it with (dashed), the paper's value where it gives one (open diamond), coloured by the
finding's verdict. The checks of one finding have different units (an exponent, percentage
points, a ratio), so each row has its own x axis. A finding without checks (not posed, not run,
or unresolved for a missing number) gets one row that says why.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from oracle.errors import DataError
from oracle.report.verdicts import counts_text, verdict_counts
from oracle.report.figures import print_widths, save_figure, style

#: Inches between the canvas' top edge and the title's first line.
TITLE_PAD_IN = 0.06

#: Inches the right margin keeps at least for the verdict, the longest "contradicted" (bold, 0.8 in).
VERDICT_MARGIN_IN = 1.0

#: Colour per verdict (colourblind-safe: blue, vermilion, grey, sky, black outline).
VERDICT_COLORS = {"supported": "#0072B2", "contradicted": "#D55E00", "unresolved": "#7f7f7f",
                  "not posed": "#56B4E9", "not run": "#bbbbbb"}


def forest_rows(claims: pd.DataFrame) -> list[dict]:
    """The plot's rows from a claims.csv frame: per check ``{"id", "verdict", "label", "value",
    "lo", "hi", "reference", "paper"}``; a finding without checks gives one row with ``label``
    its reason (its "this run" text) and no value. DataError when a column is missing or a
    ``checks`` cell is not JSON."""
    missing = {"id", "verdict", "this run", "checks"} - set(claims.columns)
    if missing:
        raise DataError(f"claims.csv: columns {sorted(missing)} missing (rerun the claims rule)")
    rows = []
    for r in claims.to_dict("records"):
        try:
            checks = json.loads(r["checks"] or "[]")
        except json.JSONDecodeError as exc:
            raise DataError(f"claims.csv: finding {r['id']!r}: checks are not JSON ({exc})") from None
        if not checks:
            rows.append({"id": r["id"], "verdict": r["verdict"], "label": str(r["this run"]), "value": None})
        for c in checks:
            rows.append({"id": r["id"], "verdict": r["verdict"], **c})
    return rows


def _limits(row: dict) -> tuple[float, float]:
    points = [v for k in ("value", "lo", "hi", "reference", "paper") if (v := row.get(k)) is not None
              and math.isfinite(v)]
    lo, hi = min(points), max(points)
    # wide enough that a marker at an end (the paper's diamond, most often) is drawn whole
    pad = 0.15 * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.15
    return lo - pad, hi + pad


def claims_forest(claims: pd.DataFrame, stem: str | os.PathLike) -> dict[str, Path]:
    """Draw `forest_rows` of a claims.csv frame to ``<stem>.pdf`` and ``.png``."""
    rows = forest_rows(claims)
    if not rows:
        raise DataError("claims.csv holds no finding")
    width = print_widths().page_in
    # the margins are fractions of the width: the title's 88 and a label's 44 characters a line fill
    # theirs at 6.8 in, and a narrower venue's figure (ICLR: 5.5 in) takes as many fewer
    title_chars, label_chars = int(88 * width / 6.8), int(44 * width / 6.8)
    # the counts name the uncounted rows too: wrapped to the canvas, the top margin one line each
    title = textwrap.wrap("The paper's findings against this run: " + counts_text(claims.to_dict("records")) + "; "
                          "dot and bar: this run's estimate and 95% interval; dashed: the rule's reference; "
                          "diamond: the paper's value", title_chars)
    with style():
        height = 0.45 * len(rows) + 0.3 + 0.25 * len(title)
        fig = Figure(figsize=(width, height))
        axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
        previous = None
        for ax, row in zip(axes, rows):
            color = VERDICT_COLORS.get(row["verdict"], "k")
            first = row["id"] != previous
            previous = row["id"]
            ax.set_yticks([])
            for side in ("left", "right", "top"):
                ax.spines[side].set_visible(False)
            name = f"{row['id']}: " if first else ""
            # two lines that fit the left margin: the label's start and end both show
            label = textwrap.fill(textwrap.shorten(f"{name}{row['label']}", 2 * label_chars, placeholder="..."),
                                  label_chars)
            ax.set_ylabel(label, rotation=0, ha="right", va="center", labelpad=4)
            ax.text(1.02, 0.5, row["verdict"] if first else "", transform=ax.transAxes, color=color,
                    va="center", fontweight="bold")
            if row.get("value") is None:
                ax.set_xticks([])
                ax.spines["bottom"].set_visible(False)
                continue
            lo, hi = row.get("lo"), row.get("hi")
            if lo is not None and hi is not None:
                ax.plot([lo, hi], [0, 0], color=color, lw=2.2, solid_capstyle="butt")
            ax.plot([row["value"]], [0], "o", color=color, ms=5)
            ax.axvline(row["reference"], color="k", ls="--", lw=0.8)
            if row.get("paper") is not None:
                ax.plot([row["paper"]], [0], "D", mfc="none", mec="k", ms=5)
            ax.set_xlim(*_limits(row))
            ax.xaxis.set_major_locator(MaxNLocator(5))  # 8 pt labels of 7 ticks ran into each other
            ax.tick_params(axis="x", pad=1, length=2)
            ax.set_ylim(-0.6, 0.6)
        # a fixed 0.06 in below the top edge, the title's lines (9 pt, 0.17 in each) fit the 0.25 in a line of
        # the top margin at any height; suptitle's default y = 0.98 of the height sat 0.27 in down on a forest
        # of 29 rows (afhq256's, 13.65 in) and ran its three lines into the first row's label
        fig.suptitle("\n".join(title), y=1 - TITLE_PAD_IN / height, va="top")
        # fixed margins: the labels are wrapped to a known width (left), the verdicts are one word, given
        # at least VERDICT_MARGIN_IN however narrow the venue (a fraction 0.16 of 3.3 in cut "contradicted")
        fig.subplots_adjust(left=0.43, right=min(0.84, 1 - VERDICT_MARGIN_IN / width), top=1 - 0.25 * len(title) / height, bottom=0.3 / height, hspace=0.9)
        return save_figure(fig, stem)


def claims_caption(claims: pd.DataFrame) -> str:
    """The figure's caption, from the run's verdicts: what is drawn and how many findings each
    verdict got."""
    records = claims.to_dict("records")
    counts = verdict_counts(records)
    return (f"Every interval the claims' rules compared, one row each, grouped by finding: this run's estimate "
            f"(dot) and 95% interval (bar), the value the rule compares it with (dashed), the paper's value where "
            f"it gives one (open diamond); each row on its own axis, in the check's units. Colour and the right "
            f"margin: the finding's verdict. This run: {sum(counts.values())} findings counted; verdicts: "
            f"{counts_text(records)}. The rule of each row is in claims.md.")
