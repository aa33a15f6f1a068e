"""A paper preset rehearsed in miniature (``scripts/ci/rehearse.py``, docs/presets.md
"Rehearsal"): the preset with its overlay ``presets/rehearsal/<preset>.yaml`` on top (all the
shrinking lives there), the config Snakemake makes of the two, the Snakemake command that runs
every target and every ``paper:`` id, and the files each paper artifact must have at the end.

The script keeps what is CI's own: the fake inputs it places and its command line.
"""

from __future__ import annotations

import collections.abc
import copy
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from oracle.errors import ConfigError
from oracle.workflow.plan.config import load_yaml
from oracle.workflow.plan.paths import REPO_ROOT as REPO
from oracle.workflow.plan.paths import RunPaths


def configfiles(preset: str, repo: Path = REPO) -> list[Path]:
    """The preset and its rehearsal overlay, in the order Snakemake merges them; ConfigError
    naming the missing file and the presets that have an overlay."""
    files = [repo / "presets" / f"{preset}.yaml", repo / "presets" / "rehearsal" / f"{preset}.yaml"]
    for f in files:
        if not f.is_file():
            have = ", ".join(sorted(p.stem for p in (repo / "presets" / "rehearsal").glob("*.yaml")))
            raise ConfigError(f"{f.relative_to(repo)} does not exist (presets with an overlay: {have})")
    return files


def merge_config(config: dict, overlay: Mapping) -> dict:
    """`overlay` merged into `config` in place as Snakemake merges configfiles: mappings
    merge key by key, every other value (lists included) replaces; returns `config`."""
    for key, value in overlay.items():
        if isinstance(value, collections.abc.Mapping):
            base = config.get(key)
            config[key] = merge_config(dict(base) if isinstance(base, collections.abc.Mapping) else {}, value)
        else:
            config[key] = copy.deepcopy(value)
    return config


def merged_config(files: Iterable[Path]) -> dict:
    """The config of ``snakemake --configfile FILES...``: each file merged over the ones before
    (`merge_config`; tests/test_rehearsal_config.py holds it against Snakemake's own)."""
    out: dict = {}
    for f in files:
        merge_config(out, load_yaml(f))
    return out


def paper_files(config: Mapping, workdir: Path) -> dict[str, list[Path]]:
    """paper id -> every file of its artifact below `workdir` (`oracle.workflow.plan.paths.RunPaths`,
    where the rules take their paths from)."""
    return {pid: [workdir / f for f in files] for pid, files in RunPaths(config).paper_files().items()}


def snakemake_command(python: str, config: Mapping, files: Sequence[Path], workdir: Path, cores: str,
                      profile: str | None = None, extra: Sequence[str] = (), repo: Path = REPO) -> list[str]:
    """The Snakemake command of a rehearsal: targets ``all`` and every paper id, run in
    `workdir` with the repository's Snakefile; `extra` passed on as it is; the configfiles last
    (``--configfile`` takes every argument after it)."""
    cmd = [python, "-m", "snakemake", "all", *(config.get("paper") or {}), "--snakefile", str(repo / "Snakefile"),
           "--directory", str(workdir), "--cores", str(cores)]
    if profile:
        cmd += ["--profile", profile]
    return [*cmd, *extra, "--configfile", *map(str, files)]
