"""Artifacts named by content, and the paper's numbering of them.

Tables and figures are named by what they show (``scaling/<experiment>/figures/
scaling_panels``). The paper's numbering is one mapping, the config's ``paper:`` section
({paper id: "<experiment or validation>/<artifact>"}), used by the named targets
(``snakemake fig2``), the report captions and numbers.tex; nothing else spells a paper id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from oracle.report.captions import CAPTION_SUFFIX

# the caption file last: the table and figure jobs write it as their last output; a table's files
# between are those of oracle.report.tables.TABLE_FILES (the column variant and the note)
TABLE_SUFFIXES = ("csv", "md", "tex", "column.tex", "note.tex", CAPTION_SUFFIX)
FIGURE_SUFFIXES = ("pdf", "png", CAPTION_SUFFIX)


@dataclass(frozen=True)
class Artifact:
    """A table or figure an experiment kind (or the validation stage) makes.

    name:    the file stem, named by content (``epistemic_vs_n``)
    type:    "table" (CSV + Markdown + LaTeX) or "figure" (PDF + PNG), each with its caption
             file (``<name>.caption.rst``)
    caption: what it shows, with units, and no finding: the run's finding is computed from
             its data and follows it (`oracle.report.captions`)
    """

    name: str
    type: str
    caption: str

    def __post_init__(self) -> None:
        if self.type not in ("table", "figure"):
            raise ValueError(f"Artifact {self.name!r}: type must be table or figure, got {self.type!r}")
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            raise ValueError(f"Artifact name {self.name!r}: lower-case letters, digits and _ only")

    @property
    def folder(self) -> str:
        """``tables`` or ``figures``."""
        return f"{self.type}s"

    @property
    def suffixes(self) -> tuple[str, ...]:
        return TABLE_SUFFIXES if self.type == "table" else FIGURE_SUFFIXES


def artifacts_by_name(*artifacts: Artifact) -> dict[str, Artifact]:
    """{name: artifact}; the ARTIFACTS mapping of a kind module."""
    return {a.name: a for a in artifacts}


def paper_ids(paper: Mapping[str, str] | None, owner: str, artifact: str) -> list[str]:
    """The paper ids (``fig2``, ``table1``) mapped to ``<owner>/<artifact>``, sorted."""
    return sorted(pid for pid, target in (paper or {}).items() if target == f"{owner}/{artifact}")


def paper_label(pid: str) -> str:
    """``fig2`` -> "Figure 2", ``table1`` -> "Table 1"."""
    m = re.fullmatch(r"(table|fig)(\d+)", pid)
    if not m:
        raise ValueError(f"paper id {pid!r}: expected table<N> or fig<N>")
    return f"{'Table' if m.group(1) == 'table' else 'Figure'} {m.group(2)}"


def caption_with_paper_ids(caption: str, ids: list[str]) -> str:
    """The caption, followed by "(paper Figure 2)" when the artifact has paper ids."""
    if not ids:
        return caption
    return f"{caption} (paper {', '.join(paper_label(p) for p in ids)})"
