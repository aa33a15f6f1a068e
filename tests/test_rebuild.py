"""Issue 31, fast: the pieces behind the start-of-run check (oracle.workflow.provenance.stale), the
rebuild's verdicts (oracle.workflow.provenance.artifact_diff), its job graph (oracle.workflow.provenance.rebuild),
the rule key table (oracle.workflow.plan.rule_keys) and the shard re-scoring's rows. The
end-to-end cases run on a smoke run in tests/test_integrity_workflow.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from oracle.errors import ConfigError
from oracle.io.hashing import clear_hash_cache
from oracle.workflow.provenance.artifact_diff import compare_artifacts
from oracle.workflow.plan import rule_config_keys
from oracle.workflow.provenance import write_record
from oracle.workflow.provenance.rebuild import chain, run_jobs, sample_jobs
from oracle.workflow.provenance.stale import PlannedJob, overwrite_problems, stale_reasons, stale_summary

REPO = Path(__file__).resolve().parents[1]
RUN = "results/r"


# ----------------------------------------------------------------------------- artifact_diff
def _pair(tmp_path, name, a, b):
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    for side, data in (("a", a), ("b", b)):
        p = tmp_path / side / name
        p.write_text(data) if isinstance(data, str) else p.write_bytes(data)
    return tmp_path / "a" / name, tmp_path / "b" / name


def test_verdicts_of_json_files(tmp_path):
    same = json.dumps({"acc": 0.5, "train_seconds": 1.0})
    assert compare_artifacts(*_pair(tmp_path, "m.json", same, same)) == ("identical", "")
    v, d = compare_artifacts(*_pair(tmp_path, "m.json", same, json.dumps({"acc": 0.5, "train_seconds": 2.0})))
    assert v == "same content" and "wall-clock field train_seconds" in d
    v, d = compare_artifacts(*_pair(tmp_path, "m.json", same, json.dumps({"acc": 0.5 * (1 + 1e-7), "train_seconds": 1.0})))
    assert v == "within precision" and "float32 rounding" in d
    v, d = compare_artifacts(*_pair(tmp_path, "m.json", same, json.dumps({"acc": 0.6, "train_seconds": 1.0})))
    assert v == "mismatch" and d == "acc: 0.5, rebuilt 0.6"


def test_verdicts_of_csv_and_text(tmp_path):
    a = "arch,acc,train_seconds\nx,0.5,1.0\n"
    assert compare_artifacts(*_pair(tmp_path, "runs.csv", a, a.replace("1.0", "3.0")))[0] == "same content"
    assert compare_artifacts(*_pair(tmp_path, "runs.csv", a, a.replace("0.5", "0.7")))[0] == "mismatch"
    v, d = compare_artifacts(*_pair(tmp_path, "t.tex", "a\nb\n", "a\nc\n"))
    assert v == "mismatch" and d.startswith("line 2:")
    assert compare_artifacts(tmp_path / "a" / "t.tex", tmp_path / "nowhere.tex") == ("mismatch", "not rebuilt")


def _shard(path: Path, loglik: np.ndarray, bound: float, code: str = "c1") -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("loglik", data=loglik)
        f.create_dataset("x", data=np.ones((len(loglik), 2), np.float32))
        f.attrs.update({"precision_max_abs_dlogp": bound, "code_version": code, "seed": 0})


def test_verdicts_of_shards_use_their_recorded_precision_bound(tmp_path):
    ll = np.full((4, 3), -50.0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "s.h5", tmp_path / "b" / "s.h5"
    _shard(a, ll, 1e-5)
    _shard(b, ll, 1e-5, code="c2")
    v, d = compare_artifacts(a, b)
    assert v == "same content" and "attribute code_version" in d
    _shard(b, ll + 2e-5, 1e-5)
    v, d = compare_artifacts(a, b)
    assert v == "within precision" and "recorded bound" in d
    _shard(b, ll + 3.0, 1e-5)
    v, d = compare_artifacts(a, b)
    assert v == "mismatch" and d.startswith("loglik: max |d| 3")


# ----------------------------------------------------------------------------- rebuild's job graph
def _made(path: Path, rule: str, wildcards=None, inputs=()):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{rule} {wildcards}")
    write_record(path, rule=rule, wildcards=wildcards or {}, config={}, config_keys=[], inputs=list(inputs))
    return path


def test_run_jobs_and_the_chain_behind_an_artifact(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train = _made(tmp_path / RUN / "data/train.h5", "data")
    test = _made(tmp_path / RUN / "data/test.h5", "data")
    flow = _made(tmp_path / RUN / "oracle/flow.pt", "oracle_train", inputs=[train])
    s0 = _made(tmp_path / RUN / "samples/base/shard-0000.h5", "sample_shard", {"world": "base", "shard": "0000"}, [flow])
    s1 = _made(tmp_path / RUN / "samples/base/shard-0001.h5", "sample_shard", {"world": "base", "shard": "0001"}, [flow])
    other = _made(tmp_path / RUN / "samples/hot/shard-0000.h5", "sample_shard", {"world": "hot", "shard": "0000"}, [flow])
    merged = _made(tmp_path / RUN / "samples/base/all.h5", "merge_samples", {"world": "base"}, [s0, s1])
    jobs = run_jobs(tmp_path / RUN)
    assert len(jobs) == 6  # data (two outputs) is one job
    [data] = [j for j in jobs.values() if j.rule == "data"]
    assert sorted(p.name for p in data.outputs) == ["test.h5", "train.h5"] and test in data.outputs
    got = chain(merged, jobs)
    assert [j.rule for j in got][0] == "merge_samples" and {j.rule for j in got} == {
        "merge_samples", "sample_shard", "oracle_train", "data"}
    assert all(other not in j.outputs for j in got)
    assert len(sample_jobs(got, 2, seed=0)) == 2 and sample_jobs(got, 2, 0) == sample_jobs(got, 2, 0)
    assert sample_jobs(got, 99, 0) == got


# ----------------------------------------------------------------------------- stale
def _config():
    return {"run": "r", "seed": 0, "data": {"kind": "digits"}, "experiments": {}}


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clear_hash_cache()
    return tmp_path


def test_stale_reasons_name_the_changed_key_and_the_missing_output(run):
    cfg = _config()
    train = run / RUN / "data/train.h5"
    train.parent.mkdir(parents=True)
    train.write_text("x")
    write_record(train, rule="data", config=cfg, config_keys=rule_config_keys(cfg, "data"))
    test = run / RUN / "data/test.h5"
    test.write_text("y")
    write_record(test, rule="data", config=cfg, config_keys=rule_config_keys(cfg, "data"))
    job = PlannedJob("data", (f"{RUN}/data/train.h5", f"{RUN}/data/test.h5"), tuple(rule_config_keys(cfg, "data")), False)
    assert stale_reasons([job], cfg) == {}
    assert stale_reasons([job], {**cfg, "seed": 1}) == {
        0: ["seed was 0, is 1"]}
    changed = {**cfg, "data": {"kind": "digits", "max_per_class": 5}}
    assert stale_reasons([job], changed)[0] == ["data.max_per_class was <missing>, is 5"]
    test.unlink()
    assert stale_reasons([job], cfg) == {0: [f"{RUN}/data/test.h5 is missing beside its record"]}
    Path(f"{test}.prov.json").unlink()
    assert stale_reasons([job], cfg) == {}  # a missing output without a record is Snakemake's to decide
    Path(f"{train}.prov.json").unlink()
    assert stale_reasons([job], {**cfg, "seed": 1}) == {}  # not this run's: the jobs reading it refuse it
    needrun = PlannedJob("data", job.outputs, job.config_keys, True)
    assert stale_reasons([needrun], {**cfg, "seed": 1}) == {}  # Snakemake runs it anyway
    lines = stale_summary([job], {0: ["seed was 0, is 1"]})
    assert len(lines) == 2 and "1 job(s)" in lines[0] and re.search(r"seed was 0, is 1: 1 job\(s\) \(rule data", lines[1])


def test_a_kept_output_gone_with_its_record_is_rebuilt_when_a_record_lists_it(run):
    """Issue 38 case 2: a job server killed during training took model.pt and history.json with
    their records; the predictions made from them stayed, so the plain rerun ran nothing and
    the kept model never came back. The records of the predictions list it: it is rebuilt."""
    cfg = _config()
    model = run / RUN / "model.pt"
    model.parent.mkdir(parents=True)
    model.write_text("weights")
    write_record(model, rule="data", config=cfg, config_keys=rule_config_keys(cfg, "data"))
    pred = run / RUN / "predictions.h5"
    pred.write_text("p")
    write_record(pred, rule="data", config=cfg, config_keys=rule_config_keys(cfg, "data"), inputs=[f"{RUN}/model.pt"])
    keys = tuple(rule_config_keys(cfg, "data"))
    train = PlannedJob("train_classifier", (f"{RUN}/model.pt",), keys, False)
    predict = PlannedJob("predict_classifier", (f"{RUN}/predictions.h5",), keys, False)
    model.unlink()
    Path(f"{model}.prov.json").unlink()
    assert stale_reasons([train, predict], cfg) == {
        0: [f"{RUN}/model.pt is missing and the records of files made from it list it"]}
    assert stale_reasons([train], cfg) == {}  # nothing made from it: Snakemake's to decide


def test_the_report_refuses_results_that_are_not_this_configs(run):
    """Issue 38 case 3: `snakemake --report` over a changed config said "Report created", showing
    the new lr beside numbers of models trained with the old one. `report_error` is its one line."""
    from oracle.workflow.provenance.stale import report_error

    cfg = _config()
    train = run / RUN / "data/train.h5"
    train.parent.mkdir(parents=True)
    train.write_text("x")
    write_record(train, rule="data", config=cfg, config_keys=rule_config_keys(cfg, "data"))
    data = PlannedJob("data", (f"{RUN}/data/train.h5",), tuple(rule_config_keys(cfg, "data")), False)
    alias = PlannedJob("all", (), None, True)  # a target rule without outputs always "runs"
    assert report_error([data, alias], stale_reasons([data, alias], cfg)) is None
    jobs = [data, alias]
    err = report_error(jobs, stale_reasons(jobs, {**cfg, "seed": 1}))
    assert err.startswith("the report would show results that are not this config's: seed was 0, is 1: 1 job(s) "
                          "(rule data, e.g. results/") and err.endswith("then --report") and "\n" not in err
    # jobs Snakemake would run (its metadata saw a changed setting): named where the chain starts
    model = PlannedJob("train", (f"{RUN}/model.pt",), ("x",), True, inputs=(f"{RUN}/data/train.h5",))
    table = PlannedJob("table", (f"{RUN}/table.csv",), ("x",), True, inputs=(f"{RUN}/model.pt",))
    err = report_error([table, data, model], {})
    assert "2 job(s) are still to run (rule train, e.g. results/" in err


def test_overwrite_problems_refuse_a_linked_run_of_another_checkout(run, tmp_path_factory, monkeypatch):
    other = tmp_path_factory.mktemp("other")
    monkeypatch.chdir(other)
    cfg = _config()
    (other / RUN).mkdir(parents=True)
    for name in ("config.yaml", "data/train.h5"):
        p = other / RUN / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(cfg))
        write_record(p, rule="effective_config", config=cfg, config_keys=list(cfg))
    monkeypatch.chdir(run)
    (run / "results").mkdir()
    (run / RUN).symlink_to(other / RUN)
    job = PlannedJob("data", (f"{RUN}/data/train.h5",), ("data", "seed"), True)
    [line] = overwrite_problems([job], RUN)
    assert line.startswith(f"{RUN} leads to another run's results") and "cp -a" in line
    assert overwrite_problems([PlannedJob("data", job.outputs, job.config_keys, False)], RUN) == []


# ----------------------------------------------------------------------------- rule keys
def _rule_blocks() -> dict[str, str]:
    """{rule name: its text} of every rule in the Snakefile and rules/*.smk."""
    out = {}
    for f in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        text = f.read_text()
        for m in re.finditer(r"^\s*rule (\w+):\n(.*?)(?=^\s*rule \w+:|^\S|\Z)", text, re.S | re.M):
            out[m.group(1)] = m.group(2)
        for m in re.finditer(r"^\s*rule:\n\s*name:\n\s*(f?\"[^\"]+\")(.*?)(?=^\s*rule|^\S|\Z)", text, re.S | re.M):
            out[m.group(1)] = m.group(2)
    return out


def test_every_rule_that_writes_records_reads_its_keys_from_the_one_table():
    """Each rule with a script declares params.config_keys=declared_keys("<its own name>"), so the
    rules, the jobs' input checks, the start-of-run check and the audit read one declaration."""
    blocks = _rule_blocks()
    scripted = {name: body for name, body in blocks.items() if "script:" in body}
    assert len(scripted) >= 20
    for name, body in scripted.items():
        want = 'declared_keys(f"{_kind}_collect")' if "_collect" in name else f'declared_keys("{name}")'
        assert f"config_keys={want}" in body, f"rule {name} does not read its keys from the table"
        if "_collect" not in name:
            assert name in rule_config_keys.__globals__["_RULES"], name


def test_rule_keys_of_the_smoke_config():
    from oracle.workflow.provenance.audit import load_config

    cfg = load_config(REPO / "tests/smoke/config.yaml")
    assert rule_config_keys(cfg, "data") == ["data", "seed"]
    keys = rule_config_keys(cfg, "train_classifier", {"experiment": "scaling", "arch": "test_vit", "cell": "N50", "seed": "0"})
    assert "classifiers.training.lr" in keys or "classifiers.training" in keys or any("training" in k for k in keys)
    assert rule_config_keys(cfg, "scaling_collect", {"experiment": "scaling"})
    with pytest.raises(ConfigError, match="no experiment named 'gone'"):
        rule_config_keys(cfg, "experiment_table", {"experiment": "gone", "kind": "scaling", "artifact": "x"})
    with pytest.raises(ConfigError, match="'bogus' is not a rule of this workflow"):
        rule_config_keys(cfg, "bogus", {})


def test_a_test_set_larger_than_the_world_names_its_key(tmp_path, capsys):
    """Issue 31 case 8: splits.test_size=10000 is reported as splits.test_size, not as the experiment's world."""
    from oracle.workflow.plan.config import main

    cfg = yaml.safe_load((REPO / "tests/smoke/config.yaml").read_text())
    cfg["splits"]["test_size"] = 10000
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main([str(path)]) == 1
    assert "config key 'splits.test_size': a test set of 10000 leaves world 'base'" in capsys.readouterr().out


# ----------------------------------------------------------------------------- re-scored rows
def test_rescored_rows_are_distinct_and_reproducible():
    from oracle.workflow.provenance.audit_shards import _rows

    a = _rows(100, 8, seed=0, world_index=0, shard=1)
    assert len(set(a.tolist())) == 8 and (a == _rows(100, 8, 0, 0, 1)).all() and not (a == _rows(100, 8, 0, 0, 2)).all()
    assert _rows(5, 8, 0, 0, 0).tolist() == [0, 1, 2, 3, 4]
