"""The rehearsal's logic (oracle.workflow.plan.rehearsal, used by scripts/ci/rehearse.py): the
preset and overlay files, their merge held against Snakemake's own, the Snakemake command and
the files every paper artifact must have. The rehearsals themselves: tests/test_rehearsal.py."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from oracle.errors import ConfigError
from oracle.workflow.plan import rehearsal
from oracle.workflow.plan.paths import RunPaths

REPO = Path(__file__).resolve().parents[1]
OVERLAYS = sorted(p.stem for p in (REPO / "presets" / "rehearsal").glob("*.yaml"))


def test_merge_follows_snakemake_mappings_merge_everything_else_replaces():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": None, "e": {"f": 1}}
    got = rehearsal.merge_config(copy.deepcopy(base), {"a": {"c": [3]}, "d": {"x": 1}, "e": 5, "g": {"h": 2}})
    assert got == {"a": {"b": 1, "c": [3]}, "d": {"x": 1}, "e": 5, "g": {"h": 2}}


@pytest.mark.parametrize("preset", OVERLAYS)
def test_merged_config_is_the_one_snakemake_makes(preset):
    from snakemake.settings.types import ConfigSettings

    files = rehearsal.configfiles(preset)
    assert files == [REPO / "presets" / f"{preset}.yaml", REPO / "presets" / "rehearsal" / f"{preset}.yaml"]
    assert rehearsal.merged_config(files) == dict(ConfigSettings(configfiles=list(files)).overwrite_config)


def test_a_preset_without_an_overlay_is_named_with_those_that_have_one():
    with pytest.raises(ConfigError, match=r"presets/nope\.yaml does not exist \(presets with an overlay: " + ", ".join(OVERLAYS)):
        rehearsal.configfiles("nope")


def test_command_and_paper_files(tmp_path):
    preset = OVERLAYS[0]
    files = rehearsal.configfiles(preset)
    cfg = rehearsal.merged_config(files)
    cmd = rehearsal.snakemake_command("py", cfg, files, tmp_path, "2", "slurm", ["--retries", "0"])
    assert cmd[:4] == ["py", "-m", "snakemake", "all"] and cmd[4:4 + len(cfg["paper"])] == list(cfg["paper"])
    assert cmd[cmd.index("--profile") + 1] == "slurm" and cmd[-3:] == ["--configfile", *map(str, files)]
    assert cmd[cmd.index("--configfile") - 2:cmd.index("--configfile")] == ["--retries", "0"]
    found = rehearsal.paper_files(cfg, tmp_path)
    assert found == {pid: [tmp_path / f for f in fs] for pid, fs in RunPaths(cfg).paper_files().items()}
    assert all(p.is_relative_to(tmp_path / "results" / cfg["run"]) for ps in found.values() for p in ps)
