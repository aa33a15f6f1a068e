"""What a user is told to do after a killed run or a changed setting works as stated (issue 14,
items 6 and 7): the default profile reruns incomplete outputs, the README gives the recovery
steps, and a `.venv` that is a symlink does not make every provenance record "dirty"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def test_the_default_profile_reruns_incomplete_outputs():
    """A killed job's half-written output is redone by the same command (Snakemake applies
    profiles/default to every run of this Snakefile)."""
    profile = yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())
    assert profile["rerun-incomplete"] is True


def test_the_readme_states_the_recovery_steps():
    text = (REPO / "README.md").read_text()
    start = text.index("## When a run was interrupted or a setting changed")
    section = text[start:text.index("\n## ", start + 1)]
    for needed in ("--unlock", "rerun-incomplete", "profiles/default/config.yaml", "Never `--unlock`",
                   "discarding the", "python -m oracle.workflow.plan.config", "--configfile"):
        assert needed in section, needed


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("venv", ["dir", "symlink"])
def test_a_venv_folder_or_symlink_keeps_the_checkout_clean(tmp_path, venv):
    """`.venv/` in .gitignore matches only a folder; a symlinked .venv (a shared environment)
    was untracked, so code_version said "dirty" in every record."""
    from oracle.code_version import code_version

    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    (repo / "code.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
    target = tmp_path / "env"
    target.mkdir()
    if venv == "dir":
        (repo / ".venv").mkdir()
        (repo / ".venv" / "python").write_text("")
    else:
        (repo / ".venv").symlink_to(target, target_is_directory=True)
    assert code_version(repo)["dirty"] is False
