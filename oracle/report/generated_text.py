"""Generated blocks inside hand-written documents: the text between a BEGIN and an END marker
line (e.g. README's SLURM job counts, docs/gpu.md's cost table) is owned by a generator script,
which rewrites it or checks that it is current."""

from __future__ import annotations

from pathlib import Path

from oracle.errors import DataError
from oracle.io.atomic import atomic_output


def generated_part(path: str | Path, begin: str, end: str, text: str | None = None) -> str:
    """The block between the markers of `path` (or of `text`, read from `path` when None),
    without surrounding blank lines, ending in one newline. DataError naming the file and the
    markers when either is missing."""
    text = Path(path).read_text() if text is None else text
    if begin not in text or end not in text:
        raise DataError(f"{path}: the markers {begin!r} ... {end!r} are missing")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n") + "\n"


def write_generated_part(path: str | Path, begin: str, end: str, new: str) -> None:
    """Replace the block between the markers of `path` by `new` (atomically; the file is read
    now, so edits made while `new` was computed are kept)."""
    path = Path(path)
    text = path.read_text()
    generated_part(path, begin, end, text)
    before, rest = text.split(begin, 1)
    with atomic_output(path) as tmp:
        Path(tmp).write_text(before + begin + "\n" + new + end + rest.split(end, 1)[1])
