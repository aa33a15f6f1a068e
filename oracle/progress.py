"""Progress lines for long loops, the one progress mechanism of the library: one line every
``every_s`` seconds to the job's log, so ``tail -f results/<run>/logs/<rule>.log`` shows a
running job.

A workflow job's stdout and stderr go to its rule's log (`oracle.workflow.jobs.script_job`),
which is not a terminal: a terminal progress bar (tqdm's) stays silent there, and one that did
write would fill the file with carriage-return updates. A :class:`Progress` writes whole lines
instead, time-throttled::

    flow: step 120/1000 (12.0%) loss=3.123 | 4.21 step/s | elapsed 28s | ETA 3m29s

Two ways in: a :class:`Progress` for a job's main loop (a line at its start and its end too,
values such as the loss shown), and `track` for a loop inside one (a flow pass over classes, a
prediction, decoding images), which may take a second or an hour: it writes nothing until
``every_s`` has passed, so a short call leaves no line.

It only reads the values it is given and writes text to a stream: it never touches an
artifact, a random generator or a tensor, so no computed number depends on it.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any, TextIO, TypeVar

T = TypeVar("T")

__all__ = ["Progress", "format_seconds", "track"]

#: Seconds between two progress lines of a long loop.
EVERY_S = 10.0


def format_seconds(seconds: float) -> str:
    """``45s``, ``3m29s``, ``2h05m`` (rounded down); ``?`` for NaN or infinity."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class Progress:
    """A throttled progress line writer over a count from `start` to `total`.

    label:   what runs (``flow class 3``, ``shard 0``); unit: what is counted (``step``).
    total:   the count at the end; start: the count already done (a resumed run), which the
             rate leaves out.
    every_s: least seconds between two lines (0: a line at every update); a line is also
             written at construction and by `finish`.
    stream:  where lines go (default: ``sys.stderr`` at the time of writing, so a job's
             redirection to its log applies); each line is flushed.
    clock:   seconds, monotonic (tests pass a fake one).
    enabled: False writes nothing (ranks other than 0 of a distributed run).
    quiet:   no line at construction, and `finish` writes one only after an earlier line (an
             inner loop: silent unless it runs for `every_s`; see `track`).
    """

    def __init__(self, label: str, total: int, *, unit: str = "step", start: int = 0,
                 every_s: float = EVERY_S, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic, enabled: bool = True, quiet: bool = False) -> None:
        self.label, self.unit = label, unit
        self.total, self.start, self.done = int(total), int(start), int(start)
        self.every_s = float(every_s)
        self.stream, self.clock, self.enabled = stream, clock, enabled
        self.values: dict[str, Any] = {}
        self.t0 = clock()
        self.last_line_t = self.t0
        self.lines = 0
        self.quiet = quiet
        if enabled and not quiet:
            self._write(self.t0)

    def update(self, done: int | None = None, **values: Any) -> str | None:
        """Set the count (default one more) and any shown values (``loss=...``; they stay until
        changed); writes and returns a line when `every_s` has passed since the last one, else
        returns None."""
        self.done = self.done + 1 if done is None else int(done)
        self.values.update(values)
        if not self.enabled:
            return None
        now = self.clock()
        if now - self.last_line_t >= self.every_s:
            return self._write(now)
        return None

    def set(self, **values: Any) -> None:
        """Set shown values without writing (they appear in the next line)."""
        self.values.update(values)

    def finish(self, **values: Any) -> str | None:
        """Write the last line (count, values, rate, elapsed time); returns it (None if disabled,
        or quiet and silent so far)."""
        self.values.update(values)
        if not self.enabled or (self.quiet and not self.lines):
            return None
        return self._write(self.clock())

    def line(self, now: float) -> str:
        """The progress line at clock time `now` (see the module docstring)."""
        elapsed = now - self.t0
        count = f"{self.label}: {self.unit} {self.done}/{self.total}"
        if self.total > 0:
            count += f" ({100.0 * self.done / self.total:.1f}%)"
        parts = [" ".join([count, *(f"{k}={_value(v)}" for k, v in self.values.items())])]
        moved = self.done - self.start
        if moved > 0 and elapsed > 0:
            rate = moved / elapsed
            parts.append(f"{rate:.0f} {self.unit}/s" if rate >= 100 else f"{rate:.3g} {self.unit}/s")
            parts.append(f"elapsed {format_seconds(elapsed)}")
            if self.done < self.total:
                parts.append(f"ETA {format_seconds((self.total - self.done) / rate)}")
        elif elapsed > 0:
            parts.append(f"elapsed {format_seconds(elapsed)}")
        return " | ".join(parts)

    def _write(self, now: float) -> str:
        text = self.line(now)
        print(text, file=self.stream if self.stream is not None else sys.stderr, flush=True)
        self.last_line_t = now
        self.lines += 1
        return text


def track(items: Iterable[T], label: str, *, total: int | None = None, unit: str = "batch",
          enabled: bool = True, every_s: float = EVERY_S, stream: TextIO | None = None,
          clock: Callable[[], float] = time.monotonic) -> Iterator[T]:
    """Yield the items of `items`, counting them in a quiet `Progress` (`total`: default
    ``len(items)``): a line every `every_s` seconds while the loop runs and a last one at its
    end, but none at all for a loop that ends sooner. `enabled` False: no line."""
    n = len(items) if total is None and isinstance(items, Sized) else int(total or 0)
    bar = Progress(label, n, unit=unit, every_s=every_s, stream=stream, clock=clock, enabled=enabled, quiet=True)
    for item in items:
        yield item
        bar.update()
    bar.finish()
