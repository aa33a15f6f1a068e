"""The column dictionary of a run's data CSVs, gathered through the registry: each kind's
``COLUMNS`` (its package: {data name: entry}, its own files and the shared entries it writes,
`oracle.report.columns.SHARED`) and the run-level files (`oracle.report.columns.RUN_LEVEL`).
docs/outputs.md is generated from it (`dictionary_markdown`); tests/test_columns.py checks every
registered kind's entries (`registry_problems`) and each kind's tests what its collect writes
(`data_problems`). A new kind describes its files in its own package and touches nothing here."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from oracle.experiments import kind_module, kinds, table_csvs
from oracle.report import columns as dictionary
from oracle.report.columns import SHARED, CsvColumns

__all__ = ["kind_columns", "data_entry", "csv_columns", "registry_problems", "data_problems", "dictionary_markdown",
           "documented_kinds"]


def kind_columns(kind: str) -> Mapping[str, CsvColumns]:
    """{data name: entry} of experiment kind `kind` (its ``COLUMNS``)."""
    return kind_module(kind).COLUMNS


def data_entry(kind: str, data: str) -> CsvColumns | None:
    """The entry of data file `data` of experiment kind `kind`, None when it has none."""
    return kind_columns(kind).get(data)


def csv_columns(only: Collection[str] | None = None) -> list[tuple[CsvColumns, tuple[str, ...]]]:
    """Every data CSV a run can write, in the order docs/outputs.md lists them, with the kinds
    that share it: the shared entries some kind writes, each kind's own files (registry order),
    then the run-level files (shared by none). `only`: of those kinds alone (default: all)."""
    written = {kind: kind_columns(kind) for kind in kinds() if only is None or kind in only}
    out = [(entry, tuple(k for k, cols in written.items() if entry in cols.values())) for entry in SHARED.values()]
    out = [(entry, by) for entry, by in out if by]
    out += [(entry, ()) for cols in written.values() for entry in cols.values() if entry not in SHARED.values()]
    return out + [(entry, ()) for entry in dictionary.RUN_LEVEL]


def registry_problems() -> list[str]:
    """What keeps the registered kinds' ``COLUMNS`` from describing their data files: a data
    name (``DATA``) without an entry or an entry for none, a kind's own entry away from its
    path ``<kind>/<experiment>/data/<data>.csv``, a shared one under another name, a column
    without unit or meaning. Empty when they agree."""
    out = []
    for kind, module in kinds().items():
        cols = getattr(module, "COLUMNS", None)
        if not isinstance(cols, Mapping):
            out.append(f"experiment kind {kind!r}: no COLUMNS mapping {{data name: CsvColumns}} in its package")
            continue
        out += [f"{kind}: data file {d!r} has no COLUMNS entry" for d in module.DATA if d not in cols]
        out += [f"{kind}: COLUMNS entry {d!r} is not one of its DATA {tuple(module.DATA)}" for d in cols
                if d not in module.DATA]
        for d, entry in cols.items():
            if SHARED.get(d) is entry:
                continue
            want = f"{kind}/<experiment>/data/{d}.csv"
            if not isinstance(entry, CsvColumns) or entry.path != want:
                out.append(f"{kind}: COLUMNS entry {d!r} is {getattr(entry, 'path', entry)!r}, not {want!r} "
                           f"(or the shared oracle.report.columns.SHARED[{d!r}])")
                continue
            out += [f"{want}: column {c!r} has no unit or meaning" for c, (u, m) in entry.columns.items()
                    if not (u and m)]
            if not entry.row:
                out.append(f"{want}: no row description")
    return out


def data_problems(kind: str, written: Mapping[str, Sequence[str]],
                  unwritten_ok: Mapping[str, Collection[str]] | None = None) -> list[str]:
    """`oracle.report.columns.column_problems` of each data file of experiment kind `kind`,
    `written` {data name: the columns its collect wrote}, `unwritten_ok` {data name: columns
    its inputs lacked}; a data file without an entry is named with its columns."""
    out = []
    for data, columns in written.items():
        entry = data_entry(kind, data)
        out += (dictionary.column_problems(entry, columns, (unwritten_ok or {}).get(data, ())) if entry is not None
                else [f"{kind}/<experiment>/data/{data}.csv: not in the dictionary (columns {list(columns)})"])
    return out


KINDS_LINE = "<!-- kinds: {} -->"


def dictionary_markdown(only: Sequence[str] | None = None) -> str:
    """docs/outputs.md's column dictionary: a first line naming the kinds it covers, then every
    data CSV (`csv_columns`) and the table CSVs (`oracle.experiments.table_csvs`). `only`: of
    those kinds alone (default: every registered kind)."""
    covered = [kind for kind in kinds() if only is None or kind in only]
    tables = [(path, caption) for path, caption in table_csvs()
              if path.split("/", 1)[0] in covered or path.startswith("validation/")]
    return KINDS_LINE.format(" ".join(covered)) + "\n" + dictionary.dictionary_markdown(csv_columns(covered), tables)


def documented_kinds(markdown: str) -> list[str]:
    """The kinds a generated dictionary covers (its first line, `dictionary_markdown`)."""
    first = markdown.split("\n", 1)[0]
    prefix, suffix = KINDS_LINE.split("{}")
    if not (first.startswith(prefix) and first.endswith(suffix)):
        return []
    return first[len(prefix):len(first) - len(suffix)].split()
