"""Foreign, record-less and forged inputs on a smoke run (issue 19): the workflow refuses them
before computing (and before Snakemake removes any valid output), the audit flags them, and
`--check-numbers` re-derives every number from its source.

The slow tests share ONE smoke run (tests/smoke/config.yaml with a second world ``tau1.2``
and validation on, so world, experiment and validation numbers all exist); each attack works
on a copy of its results folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import pytest
import yaml

from oracle.workflow.provenance.audit import check_numbers, load_config
from oracle.io.hashing import clear_hash_cache
from oracle.workflow.provenance import read_record, write_record

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
from test_provenance_workflow import _audit_cli, _snakemake  # noqa: E402 - one runner for both smoke suites

RUN = "results/smoke"
pytestmark = pytest.mark.slow


def _files(workdir: Path) -> dict[str, int]:
    """{path: mtime_ns} of every artifact of the run (what a failed run must leave alone)."""
    run = workdir / RUN
    return {p.relative_to(run).as_posix(): p.stat().st_mtime_ns for p in run.rglob("*")
            if p.is_file() and not {"logs", "benchmarks"} & set(p.relative_to(run).parts)}


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("DataError:")]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke run with a second world and validation on: (workdir, configfile)."""
    work = tmp_path_factory.mktemp("integrity-smoke")
    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["worlds"]["tau1.2"] = {"base_temperature": 1.2}
    cfg["validation"]["enabled"] = True
    configfile = work / "config.yaml"
    configfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    # numbers.json (every number and its chain) and the run config the audit compares with
    proc = _snakemake(work, "numbers", f"{RUN}/config.yaml", "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return work, configfile


@pytest.fixture
def tamper(smoke, tmp_path, monkeypatch):
    """A copy of the run's results folder to change (the working directory of the test)."""
    work, _ = smoke
    shutil.copytree(work / "results", tmp_path / "results", symlinks=True)
    monkeypatch.chdir(tmp_path)
    clear_hash_cache()
    return tmp_path


def _copy_with_record(src: Path, dst: Path, *, keep_mtime: bool = False) -> None:
    old = dst.stat() if keep_mtime else None
    shutil.copy(src, dst)
    shutil.copy(f"{src}.prov.json", f"{dst}.prov.json")
    if old is not None:  # `touch -r`: Snakemake sees nothing newer
        os.utime(dst, ns=(old.st_atime_ns, old.st_mtime_ns))


def _remerge(world: str = "base") -> None:
    """Re-merge a world's shards and record it as the merge_samples job does: the state the
    workflow reached before issue 19, when the job took whatever shards lay there."""
    from oracle.io.merge import merge_shards

    shards = sorted(f"{RUN}/samples/{world}/{p.name}" for p in Path(RUN, "samples", world).glob("shard-*.h5"))
    out = Path(RUN, "samples", world, "all.h5")
    merge_shards(shards, out)
    write_record(out, rule="merge_samples", wildcards={"world": world}, config={}, config_keys=[],
                 inputs=shards, extra={"references": shards})


def _resign(path: Path) -> None:
    """Rewrite a record for the file as it is now, as a forger with the project's code would."""
    rec = read_record(path)
    write_record(path, rule=rec["rule"], wildcards=rec["wildcards"], config=rec["config"],
                 config_keys=rec["config_keys"], inputs=list(rec["inputs"]), seed=rec["seed"])


def _forge(key: str, value: float) -> None:
    """Change one number in numbers.json and in its part, and re-sign both records."""
    numbers = Path(RUN, "numbers.json")
    prefix = max((p.stem for p in Path(RUN, "numbers").glob("*.json") if key.startswith(p.stem + ".")), key=len)
    part = Path(RUN, "numbers", f"{prefix}.json")
    for path, k in ((part, key[len(prefix) + 1:]), (numbers, key)):
        data = json.loads(path.read_text())
        data[k]["value"] = value
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    _resign(part)
    _resign(numbers)


# ----------------------------------------------------------------------------- 1: foreign shards
def test_a_shard_of_another_world_stops_the_run_before_anything_is_removed(smoke, tamper):
    _, configfile = smoke
    _copy_with_record(tamper / RUN / "samples/tau1.2/shard-0000.h5", tamper / RUN / "samples/base/shard-0000.h5")
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert lines and f"{RUN}/samples/base/shard-0000.h5 is not the artifact this run's rule would make: its record " \
        f"is the record of {RUN}/samples/tau1.2/shard-0000.h5" in lines[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    after = _files(tamper)
    assert {k: v for k, v in after.items() if k != "samples/base/shard-0000.h5"} == \
        {k: v for k, v in before.items() if k != "samples/base/shard-0000.h5"}
    assert json.loads((tamper / RUN / "samples/base/constants.json").read_text())["base_temperature"] == 1.0


def test_a_shard_of_another_world_is_flagged_by_the_audit(tamper):
    for name in ("shard-0000.h5", "shard-0001.h5"):  # shards of one merged file must agree
        _copy_with_record(tamper / RUN / "samples/tau1.2" / name, tamper / RUN / "samples/base" / name)
    _remerge()
    proc = _audit_cli(tamper, f"{RUN}/samples/base/all.h5")
    assert proc.returncode == 1, proc.stdout[-3000:]
    flags = [ln for ln in proc.stdout.splitlines() if ln.startswith("FLAG")]
    assert any(f"{RUN}/samples/base/shard-0000.h5: not the artifact this run's rule would make: its record is the "
               f"record of {RUN}/samples/tau1.2/shard-0000.h5" in f for f in flags), flags
    assert any("holds samples of world 'tau1.2', not of world 'base'" in f for f in flags), flags


def test_a_shard_of_a_seed_1_run_stops_the_jobs_that_read_the_merged_file(smoke, tamper, tmp_path_factory):
    """A shard (and its own consistent sidecar) from a run with another seed, hence another
    flow, put in place without changing the modification time: the merged file recorded
    another shard."""
    work, configfile = smoke
    other = tmp_path_factory.mktemp("seed1")
    shutil.copytree(work / "results", other / "results", symlinks=True)
    proc = _snakemake(other, "--configfile", str(configfile), "--config", "seed=1", "--forcerun", "data",
                      "--", f"{RUN}/samples/base/shard-0000.h5")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shard = tamper / RUN / "samples/base/shard-0000.h5"
    _copy_with_record(other / RUN / "samples/base/shard-0000.h5", shard, keep_mtime=True)
    with h5py.File(shard, "r") as f:
        assert int(f.attrs["seed"]) == 1
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile), "--forcerun", "world_constants", "make_splits")
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert lines and f"{RUN}/samples/base/shard-0000.h5 is not the file {RUN}/samples/base/all.h5 was made from" \
        in lines[0], proc.stdout[-3000:] + proc.stderr[-3000:]
    assert _files(tamper) == before  # forced jobs did not remove their outputs


# ----------------------------------------------------------------------------- 2: record-less inputs
def _tamper_without_record(path: Path) -> None:
    with h5py.File(path, "r+") as f:
        f["loglik"][:, 0] += 3
    Path(f"{path}.prov.json").unlink()


def test_a_record_less_tampered_shard_stops_the_run(smoke, tamper):
    _, configfile = smoke
    _tamper_without_record(tamper / RUN / "samples/base/shard-0001.h5")
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert lines and f"{RUN}/samples/base/shard-0001.h5 has no provenance record" in lines[0], \
        proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tamper / RUN / "samples/base/all.h5").is_file()


def test_a_record_less_tampered_shard_is_flagged_by_the_audit(tamper):
    _tamper_without_record(tamper / RUN / "samples/base/shard-0001.h5")
    _remerge()
    proc = _audit_cli(tamper, f"{RUN}/samples/base/all.h5")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert f"FLAG     {RUN}/samples/base/shard-0001.h5: no provenance record" in proc.stdout
    [line] = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip().startswith(f"{RUN}/samples/base/shard-0001.h5  ")]
    assert line.startswith(f"{RUN}/samples/base/shard-0001.h5  no provenance record") and line.endswith("FLAGGED")


# ----------------------------------------------------------------------------- 3: forged numbers
def test_a_forged_resigned_number_is_flagged(tamper):
    _forge("world.base.bayes_error", 0.0123)
    proc = _audit_cli(tamper, "world.base.bayes_error", "--run", RUN, "--strict-code")
    assert proc.returncode == 1, proc.stdout[-3000:]
    constants = json.loads((tamper / RUN / "samples/base/constants.json").read_text())
    flags = [ln for ln in proc.stdout.splitlines() if ln.startswith("FLAG")]
    assert any("numbers.json has value=0.0123 for 'world.base.bayes_error', but re-deriving it from "
               f"{RUN}/samples/base/constants.json with the project's code gives "
               f"value={constants['all']['bayes_error']['mean']!r}" in f for f in flags), flags
    proc = _audit_cli(tamper, "--check-numbers", f"{RUN}/numbers.json")
    assert proc.returncode == 1 and "world.base.bayes_error: numbers.json has value=0.0123" in proc.stdout


def test_check_numbers_recomputes_every_number(smoke, monkeypatch):
    work, _ = smoke
    monkeypatch.chdir(work)
    assert check_numbers(f"{RUN}/numbers.json", require_record=True) == []
    from oracle.workflow.provenance.audit_numbers import numbers_parts, recompute_part

    cfg = load_config(f"{RUN}/config.yaml")
    parts = numbers_parts(f"{RUN}/numbers.json")
    assert {"scaling", "world.base", "world.tau1.2", "validation"} <= set(parts)
    numbers = json.loads(Path(RUN, "numbers.json").read_text())
    derived = {f"{p}.{k}" for p, path in parts.items() for k in recompute_part(path, cfg)}
    assert derived == set(numbers)


@pytest.mark.parametrize("key", ["world.base.bayes_error", "world.tau1.2.aleatoric_floor",
                                 "scaling.alpha.test_vit", "scaling.bayes_gap_max", "validation.coverage"])
def test_check_numbers_catches_a_forged_number_of_each_kind(tamper, key):
    _forge(key, 0.0123)
    problems = check_numbers(f"{RUN}/numbers.json")
    assert any(p.startswith(f"{key}: numbers.json has value=0.0123") for p in problems), problems
    assert any(f"numbers/{key.rsplit('.', 1)[0] if key.startswith('world') else key.split('.')[0]}.json has "
               "value=0.0123" in p for p in problems), problems


def test_numbers_json_inputs_are_checked(tamper):
    """numbers.json's record lists its parts: a part edited (and re-signed) after the merge is flagged."""
    part = Path(RUN, "numbers", "scaling.json")
    data = json.loads(part.read_text())
    data["n_max"]["description"] += " (edited)"
    part.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    _resign(part)
    proc = _audit_cli(tamper, "world.base.bayes_error", "--run", RUN)
    assert proc.returncode == 1
    assert f"FLAG     {RUN}/numbers.json: its input {RUN}/numbers/scaling.json changed" in proc.stdout


# ----------------------------------------------------------------------------- 6: nothing removed
def test_a_flipped_shard_byte_removes_nothing(smoke, tamper):
    _, configfile = smoke
    shard = tamper / RUN / "samples/base/shard-0001.h5"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert lines and f"{RUN}/samples/base/shard-0001.h5 changed since rule 'sample_shard' made it" in lines[0]
    assert f"--forcerun {RUN}/samples/base/shard-0001.h5" in lines[0]
    assert _files(tamper) == before  # all.h5 and everything built on it are still there
