"""A run moved or shared reruns nothing: a finished results tree copied by ``cp -a`` into a
second checkout of the same code (every file written anew, so every rule script is newer than
every output, as in a fresh clone) plans no job with plain ``snakemake -n``, one with ``--force
fig2``, and an edited rule script still reruns its jobs: the script's content against the
outputs' records decides (`oracle.workflow.engine.code_by_content`), not modification times.
Slow: it reads the session's Gaussian smoke run (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _checkout(dest: Path) -> Path:
    """A copy of the repository's files (tracked and untracked, not ignored) under `dest`, each
    written now, as a fresh clone writes them."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / rel)
    return dest


def _planned(checkout: Path, work: Path, *args: str) -> tuple[int, list[str], str]:
    """(jobs planned, their rules, the output) of a dry run of `checkout`'s workflow in `work`."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(checkout / "Snakefile"), "-d",
                           str(work), "-n", "--cores", "1", "--configfile",
                           str(checkout / "tests/smoke/gaussian.yaml"), *args],
                          cwd=work, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    total = re.search(r"^total\s+(\d+)", out, re.M)
    rules = re.findall(r"^(?:local)?rule (\w+):", out, re.M)
    return (int(total.group(1)) if total else 0), rules, out


@pytest.mark.slow
def test_a_copied_run_plans_nothing_and_an_edited_script_reruns_its_jobs(gaussian_smoke, tmp_path):
    checkout = _checkout(tmp_path / "checkout")
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["cp", "-a", str(gaussian_smoke.parents[1] / "results"), str(work)], check=True)
    # every script is newer than every output: Snakemake's mtime test alone would rerun the run
    script = checkout / "scripts" / "claims.py"
    assert script.stat().st_mtime > max(p.stat().st_mtime for p in (work / "results").rglob("*.csv"))

    jobs, rules, out = _planned(checkout, work)
    assert jobs == 0 and "Nothing to be done" in out, out[-3000:]
    jobs, rules, out = _planned(checkout, work, "--force", "fig2")
    assert jobs == 1 and rules == ["experiment_figure"], out[-3000:]

    script.write_text(script.read_text() + "# edited\n")
    jobs, rules, out = _planned(checkout, work)
    assert "claims" in rules and jobs >= 1, out[-3000:]
    assert "Code has changed" in out or "code has changed" in out.lower(), out[-3000:]
