"""Every paper preset rehearsed end to end on CPU in miniature (scripts/ci/rehearse.py): the
preset with presets/rehearsal/<preset>.yaml on top, on fake inputs in its documented layouts,
through every target and every `paper:` id.

Fast: each overlay only shrinks (every key it sets exists in its preset, so it opens no code
path the preset does not take) and the merged config passes the schema and the config checks.
Slow (CI runs them): each preset's rehearsal finishes with every artifact of its `paper:` map,
and its effective config is the deep merge of preset and overlay (Snakemake's merge of several
configfiles, checked on the installed version). All run locally: imagenet128's used to run
through the SLURM profile (12 min against 3 locally: each SLURM job pays Snakemake's start-up and
imports); what it added, sbatch used for the flow, shards, validation and classifiers and both
classifier groups formed, tests/test_slurm.py checks on the smoke run through SLURM.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import rehearse  # scripts/ci (tests/conftest.py puts it on sys.path)
import yaml
from fake_inputs import FAKES

from oracle.workflow.plan import config as oc

REPO = Path(__file__).resolve().parents[1]

OVERLAYS = sorted(p.stem for p in (REPO / "presets" / "rehearsal").glob("*.yaml"))
RUN_TIMEOUT_S = 1200


def _leaves(d: Mapping, path: tuple = ()) -> Iterator[tuple]:
    for k, v in d.items():
        if isinstance(v, Mapping) and v:
            yield from _leaves(v, (*path, k))
        else:
            yield (*path, k)


def _get(d: Mapping, path: tuple):
    for k in path:
        d = d[k]
    return d


def _has(d: Mapping, path: tuple) -> bool:
    for k in path:
        if not isinstance(d, Mapping) or k not in d:
            return False
        d = d[k]
    return True


def test_every_data_reading_preset_has_an_overlay():
    assert OVERLAYS == sorted(FAKES)


@pytest.mark.parametrize("preset", OVERLAYS)
def test_overlay_only_shrinks_and_the_merge_validates(preset):
    pre, over = (yaml.safe_load(f.read_text()) for f in rehearse.configfiles(preset))
    # experiments by name: an overlay can shrink one experiment's keys and keep the rest
    assert isinstance(pre["experiments"], dict)
    new = [".".join(map(str, p)) for p in _leaves(over) if not _has(pre, p)]
    assert not new, f"presets/rehearsal/{preset}.yaml sets keys its preset does not have: {new}"
    merged = rehearse.merged_config(rehearse.configfiles(preset))
    for p in _leaves(over):
        assert _get(merged, p) == _get(over, p), p
    for p in _leaves(pre):
        if not _has(over, p) and not any(_has(over, p[:i]) and not isinstance(_get(over, p[:i]), Mapping)
                                         for i in range(1, len(p))):
            assert _get(merged, p) == _get(pre, p), p
    schema = oc.full_schema(REPO / "config.schema.yaml")
    oc.validate_config(merged, schema)
    oc.fill_defaults(merged, schema)
    oc.check_config(merged)
    # what a rehearsal exists to exercise: CPU, the multi-process launcher, the real archs
    assert merged["device"] == "cpu"
    assert merged["resources"]["oracle"]["gpus"] == 2 and merged["resources"]["oracle"]["nodes"] == 1
    assert merged["classifiers"]["archs"] == pre["classifiers"]["archs"]
    assert merged["paper"] == pre["paper"] and set(merged["experiments"]) == set(pre["experiments"])


def _rehearse(preset: str, workdir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "scripts" / "ci" / "rehearse.py"), preset,
                           "--workdir", str(workdir)],
                          check=False, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def _check_run(preset: str, workdir: Path, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    merged = rehearse.merged_config(rehearse.configfiles(preset))
    files = rehearse.paper_files(merged, workdir)
    assert set(files) == set(merged["paper"])
    missing = [str(p) for ps in files.values() for p in ps if not p.is_file()]
    assert not missing, missing
    # the run's effective config is the deep merge of preset and overlay
    effective = yaml.safe_load((workdir / "results" / merged["run"] / "config.yaml").read_text())
    for p in _leaves(merged):
        assert _has(effective, p) and _get(effective, p) == _get(merged, p), p


@pytest.mark.slow
@pytest.mark.parametrize("preset", OVERLAYS)
def test_rehearsal_builds_every_paper_artifact(preset, tmp_path):
    _check_run(preset, tmp_path, _rehearse(preset, tmp_path))
