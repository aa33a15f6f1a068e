"""Captions: a fixed description of what an artifact shows, and a finding computed from its data.

An `oracle.report.paper.Artifact`'s ``caption`` describes the panels, columns and units and
claims nothing. What the run found is a sentence (or a few) computed from the same data the
artifact is drawn from, by its kind's ``findings(name, data, spec)``
(``oracle/experiments/<kind>/findings.py``) or `oracle.validation.findings`; where the paper
states a result, the paper's value stands beside this run's (`paper_says`), never instead of
it. The table and figure jobs join the two (`full_caption`): tables in their Markdown caption
(in LaTeX the caption is the description and the finding a note under the tabular,
`oracle.report.tables.write_table`), and every artifact in ``<stem>.caption.rst``, which the report's caption template
(report/artifact.rst) includes.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from pathlib import Path

from oracle.io.atomic import atomic_output

#: The caption file beside each artifact: ``<stem>.caption.rst``.
CAPTION_SUFFIX = "caption.rst"


def full_caption(description: str, finding: str) -> str:
    """The description, then the finding (either may be empty), as one caption."""
    return " ".join(part.strip() for part in (description, finding) if part and part.strip())


def rst_escape(text: str) -> str:
    """`text` as reStructuredText that renders as the same plain text: backslash before every
    character that would start markup (``* ` _ | \\``), so ``E[KL(p || q)]`` and ``test_resnet``
    stay text."""
    return re.sub(r"([\\*`_|])", r"\\\1", text)


def rst_unescape(text: str) -> str:
    """The plain text of `rst_escape`'s output (its inverse)."""
    return re.sub(r"\\([\\*`_|])", r"\1", text)


def read_caption(path: str | os.PathLike) -> str:
    """The caption of a caption file (`write_caption`) as plain text. DataError naming the
    file when it cannot be read."""
    from oracle.errors import DataError

    try:
        return rst_unescape(Path(path).read_text(encoding="utf-8").strip())
    except OSError as exc:
        raise DataError(f"cannot read caption file {path}: {exc}") from None


#: Layout problems of the figures this process wrote though they do not print cleanly
#: (`oracle.report.figures.save_figure` outside the tests), by figure stem (resolved path).
_LAYOUT_PROBLEMS: dict[str, list[str]] = {}


def note_layout_problems(stem: str | os.PathLike, problems: Iterable[str]) -> None:
    """Remember that the figure `stem` was written with `problems`: its caption file, written
    by this process (`write_caption`), says so."""
    _LAYOUT_PROBLEMS[str(Path(stem).resolve())] = list(problems)


def layout_warning(caption_path: str | os.PathLike) -> str:
    """"Layout warning: ..." for the figure whose caption file is `caption_path` when it was
    written with problems (`note_layout_problems`), else ""."""
    path = Path(caption_path)
    suffix = f".{CAPTION_SUFFIX}"
    if not path.name.endswith(suffix):
        return ""
    problems = _LAYOUT_PROBLEMS.get(str(path.with_name(path.name[:-len(suffix)]).resolve()))
    return f"Layout warning: this figure does not print cleanly ({'; '.join(problems)})." if problems else ""


def write_caption(path: str | os.PathLike, caption: str) -> None:
    """The caption file of an artifact (atomic): `caption` as one reStructuredText paragraph,
    and a figure's layout warning (`layout_warning`) after it."""
    caption = full_caption(caption, layout_warning(path))
    with atomic_output(path) as tmp:
        tmp.write_text(rst_escape(" ".join(caption.split())) + "\n", encoding="utf-8")


def paper_says(finding_id: str) -> str:
    """What the paper reports for finding `finding_id` of `oracle.report.claims.FINDINGS`
    (the one place the paper's values are written down)."""
    from oracle.report.claims import FINDINGS

    for f in FINDINGS:
        if f.id == finding_id:
            return f.paper
    raise KeyError(f"no paper finding {finding_id!r}")


def num(value: float, digits: int = 3) -> str:
    """A number as text with `digits` significant digits; "n/a" for None or NaN."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value + 0.0:.{digits}g}"  # + 0.0: a difference of equal values is 0, not "-0"


def span(values: Iterable[float], digits: int = 3, unit: str = "") -> str:
    """"a" or "a to b" (smallest to largest) of the finite `values`, followed by `unit` ("%"
    without a space); "n/a" when none."""
    v = sorted(x for x in values if x is not None and math.isfinite(x))
    if not v:
        return "n/a"
    lo, hi = num(v[0], digits), num(v[-1], digits)
    text = lo if lo == hi else f"{lo} to {hi}"
    return text + unit if unit == "%" else f"{text} {unit}".rstrip()


def count_of(hits: int, total: int, what: str) -> str:
    """"k of n <what>"."""
    return f"{hits} of {total} {what}"


def convergence_finding(runs: "pd.DataFrame", who: tuple[str, ...] = ("arch", "N", "seed")) -> str:  # noqa: F821
    """How many of the classifiers behind `runs` (one row per classifier and evaluation set,
    with the `oracle.classifiers.evaluate.CONVERGENCE_COLUMNS`) converged by the stopping rule,
    how many the rule stopped, and which did not converge (by `who`); "" without the columns
    (results of a run before the rule was recorded)."""
    if "converged" not in runs or runs["converged"].isna().all():
        return ""
    one = runs.drop_duplicates(subset=[c for c in ("experiment", *who) if c in runs])
    done = one["converged"].astype(bool)
    stopped = int((one["stopped_by"] == "patience").sum())
    text = (f"Converged by the stopping rule with annealed kept weights: "
            f"{count_of(int(done.sum()), len(one), 'classifiers')} "
            f"({stopped} stopped by it, {int(done.sum()) - stopped} at the end of their budget with the monitored loss "
            f"no longer falling)")
    if not done.all():
        late = one[~done]
        names = ", ".join(" ".join(f"{c}={r[c]}" for c in who if c in late) for _, r in late.head(5).iterrows())
        text += f"; not converged: {names}{' ...' if len(late) > 5 else ''}"
    return text + "."


def error_bar_note(runs: "pd.DataFrame", panels: str = "", over: tuple[str, ...] = ("seed",),  # noqa: F821
                   what: str = "mean ± std") -> str:
    """What a figure's error bars are, counted from the data drawn: "Error bars[ in <panels>]:
    mean ± std over S seeds." (`over` = ("seed",)), or "... over R runs (2 arch x 3 seed)."
    when the spread pools several columns of `runs` (`what`: "mean ± SE" where the bars are
    standard errors); with one run: "One seed: no error bars.". A reader cannot tell a std
    over 2 seeds from one over 20 by the bar."""
    counts = {c: int(runs[c].nunique()) for c in over if c in runs}
    where = f" in {panels}" if panels else ""
    total = 1
    for n in counts.values():
        total *= n
    if total <= 1:
        return f"One {over[0]}: no error bars{where}."
    if len(counts) == 1:
        (col, n), = counts.items()
        return f"Error bars{where}: {what} over {n} {col}s."
    parts = " x ".join(f"{n} {c}" for c, n in counts.items())
    return f"Error bars{where}: {what} over {total} runs ({parts})."
