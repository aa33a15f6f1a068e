"""Issue 31, fast: the pieces behind the start-of-run check (oracle.workflow.provenance.stale), the
rebuild's verdicts (oracle.tools.artifact_diff), its job graph (oracle.tools.rebuild),
the rules' params as the one source of what a job depends on (oracle.workflow.provenance.params)
and the shard re-scoring's rows. The
end-to-end cases run on a smoke run in tests/test_integrity_workflow.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

from oracle.io.hashing import clear_hash_cache
from oracle.tools.artifact_diff import compare_artifacts
from oracle.workflow.provenance import write_record
from oracle.tools.rebuild import chain, run_jobs, sample_jobs
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
    write_record(path, rule=rule, wildcards=wildcards or {}, params={}, inputs=list(inputs))
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
#: the params of a data job (rules/data.smk), as `job_params` stores them
DATA = {"data": {"kind": "digits"}, "seed": 0}


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    clear_hash_cache()
    return tmp_path


def _data_job(params=DATA, needrun=False):
    return PlannedJob("data", (f"{RUN}/data/train.h5", f"{RUN}/data/test.h5"), params, needrun)


def test_stale_reasons_name_the_changed_param_and_the_missing_output(run):
    train = run / RUN / "data/train.h5"
    train.parent.mkdir(parents=True)
    train.write_text("x")
    write_record(train, rule="data", params=DATA)
    test = run / RUN / "data/test.h5"
    test.write_text("y")
    write_record(test, rule="data", params=DATA)
    assert stale_reasons([_data_job()]) == {}
    assert stale_reasons([_data_job({**DATA, "seed": 1})]) == {0: ["params seed was 0, is 1"]}
    changed = {**DATA, "data": {"kind": "digits", "max_per_class": 5}}
    assert stale_reasons([_data_job(changed)])[0] == ["params data.max_per_class was <missing>, is 5"]
    # a param the rule no longer passes is a difference too
    assert stale_reasons([_data_job({"data": DATA["data"]})])[0] == ["params seed was 0, is <missing>"]
    # Snakemake's params trigger off: settings are not compared
    assert stale_reasons([_data_job({**DATA, "seed": 1})], settings=False) == {}
    test.unlink()
    assert stale_reasons([_data_job()]) == {0: [f"{RUN}/data/test.h5 is missing beside its record"]}
    Path(f"{test}.prov.json").unlink()
    assert stale_reasons([_data_job()]) == {}  # a missing output without a record is Snakemake's to decide
    Path(f"{train}.prov.json").unlink()
    assert stale_reasons([_data_job({**DATA, "seed": 1})]) == {}  # not this run's: the jobs reading it refuse it
    assert stale_reasons([_data_job({**DATA, "seed": 1}, needrun=True)]) == {}  # Snakemake runs it anyway
    lines = stale_summary([_data_job()], {0: ["params seed was 0, is 1"]})
    assert len(lines) == 2 and "1 job(s)" in lines[0] and re.search(
        r"params seed was 0, is 1: 1 job\(s\) \(rule data", lines[1])


def test_a_record_without_params_is_stale(run):
    """A record written before records kept their job's params (record_version 1: ``config``
    and ``config_keys``) cannot say what it was made under: its job is rerun, saying why."""
    train = run / RUN / "data/train.h5"
    train.parent.mkdir(parents=True)
    train.write_text("x")
    rec_path = write_record(train, rule="data", params=DATA)
    rec = json.loads(rec_path.read_text())
    del rec["params"], rec["params_sha256"]
    rec.update(record_version=1, config=DATA, config_keys=["data", "seed"])
    rec_path.write_text(json.dumps(rec))
    job = PlannedJob("data", (f"{RUN}/data/train.h5",), DATA, False)
    assert stale_reasons([job]) == {0: ["its record was written before records kept their job's params "
                                        "(record_version 1)"]}


def test_a_kept_output_gone_with_its_record_is_rebuilt_when_a_record_lists_it(run):
    """Issue 38 case 2: a job server killed during training took model.pt and history.json with
    their records; the predictions made from them stayed, so the plain rerun ran nothing and
    the kept model never came back. The records of the predictions list it: it is rebuilt."""
    model = run / RUN / "model.pt"
    model.parent.mkdir(parents=True)
    model.write_text("weights")
    write_record(model, rule="train_classifier", params=DATA)
    pred = run / RUN / "predictions.h5"
    pred.write_text("p")
    write_record(pred, rule="predict_classifier", params=DATA, inputs=[f"{RUN}/model.pt"])
    train = PlannedJob("train_classifier", (f"{RUN}/model.pt",), DATA, False)
    predict = PlannedJob("predict_classifier", (f"{RUN}/predictions.h5",), DATA, False)
    model.unlink()
    Path(f"{model}.prov.json").unlink()
    assert stale_reasons([train, predict]) == {
        0: [f"{RUN}/model.pt is missing and the records of files made from it list it"]}
    assert stale_reasons([train]) == {}  # nothing made from it: Snakemake's to decide


def test_the_report_refuses_results_that_are_not_this_configs(run):
    """Issue 38 case 3: `snakemake --report` over a changed config said "Report created", showing
    the new lr beside numbers of models trained with the old one. `report_error` is its one line."""
    from oracle.workflow.provenance.stale import report_error

    train = run / RUN / "data/train.h5"
    train.parent.mkdir(parents=True)
    train.write_text("x")
    write_record(train, rule="data", params=DATA)
    data = PlannedJob("data", (f"{RUN}/data/train.h5",), DATA, False)
    alias = PlannedJob("all", (), None, True)  # a target rule without outputs always "runs"
    assert report_error([data, alias], stale_reasons([data, alias])) is None
    jobs = [PlannedJob("data", data.outputs, {**DATA, "seed": 1}, False), alias]
    err = report_error(jobs, stale_reasons(jobs))
    assert err.startswith("the report would show results that are not this config's: params seed was 0, is 1: "
                          "1 job(s) (rule data, e.g. results/") and err.endswith("then --report") and "\n" not in err
    # jobs Snakemake would run (its metadata saw a changed setting): named where the chain starts
    model = PlannedJob("train", (f"{RUN}/model.pt",), {}, True, inputs=(f"{RUN}/data/train.h5",))
    table = PlannedJob("table", (f"{RUN}/table.csv",), {}, True, inputs=(f"{RUN}/model.pt",))
    err = report_error([table, data, model], {})
    assert "2 job(s) are still to run (rule train, e.g. results/" in err


def test_overwrite_problems_refuse_a_linked_run_of_another_checkout(run, tmp_path_factory, monkeypatch):
    other = tmp_path_factory.mktemp("other")
    monkeypatch.chdir(other)
    cfg = {"run": "r", "seed": 0}
    (other / RUN).mkdir(parents=True)
    for name in ("config.yaml", "data/train.h5"):
        p = other / RUN / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(cfg))
        write_record(p, rule="effective_config", params={"config": cfg})
    monkeypatch.chdir(run)
    (run / "results").mkdir()
    (run / RUN).symlink_to(other / RUN)
    job = PlannedJob("data", (f"{RUN}/data/train.h5",), DATA, True)
    [line] = overwrite_problems([job], RUN)
    assert line.startswith(f"{RUN} leads to another run's results") and "cp -a" in line
    assert overwrite_problems([PlannedJob("data", job.outputs, DATA, False)], RUN) == []


# ----------------------------------------------------------------------------- params, the one source
def _config_reads(script: Path) -> list[str]:
    """Where a rule script reads the config itself: ``<name>.config`` of the snakemake object
    (``sm.config``, ``snakemake.config``, ``job.config``) or ``<obj>.config[...]``, as
    "line: source" strings."""
    import ast

    tree = ast.parse(script.read_text())
    return [f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "config" and isinstance(node.value, ast.Name)]


#: The one read of the config a script may make: a check of the worlds' priors against the
#: class count the data has, before any flow is trained. It shapes no output (a wrong prior
#: fails the job), and as a param it would make a changed prior rerun the data job and with it
#: every flow and classifier (Snakemake reruns what follows a rerun job).
CHECK_ONLY = {"data.py": ["sm.config"]}


def test_rule_scripts_read_the_config_only_through_their_params():
    """A job depends on its params, its inputs and its code, and on nothing else of the config:
    the record keeps its params and the start check and the audit compare them. A script that
    read the config itself would depend on what no record keeps."""
    scripts = sorted((REPO / "scripts").glob("*.py"))
    assert len(scripts) >= 20
    reads = {s.name: [r.split(": ", 1)[1] for r in _config_reads(s)] for s in scripts}
    assert {name: r for name, r in reads.items() if r} == CHECK_ONLY
    assert "check_prior_length(sm.config," in (REPO / "scripts/data.py").read_text()


def test_the_config_read_check_finds_a_config_read(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("def main(sm):\n    return sm.config['seed'], sm.params.seed\n")
    assert _config_reads(script) == ["2: sm.config"]
    script.write_text("def main(sm):\n    return sm.params.config\n")  # a param named config is a param
    assert _config_reads(script) == []


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
    from oracle.tools.audit_shards import _rows

    a = _rows(100, 8, seed=0, world_index=0, shard=1)
    assert len(set(a.tolist())) == 8 and (a == _rows(100, 8, 0, 0, 1)).all() and not (a == _rows(100, 8, 0, 0, 2)).all()
    assert _rows(5, 8, 0, 0, 0).tolist() == [0, 1, 2, 3, 4]
