"""Foreign, record-less and forged inputs on a smoke run (issue 19): the workflow refuses them
before computing (and before Snakemake removes any valid output), the audit flags them, and
`--check-numbers` re-derives every number from its source. Issue 31: copied, linked and
half-deleted results are never passed off as current, records cannot hide a changed key,
derived files and shard rows are re-derived, and `--rebuild` re-executes a chain.

The slow tests read the session's one smoke run (tests/conftest.py: tests/smoke/config.yaml with
a second world ``tau1.2`` and validation on, so world, experiment and validation numbers all
exist); each attack works on a copy of its results folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import pytest
import yaml

from oracle.tools.audit import check_numbers, load_config
from oracle.io.hashing import clear_hash_cache
from oracle.workflow.provenance import read_record, write_record

REPO = Path(__file__).resolve().parents[1]
from test_provenance_workflow import _audit_cli, _snakemake  # noqa: E402 - one runner for both smoke suites

RUN = "results/smoke"
pytestmark = pytest.mark.slow


def _model(configfile: Path, arch: str, n: int, seed: int = 0) -> str:
    """results/smoke/classifiers/<world>/<arch>/<condition>/seed<s>: the scaling experiment's model
    of (arch, N, seed) under `configfile` (one model, named by what determines its weights)."""
    from oracle.workflow.plan import config as oc
    from oracle.workflow.plan.paths import RunPaths

    cfg = yaml.safe_load(Path(configfile).read_text())
    oc.validate_config(cfg, oc.SCHEMA_FILE)
    oc.fill_defaults(cfg, oc.SCHEMA_FILE)
    return RunPaths(cfg).classifier_dir({"experiment": "scaling", "arch": arch, "cell": f"N{n}", "seed": seed})


def _files(workdir: Path) -> dict[str, int]:
    """{path: mtime_ns} of every artifact of the run (what a failed run must leave alone)."""
    run = workdir / RUN
    return {p.relative_to(run).as_posix(): p.stat().st_mtime_ns for p in run.rglob("*")
            if p.is_file() and not {"logs", "benchmarks"} & set(p.relative_to(run).parts)}


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("DataError:")]


@pytest.fixture(scope="module")
def smoke(smoke_run):
    """The session's one smoke run (tests/conftest.py), with a second world and validation on:
    (workdir, configfile). It holds numbers.json (every number and its chain) and the run config
    the audit compares with."""
    cfg = smoke_run.config
    assert cfg["validation"]["enabled"] and cfg["worlds"]["tau1.2"] == {"base_temperature": 1.2}
    return smoke_run.workdir, smoke_run.configfile


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
    write_record(out, rule="merge_samples", wildcards={"world": world}, params={},
                 inputs=shards, extra={"references": shards})


def _resign(path: Path) -> None:
    """Rewrite a record for the file as it is now, as a forger with the project's code would."""
    rec = read_record(path)
    write_record(path, rule=rec["rule"], wildcards=rec["wildcards"], params=rec["params"],
                 inputs=list(rec["inputs"]), seed=rec["seed"])


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


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:1000])


def _drop_classes(path: Path) -> None:
    with h5py.File(path, "r+") as f:
        ll = f["loglik"][()]
        del f["loglik"]
        f.create_dataset("loglik", data=ll[:, :7])


# what each damage does to its file, and the words of the one line that names it
DAMAGES = {
    "splits/base.h5": (_truncate, "is not a readable HDF5 file"),
    "data/train.h5": (_truncate, "is not a readable HDF5 file"),
    "oracle/flow.pt": (lambda p: p.write_bytes(b""), "is empty (0 bytes); expected a torch checkpoint"),
    "samples/base/shard-0001.h5": (_drop_classes, "dataset loglik has shape (250, 7); expected (250, 10)"),
}


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_a_damaged_input_with_a_re_signed_record_stops_the_run_before_anything_is_removed(smoke, tamper, name):
    """Issue 38 case 4: the bytes agree with their (re-signed) record, so only reading the file
    shows the damage. Before, Snakemake removed the outputs of the jobs to rerun (trained models,
    the shards of a flow, all.h5) and the job then failed, with a traceback for a zero-byte flow
    file or a shard that lost classes. Now the start check reads each input's layout first."""
    _, configfile = smoke
    path = tamper / RUN / name
    damage, words = DAMAGES[name]
    damage(path)
    _resign(Path(RUN, name))
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    lines = _error_lines(proc)
    assert len(lines) == 1 and f"{RUN}/{name}" in lines[0] and words in lines[0], out[-3000:]
    assert f"remake it: snakemake --forcerun {RUN}/{name}" in lines[0] and "Traceback" not in out
    assert _files(tamper) == before


def test_an_unreadable_record_stops_the_run_in_one_line(smoke, tamper):
    """A record that is not JSON was taken for no record, so its artifact passed unchecked."""
    _, configfile = smoke
    model = Path(_model(configfile, "test_vit", 50), "model.pt")
    Path(f"{model}.prov.json").write_text('{"artifact": ')
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert len(lines) == 1 and f"{model}.prov.json is not valid JSON" in lines[0], proc.stderr[-3000:]
    assert f"snakemake --forcerun {model}" in lines[0] and "Traceback" not in proc.stdout + proc.stderr
    assert _files(tamper) == before


def test_a_kept_model_gone_with_its_record_comes_back_on_a_plain_rerun(smoke, tamper):
    """Issue 38 case 2: a job server killed during training took model.pt and history.json with
    their records, the predictions made from them stayed; the rerun ran nothing and the kept
    model never came back (`audit --strict-code` then failed for good)."""
    _, configfile = smoke
    cell = tamper / _model(configfile, "test_vit", 50)
    for name in ("model.pt", "history.json"):
        (cell / name).unlink()
        (cell / f"{name}.prov.json").unlink()
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "model.pt is missing and the records of files made from it list it" in proc.stderr
    for name in ("model.pt", "history.json"):
        assert (cell / name).is_file() and (cell / f"{name}.prov.json").is_file()


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
    another shard, and the shard's own record names seed 1."""
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
    # refused by the first job that reads it: through the merged file, or (a collect reads the shards
    # behind all.h5 itself) as a shard of another seed's flow, by its attributes (the oracle it was
    # drawn from first; the params of its job are the start check's to compare, and this shard's
    # record is not this run's own, so it is left to the jobs' refusal)
    assert lines and (f"{RUN}/samples/base/shard-0000.h5 is not the file {RUN}/samples/base/all.h5 was made from"
                      in lines[0] or (f"{RUN}/samples/base/shard-0000.h5 is not the artifact this run's rule would "
                                      "make: it was drawn from another oracle" in lines[0])), proc.stdout[-3000:] + proc.stderr[-3000:]
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
    proc = _audit_cli(tamper, f"{RUN}/samples/base/all.h5", "--full")  # the chain, each artifact's line
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
    from oracle.tools.audit_numbers import numbers_parts, recompute_part

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


def test_a_part_re_derived_once_is_re_derived_again_when_its_source_changes(tamper):
    """The audit recomputes a numbers part once per process (`rederive_entry`): an edit of its
    source after that, even one of the same size, gives the edited number, not the remembered one."""
    from oracle.tools.audit_numbers import rederive_entry

    part, source = Path(f"{RUN}/numbers/world.base.json"), Path(f"{RUN}/samples/base/constants.json")
    before = rederive_entry(part, "bayes_error", None)
    assert before["value"] == json.loads(source.read_text())["all"]["bayes_error"]["mean"]
    before["value"] = -1.0  # what a caller does to its copy stays with it
    assert rederive_entry(part, "bayes_error", None)["value"] != -1.0
    text = source.read_text()
    old = json.dumps(json.loads(text)["all"]["bayes_error"]["mean"])
    new = ("0." + "1" * (len(old) - 2)) if old.startswith("0.") else "0.5"
    source.write_text(text.replace(old, new, 1))
    assert rederive_entry(part, "bayes_error", None)["value"] == pytest.approx(float(new))


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



# ============================================================================= issue 31
def _config_with(configfile: Path, dest: Path, **changes) -> Path:
    """The fixture's config with dotted keys changed, written to `dest`."""
    cfg = yaml.safe_load(Path(configfile).read_text())
    for key, value in changes.items():
        node = cfg
        *head, last = key.split("__")
        for part in head:
            node = node[part]
        node[last] = value
    dest.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return dest


def _record_json(path: Path) -> dict:
    return json.loads(Path(f"{path}.prov.json").read_text())


# ----------------------------------------------------------------------------- case 1
def test_a_changed_setting_over_copied_results_reruns_what_depends_on_it(smoke, tamper):
    """Results copied into a fresh checkout (no .snakemake): a changed classifiers.training.lr
    trains the models of the new recipe (named by it: the old ones stay as they were) and reruns
    everything after them, config.yaml says the new value, and the audit passes."""
    _, configfile = smoke
    cfg = _config_with(configfile, tamper / "lr.yaml", classifiers__training__lr=0.003)
    flow_mtime = (tamper / RUN / "oracle/flow.pt").stat().st_mtime_ns
    proc = _snakemake(tamper, "--configfile", str(cfg))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the experiments' data now read the models of the new recipe
    assert "params spec.classifiers." in proc.stderr and "(rule scaling_collect" in proc.stderr, proc.stderr[-3000:]
    assert "Nothing to be done" not in proc.stdout + proc.stderr
    assert yaml.safe_load((tamper / RUN / "config.yaml").read_text())["classifiers"]["training"]["lr"] == 0.003
    old, model = _model(configfile, "test_vit", 50), tamper / _model(cfg, "test_vit", 50) / "model.pt"
    assert model.parent != tamper / old and _record_json(tamper / old / "model.pt")["params"]["training"]["training"]["lr"] == 0.001
    assert _record_json(model)["params"]["training"]["training"]["lr"] == 0.003
    assert (tamper / RUN / "oracle/flow.pt").stat().st_mtime_ns == flow_mtime  # upstream kept
    proc = _audit_cli(tamper, f"{RUN}/numbers.json", "--strict-code")
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_linked_results_folder_of_another_run_is_never_overwritten(smoke, tamper, tmp_path_factory):
    """results/<run> a link to another checkout's run: with another seed (stale through its
    records) or a job Snakemake reruns for its own reasons, the run stops with one line before
    any job, and the other run's files are untouched; the audit flags the linked run."""
    work, configfile = smoke
    other = tmp_path_factory.mktemp("other-clone")
    shutil.move(str(tamper / "results"), str(other / "results"))  # the other checkout's run
    (tamper / "results").mkdir()
    (tamper / RUN).symlink_to(other / RUN)
    before = _files(other)
    seed1 = _config_with(configfile, tamper / "seed1.yaml", seed=1)
    for args in (("--configfile", str(seed1)), ("--configfile", str(configfile), "--forcerun", "make_splits")):
        proc = _snakemake(tamper, *args)
        assert proc.returncode != 0
        lines = _error_lines(proc)
        assert len(lines) == 1 and lines[0].startswith(f"DataError: {RUN} leads to another run's results"), \
            proc.stdout[-3000:] + proc.stderr[-3000:]
        assert _files(other) == before
    proc = _audit_cli(tamper, f"{RUN}/numbers.json")
    assert proc.returncode == 1 and "another run's artifact" in proc.stdout, proc.stdout[-3000:]


def test_a_missing_output_beside_its_record_is_rebuilt(smoke, tamper):
    """Issue 31 cases 1 and 7: a classifier whose model.pt and history.json are gone while their
    records stay (a job that failed after writing them) is retrained, not passed over."""
    _, configfile = smoke
    model = _model(configfile, "test_resnet", 200)
    run = tamper / model
    (run / "model.pt").unlink()
    (run / "history.json").unlink()
    proc = _snakemake(tamper, "-n", "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"{model}/model.pt is missing beside its record" in proc.stderr
    assert "rule train_classifier:" in proc.stdout and "Nothing to be done" not in proc.stdout


@pytest.mark.parametrize("change,error", [
    ({"oracle__flow__patch_size": 3}, "ConfigError: config key 'oracle.flow.patch_size': 3 does not divide"),
    # refused when the config is read (digits fix K = 10), not by the flow job after its outputs went
    ({"worlds__base__prior": [0.5, 0.5]}, "ConfigError: config key 'worlds.base.prior': has 2 entries but the "
                                          "digits data has 10 classes"),
    ({"data__kind": "npz", "data__root": "data/missing.npz"}, "DataError: npz data not found at data/missing.npz"),
])
def test_a_bad_value_over_existing_results_fails_the_run(smoke, tamper, change, error):
    _, configfile = smoke
    cfg = _config_with(configfile, tamper / "bad.yaml", **change)
    proc = _snakemake(tamper, "--configfile", str(cfg))
    assert proc.returncode != 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert error in proc.stdout + proc.stderr, proc.stdout[-3000:] + proc.stderr[-3000:]


# ----------------------------------------------------------------------------- case 2
def test_a_record_that_dropped_a_param_still_has_it_compared(smoke, tamper):
    """The params compared are those the workflow computes for the job now, not the record's
    own list: a record that lost training.curve_points (edited, or written by other code) differs.
    (curve_points decides a model's training curve, not its weights: the model keeps its name.)"""
    _, configfile = smoke
    model = f"{_model(configfile, 'test_vit', 50)}/model.pt"
    rec = _record_json(tamper / model)
    del rec["params"]["training"]["curve_points"]
    Path(f"{tamper / model}.prov.json").write_text(json.dumps(rec))
    cfg = _config_with(configfile, tamper / "curve.yaml", classifiers__curve_points=7)
    assert _model(cfg, "test_vit", 50) == _model(configfile, "test_vit", 50)
    proc = _audit_cli(tamper, f"{RUN}/scaling/scaling/figures/scaling_panels.png", "--configfile", str(cfg))
    assert proc.returncode == 1
    assert f"{model}: params training.curve_points was <missing>, is 7" in proc.stdout, proc.stdout[-3000:]


# ----------------------------------------------------------------------------- case 3
def test_a_model_made_from_another_runs_samples_is_not_used(smoke, tamper):
    """A model whose record (consistent in itself) says it was made from another all.h5 (as a
    model swapped in, with its record, from a run with another seed): the jobs that would read
    it refuse it, before any job runs, naming it and the command that remakes it."""
    _, configfile = smoke
    name = f"{_model(configfile, 'test_vit', 50)}/model.pt"
    model = tamper / name
    rec = _record_json(model)
    samples = next(k for k in rec["inputs"] if k.endswith("samples/base/all.h5"))
    rec["inputs"][samples] = "0" * 64
    Path(f"{model}.prov.json").write_text(json.dumps(rec))
    before = _files(tamper)
    proc = _snakemake(tamper, "--configfile", str(configfile), "--forcerun", "predict_classifier")
    assert proc.returncode != 0
    lines = _error_lines(proc)
    assert lines and f"{name} is not the artifact this run's rule " \
        "would make: it was made from another results/smoke/samples/base/all.h5" in lines[0], proc.stderr[-3000:]
    assert f"--forcerun {name}" in lines[0]
    assert _files(tamper) == before


# ----------------------------------------------------------------------------- cases 4, 5
def test_check_numbers_re_derives_files_and_re_scores_shard_rows(smoke, tamper):
    """Forgeries whose records were re-signed, each missed by every audit before issue 31: a
    table's CSV, the scaling data file runs.csv, numbers.tex, and log p(x|k) of one row of a
    shard (+3 nats in class 0, its record and all.h5's list of shard hashes re-signed), which the
    default re-scoring of every row finds (issue 38 case 1: 8 rows from a fixed seed missed it)."""
    table = Path(RUN, "scaling/scaling/tables/accuracy_vs_bayes.csv")
    text = table.read_text().splitlines()
    text[1] = text[1].replace(",", ",9", 1)
    table.write_text("\n".join(text) + "\n")
    _resign(table)
    runs = Path(RUN, "scaling/scaling/data/runs.csv")
    import pandas as pd

    frame = pd.read_csv(runs)
    frame.loc[0, "acc"] = 0.99
    frame.to_csv(runs, index=False)
    _resign(runs)
    tex = Path(RUN, "numbers.tex")
    tex.write_text(tex.read_text().replace("{", "{1", 1))
    _resign(tex)
    shard = Path(RUN, "samples/base/shard-0001.h5")
    with h5py.File(shard, "r+") as f:
        row = f["loglik"][137]
        row[0] += 3
        f["loglik"][137] = row
    _resign(shard)
    _remerge()
    proc = _audit_cli(tamper, "--check-numbers", f"{RUN}/numbers.json", "--cores", "2")
    assert proc.returncode == 1, proc.stdout[-3000:]
    out = proc.stdout
    for forged in (table, runs, tex):
        assert f"{forged}: rebuilding it from its inputs" in out, out[-4000:]
    assert f"{shard}: log p(x|k) re-scored with the run's oracle file differs from the stored value by 3" in out, out
    assert "samples/base/shard-0000.h5: 250 row(s) re-scored (all)" in out


def test_check_numbers_passes_an_untouched_run(smoke, monkeypatch):
    work, _ = smoke
    proc = _audit_cli(work, "--check-numbers", f"{RUN}/numbers.json", "--cores", "2", "--rows", "4")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "file(s):" in proc.stdout and "mismatch" not in proc.stdout


# ----------------------------------------------------------------------------- case 6
def test_rebuild_names_what_differs_and_what_is_identical(smoke, tamper):
    """`audit <shard> --rebuild` re-executes the data, flow and shard jobs in a scratch folder:
    the untouched ones are identical, the forged shard (record re-signed) is a mismatch."""
    shard = Path(RUN, "samples/base/shard-0001.h5")
    with h5py.File(shard, "r+") as f:
        f["loglik"][:, 0] += 3
    _resign(shard)
    proc = _audit_cli(tamper, str(shard), "--rebuild", "--cores", "2")
    assert proc.returncode == 1, proc.stdout[-3000:]
    lines = proc.stdout.splitlines()
    for ok in ("data/train.h5", "data/test.h5", "oracle/flow.pt"):
        assert any(ln.split()[:1] == ["identical"] and f"{RUN}/{ok}" in ln for ln in lines), proc.stdout
    [bad] = [ln for ln in lines if f"{shard}  [sample_shard" in ln]
    assert bad.split()[0] == "mismatch" and "loglik: max |d| 3" in bad, bad
    assert "3 job(s) behind it" in proc.stdout


# ----------------------------------------------------------------------------- case 8
def test_the_audit_reads_the_runs_own_config_file_as_the_workflow_does(smoke, monkeypatch):
    """The config file the run was started with leaves keys to their defaults (hard_label): the
    audit fills them in as the workflow did, so a clean run passes."""
    work, configfile = smoke
    assert "hard_label" not in Path(configfile).read_text()
    proc = _audit_cli(work, f"{RUN}/scaling/scaling/figures/scaling_panels.png", "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stdout[-3000:]


# ============================================================================= issue 38 item 8
def _dry_run_rules(proc: subprocess.CompletedProcess) -> set[str]:
    """The rules of a dry run's job table ("Job stats")."""
    text = proc.stdout + proc.stderr
    table = text[text.index("Job stats:"):].split("total", 1)[0].splitlines()[3:]
    return {ln.split()[0] for ln in table if ln.strip()}


def _copy_run(work: Path, dest: Path, how: str) -> None:
    """The run's results/ copied into `dest` the way a user moves a run (no .snakemake)."""
    dest.mkdir(parents=True, exist_ok=True)
    if how == "tar":
        pack = subprocess.run(["tar", "-C", str(work), "-cf", "-", "results"], capture_output=True, check=True)
        subprocess.run(["tar", "-C", str(dest), "-xf", "-"], input=pack.stdout, check=True)
    else:
        subprocess.run(["cp", how, str(work / "results"), str(dest)], check=True)


@pytest.mark.parametrize("how", ["-a", "-r", "tar"])
def test_a_copied_run_reruns_what_a_changed_param_reaches_and_nothing_for_a_key_no_rule_reads(smoke, tmp_path, how):
    """Results copied (cp -a, cp -r, tar) into a checkout without Snakemake's metadata: a key the
    rules hand their jobs (classifiers.training.lr, the classifiers' params) reruns its jobs
    through their records; a key no rule hands a job but the effective config's (a resource
    request) rewrites config.yaml, which says it, and nothing else for a setting (the report and
    the timings read config.yaml). (cp -r renews modification times, so Snakemake may rerun
    jobs of its own accord there; none is for a setting.)"""
    work, configfile = smoke
    dest = tmp_path / "clone"
    _copy_run(work, dest, how)
    unread = _config_with(configfile, tmp_path / "unread.yaml", resources__analysis__mem_mb=5000)
    proc = _snakemake(dest, "-n", "--configfile", str(unread))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stale = [ln for ln in proc.stderr.splitlines() if "params " in ln and " job(s) (rule " in ln]
    assert stale == ["  params config.resources.analysis.mem_mb was 2000, is 5000: 1 job(s) (rule effective_config, "
                     f"e.g. {RUN}/config.yaml)"], proc.stderr[-3000:]
    kept_times = how != "-r"
    if kept_times:  # only config.yaml and what shows it
        assert _dry_run_rules(proc) == {"effective_config", "report", "timings", "all"}, proc.stdout[-3000:]
    read = _config_with(configfile, tmp_path / "lr.yaml", classifiers__training__lr=0.003)
    proc = _snakemake(dest, "-n", "--configfile", str(read))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rules = _dry_run_rules(proc)
    assert {"train_classifier", "predict_classifier"} <= rules, proc.stdout[-3000:]
    if kept_times:  # the models of the new recipe are trained, the experiments read them, upstream is kept
        assert "params spec.classifiers." in proc.stderr and "(rule scaling_collect" in proc.stderr, proc.stderr[-3000:]
        assert not {"data", "oracle_train", "sample_shard", "make_splits"} & rules, rules


def test_a_copied_run_made_by_another_rule_script_is_noted_and_flagged_strictly(smoke, tamper):
    """Outputs whose records name another version of their rule script (the script edited since
    they were made, as in a checkout that moved on): the start check says so in one line and
    keeps them (Snakemake, without its metadata, reruns nothing for it); `audit --strict-code`
    flags them."""
    _, configfile = smoke
    table = tamper / RUN / "scaling/scaling/tables/accuracy_vs_bayes.csv"
    rec = _record_json(table)
    assert "scripts/experiment_table.py" in rec["code"]["files"]
    rec["code"]["files"]["scripts/experiment_table.py"] = "0" * 64  # what the old script hashed to
    Path(f"{table}.prov.json").write_text(json.dumps(rec))
    proc = _snakemake(tamper, "-n", "--configfile", str(configfile))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [note] = [ln for ln in proc.stderr.splitlines() if ln.startswith("note: ") and "other code" in ln]
    assert note.startswith("note: 1 existing output(s) were made by other code (scripts/experiment_table.py)"), note
    assert "made under other settings" not in proc.stderr
    proc = _audit_cli(tamper, str(table.relative_to(tamper)), "--strict-code")
    assert proc.returncode == 1 and "scripts/experiment_table.py changed" in proc.stdout, proc.stdout[-3000:]
