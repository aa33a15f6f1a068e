"""Throttled progress lines (oracle.progress) under a fake clock."""

import io

from oracle.progress import Progress, format_seconds, track


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_lines_every_ten_seconds_with_rate_and_eta():
    clock, out = Clock(), io.StringIO()
    bar = Progress("flow", 1000, stream=out, clock=clock)
    assert out.getvalue() == "flow: step 0/1000 (0.0%)\n"  # the start line shows the total at once
    written = []
    for step in range(1, 1001):
        clock.t += 0.25  # 4 steps/s
        line = bar.update(step, **({"loss": 1.0 / step} if step % 10 == 0 else {}))
        if line is not None:
            written.append((step, line))
    # one line per 10 s of clock: at steps 40, 80, ..., 1000
    assert [s for s, _ in written] == list(range(40, 1001, 40))
    assert written[0][1] == "flow: step 40/1000 (4.0%) loss=0.025 | 4 step/s | elapsed 10s | ETA 4m00s"
    last = bar.finish()
    assert last == "flow: step 1000/1000 (100.0%) loss=0.001 | 4 step/s | elapsed 4m10s"
    assert out.getvalue().splitlines()[-1] == last
    assert bar.lines == 1 + 25 + 1


def test_resumed_count_is_left_out_of_the_rate():
    clock, out = Clock(), io.StringIO()
    bar = Progress("shard 0", 100, unit="sample", start=60, stream=out, clock=clock, every_s=0)
    clock.t += 10.0
    assert bar.update(80) == "shard 0: sample 80/100 (80.0%) | 2 sample/s | elapsed 10s | ETA 10s"


def test_fast_rates_read_as_plain_numbers():
    clock, out = Clock(), io.StringIO()
    bar = Progress("shard 1", 20000, unit="sample", stream=out, clock=clock)
    clock.t += 2.0
    assert bar.finish() == "shard 1: sample 0/20000 (0.0%) | elapsed 2s"
    assert bar.update(17084) is None  # throttled: the last line was just written
    clock.t += 10.0
    assert bar.update(17084) == "shard 1: sample 17084/20000 (85.4%) | 1424 sample/s | elapsed 12s | ETA 2s"


def test_disabled_and_no_time_elapsed():
    clock, out = Clock(), io.StringIO()
    off = Progress("rank 1", 10, stream=out, clock=clock, enabled=False)
    clock.t += 60
    assert off.update(5) is None and off.finish() is None and out.getvalue() == ""
    bar = Progress("x", 3, stream=out, clock=clock, every_s=0)
    bar.set(epoch=1)
    assert bar.update() == "x: step 1/3 (33.3%) epoch=1"  # no time passed: no rate, no ETA


def test_format_seconds():
    assert [format_seconds(s) for s in (0, 59.9, 60, 3599, 3600, 7500)] == ["0s", "59s", "1m00s", "59m59s",
                                                                               "1h00m", "2h05m"]
    assert format_seconds(float("inf")) == "?" and format_seconds(float("nan")) == "?"


def test_track_is_silent_for_a_short_loop_and_reports_a_long_one():
    """An inner loop (a prediction, a flow pass): no line unless it runs for every_s; then a
    line every every_s and a last one, in the log's whole-line format."""
    clock, out = Clock(), io.StringIO()
    for _ in track(range(50), "predict", stream=out, clock=clock):
        clock.t += 0.1  # 5 s in all
    assert out.getvalue() == ""
    seen = []
    for i in track(iter(range(30)), "log p(x|k)", total=30, unit="pass", stream=out, clock=clock):
        seen.append(i)
        clock.t += 1.0  # 30 s in all
    assert seen == list(range(30))
    lines = out.getvalue().splitlines()
    assert lines[0] == "log p(x|k): pass 10/30 (33.3%) | 1 pass/s | elapsed 10s | ETA 20s"
    assert len(lines) == 4 and lines[-1] == "log p(x|k): pass 30/30 (100.0%) | 1 pass/s | elapsed 30s"
    off = io.StringIO()
    for _ in track(range(5), "x", enabled=False, stream=off, clock=clock):
        clock.t += 60
    assert off.getvalue() == ""


def test_the_library_has_one_progress_mechanism():
    """No module of oracle/ imports another progress library (tqdm's bars stay silent in a job's
    log, which is not a terminal): progress goes through oracle.progress."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "oracle"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(root.parent)}: {n}" for n in names if n.split(".")[0] in ("tqdm", "rich")]
    assert found == []
