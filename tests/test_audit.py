"""Audit: a tiny fake chain raw data -> data -> oracle -> samples -> (metrics | constants ->
numbers part -> numbers.json). The params the workflow computes for each job now
(`workflow_params`, a dry run of the workflow) are this file's `NOW`: the chain is no
workflow's; tests/test_provenance_workflow.py audits a real run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from oracle.io.hashing import clear_hash_cache
from oracle.measures.world_constants import world_numbers
from oracle.report.numbers import merge_numbers
from oracle.tools.audit import audit, check_numbers, load_numbers, main
from oracle.workflow.provenance import read_record, record_path, write_record
from oracle.workflow.provenance.params import clear_answers

RUN = "results/demo"
METRICS = f"{RUN}/classifiers/base/test_resnet/N50-hard-0123abcd/seed0/metrics/base.json"
SAMPLES = f"{RUN}/samples/base/all.h5"
CONSTANTS = f"{RUN}/samples/base/constants.json"
PART = f"{RUN}/numbers/world.base.json"
KEY = "world.base.bayes_error"
WORLD = {"all": {"aleatoric": {"mean": 2.0766, "se": 0.0099}, "bayes_accuracy": {"mean": 0.214, "se": 0.0042},
                 "bayes_error": {"mean": 0.786, "se": 0.0042},
                 "mutual_information": {"bits": 0.326, "h_y_bits": 3.3219, "normalized": 0.0982, "se": 0.0143},
                 "n": 500, "num_classes": 10}, "world": "base"}
SMOKE = Path(__file__).resolve().parent / "smoke" / "config.yaml"


def _config() -> dict:
    """The smoke config as a run's effective config, reading its data from raw/digits.npz."""
    from oracle.workflow.plan.config import effective_config

    cfg = effective_config(SMOKE)
    cfg["run"] = "demo"
    cfg["data"] = {**cfg["data"], "kind": "npz", "root": "raw/digits.npz"}
    return cfg


CONFIG = _config()
CLASSIFIER = {"world": "base", "arch": "test_resnet", "condition": "N50-hard-0123abcd", "seed": "0", "evalset": "base"}


#: The params each job of the chain ran with (its rule's params, as the workflow hands them)
PARAMS = {f"{RUN}/config.yaml": {"config": CONFIG},
          f"{RUN}/data/train.h5": {"data": CONFIG["data"], "seed": 0},
          f"{RUN}/oracle/flow.pt": {"oracle": CONFIG["oracle"], "seed": 0, "device": "cpu"},
          SAMPLES: {}, METRICS: {"training": {"lr": 0.001, "n": 50}, "device": "cpu"},
          CONSTANTS: {"world_kind": "flow"}, PART: {}, f"{RUN}/numbers.json": {"paper": {}}}


def _record(path, rule, wildcards=None, **kwargs):
    """The record the rule's job writes: the params it ran with."""
    write_record(path, rule=rule, wildcards=wildcards or {}, params=PARAMS[str(path)], **kwargs)


@pytest.fixture(autouse=True)
def now(monkeypatch):
    """{output: params of its job now} the workflow would give (PARAMS unless a test changes
    it); the calls it got in ``now.calls``."""
    table = type("Now", (dict,), {})(json.loads(json.dumps(PARAMS)))
    table.calls = []

    def fake(workdir, configfile, targets):
        table.calls.append((Path(workdir), Path(configfile), list(targets)))
        return table

    monkeypatch.setattr("oracle.workflow.provenance.params.workflow_params", fake)
    clear_answers()
    return table


def _write(path, data: bytes):
    from pathlib import Path

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


@pytest.fixture
def chain(tmp_path, monkeypatch):
    """Build the chain in tmp_path (the working directory) and return tmp_path."""
    monkeypatch.chdir(tmp_path)
    clear_hash_cache()
    _write("raw/digits.npz", b"raw pixels " * 50)
    _write(f"{RUN}/config.yaml", yaml.safe_dump(CONFIG).encode())
    _write(f"{RUN}/data/train.h5", b"train split")
    _record(f"{RUN}/data/train.h5", "data", inputs=["raw/digits.npz"], seed=0)
    _write(f"{RUN}/oracle/flow.pt", b"flow weights")
    _record(f"{RUN}/oracle/flow.pt", "oracle_train", inputs=[f"{RUN}/data/train.h5"], seed=0)
    _write(SAMPLES, b"samples")
    _record(SAMPLES, "merge_samples", {"world": "base"}, inputs=[f"{RUN}/oracle/flow.pt"], seed=1)
    _write(METRICS, b'{"acc": 0.9}')
    _record(METRICS, "predict_classifier", CLASSIFIER, inputs=[SAMPLES, f"{RUN}/data/train.h5"], seed=0)
    # the numbers layer as the workflow writes it: constants -> part -> numbers.json
    _write(CONSTANTS, json.dumps(WORLD).encode())
    _record(CONSTANTS, "world_constants", {"world": "base"}, inputs=[SAMPLES])
    part = world_numbers(WORLD, CONSTANTS)
    _write(PART, json.dumps(part).encode())
    _record(PART, "world_numbers", {"world": "base"}, inputs=[CONSTANTS])
    _write(f"{RUN}/numbers.json", json.dumps(merge_numbers({"world.base": part})).encode())
    _record(f"{RUN}/numbers.json", "numbers", inputs=[PART])
    return tmp_path


def _artifacts(node, seen=None):
    seen = set() if seen is None else seen
    seen.add(node["artifact"])
    for inp in node.get("inputs", []):
        if "node" in inp:
            _artifacts(inp["node"], seen)
    return seen


def test_untouched_chain_passes_and_reaches_raw_data(chain, capsys):
    assert main([KEY, "--run", RUN, "--full"]) == 0
    out = capsys.readouterr().out
    for part in (CONSTANTS, "samples/base/all.h5", "oracle/flow.pt", "data/train.h5", "raw/digits.npz"):
        assert part in out
    assert "raw input (no provenance record)" in out and "0 flagged" in out
    rep = audit(KEY, run=RUN)
    assert rep["ok"] and rep["tree"]["artifact"] == CONSTANTS
    assert _artifacts(rep["tree"]) == {CONSTANTS, SAMPLES, f"{RUN}/oracle/flow.pt",
                                       f"{RUN}/data/train.h5", "raw/digits.npz"}
    assert rep["artifacts"] == 5
    assert rep["number"]["value"] == 0.786 and rep["number"]["unit"] == "fraction"
    rep = audit(METRICS)
    assert rep["ok"] and rep["artifacts"] == 5  # train.h5 reached twice, audited once


def test_nested_number_keys():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "numbers.json"
        path.write_text(json.dumps({"acc": {"resnet": {"N100": {"value": 0.9, "artifact": METRICS}}}, "bare": 3.0}))
        assert load_numbers(path) == {"acc.resnet.N100": {"value": 0.9, "artifact": METRICS}, "bare": {"value": 3.0}}


def test_json_output(chain, capsys):
    assert main([KEY, "--run", RUN, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["tree"]["rule"] == "world_constants" and rep["flags"] == []
    samples = rep["tree"]["inputs"][0]
    assert samples["status"] == "ok" and samples["node"]["rule"] == "merge_samples"
    flow = samples["node"]["inputs"][0]
    assert flow["status"] == "ok" and flow["node"]["rule"] == "oracle_train"
    assert flow["node"]["params"] == PARAMS[f"{RUN}/oracle/flow.pt"] and flow["node"]["params_check"] == []


def test_changed_raw_byte_is_flagged(chain, capsys):
    raw = chain / "raw" / "digits.npz"
    data = bytearray(raw.read_bytes())
    data[7] ^= 1
    raw.write_bytes(bytes(data))
    clear_hash_cache()
    assert main([KEY, "--run", RUN]) == 1
    out = capsys.readouterr().out
    assert "FLAG" in out and "input raw/digits.npz changed" in out
    rep = audit(KEY, run=RUN)
    assert [f["artifact"] for f in rep["flags"]] == [f"{RUN}/data/train.h5"]


def test_changed_intermediate_is_flagged_twice(chain):
    (chain / RUN / "oracle" / "flow.pt").write_bytes(b"flow weightz")
    clear_hash_cache()
    rep = audit(SAMPLES)
    msgs = {(f["artifact"], f["message"].split(":")[0]) for f in rep["flags"]}
    assert (SAMPLES, f"input {RUN}/oracle/flow.pt changed") in msgs
    assert (f"{RUN}/oracle/flow.pt", "artifact changed since its record was written") in msgs
    assert not rep["ok"]


def test_params_change_is_flagged_only_where_it_matters(chain, now):
    """The params of each job of the chain now against those its record holds: a job whose
    params differ is flagged with each differing value, the others are not."""
    assert audit(KEY, run=RUN)["ok"]
    (workdir, configfile, targets), = now.calls
    assert workdir.resolve() == chain.resolve() and configfile == Path(RUN) / "config.yaml"
    assert targets == [CONSTANTS, f"{RUN}/numbers.json"]  # the artifact and the number's file
    # the answer covers every job of that DAG: another audit under the same config asks no more
    assert audit(f"{RUN}/data/train.h5", run=RUN)["ok"] and len(now.calls) == 1
    now[f"{RUN}/oracle/flow.pt"]["oracle"]["train"]["steps"] = 61
    rep = audit(KEY, run=RUN)
    assert [(f["artifact"], f["message"]) for f in rep["flags"]] == [
        (f"{RUN}/oracle/flow.pt", f"params oracle.train.steps was {CONFIG['oracle']['train']['steps']}, is 61")]
    # a param the rule hands its job now that the record lacks is a difference too
    now[f"{RUN}/data/train.h5"]["data"]["grayscale"] = True
    rep = audit(f"{RUN}/data/train.h5", configfile=RUN + "/config.yaml")
    assert [f["message"] for f in rep["flags"]] == ["params data.grayscale was <missing>, is true"]
    assert main([f"{RUN}/data/train.h5"]) == 1


def test_what_the_workflow_does_not_make_now_is_flagged(chain, now, monkeypatch):
    del now[f"{RUN}/oracle/flow.pt"]  # (an experiment or world removed from the config)
    rep = audit(SAMPLES)
    assert [(f["artifact"], f["message"].split(" (")[0]) for f in rep["flags"]] == [
        (f"{RUN}/oracle/flow.pt", "no job of the workflow makes it under the current config")]
    side = record_path(chain / RUN / "data/train.h5")  # a record of before params were kept
    rec = json.loads(side.read_text())
    del rec["params"]
    side.write_text(json.dumps(rec))
    assert any(f["message"].startswith("its record was written before records kept their job's params")
               for f in audit(f"{RUN}/data/train.h5")["flags"])

    def refuses(workdir, configfile, targets):
        from oracle.errors import ConfigError
        raise ConfigError("config key 'seed': must be an integer")

    monkeypatch.setattr("oracle.workflow.provenance.params.workflow_params", refuses)
    clear_answers()  # the same config bytes were answered above; a refusing workflow is a new process's view
    rep = audit(SAMPLES)
    assert not rep["ok"] and rep["flags"][0]["message"] == "params not compared: config key 'seed': must be an integer"


def test_number_key_errors_and_missing_record(chain, capsys):
    assert main(["world.base.bayes_eror", "--run", RUN]) == 2
    assert KEY in capsys.readouterr().err  # suggested as a close key
    (chain / "loose.txt").write_text("no record")
    rep = audit("loose.txt")
    assert not rep["ok"] and "no provenance record" in rep["flags"][0]["message"]
    # without --run, the only results/*/numbers.json is used
    assert audit(KEY)["tree"]["artifact"] == CONSTANTS


def test_missing_input_is_flagged(chain):
    (chain / RUN / "data" / "train.h5").unlink()
    rep = audit(METRICS)
    assert any("input results/demo/data/train.h5 is missing" in f["message"] for f in rep["flags"])


def test_code_difference_warns_and_strict_fails(chain, capsys):
    side = record_path(chain / RUN / "oracle" / "flow.pt")
    rec = json.loads(side.read_text())
    rec["code"] = {"commit": "0" * 40, "dirty": False}
    side.write_text(json.dumps(rec))
    rep = audit(METRICS)
    assert rep["ok"] and any("commit 000000000000" in w["message"] for w in rep["warnings"])
    assert main([METRICS]) == 0
    assert "warning" in capsys.readouterr().out
    assert main([METRICS, "--strict-code"]) == 1


def test_package_versions_that_differ_warn_and_strict_fails(chain, capsys):
    """Issue 38 case 6: records whose torch, timm or numpy version was not the environment's
    passed `--strict-code`; they are reported in one line per artifact, as code drift is."""
    from oracle.workflow.provenance import package_drift, package_versions

    now = package_versions()
    assert package_drift({**now}) == [] and package_drift(None) == []
    assert package_drift({"torch": "0.0.1", "snakemake": "0.0.1", "numpy": now["numpy"]}) == \
        [f"torch 0.0.1 -> {now['torch']}"]  # snakemake runs the workflow, it shapes no result
    assert main([METRICS, "--strict-code"]) == 0
    side = record_path(chain / RUN / "oracle" / "flow.pt")
    rec = json.loads(side.read_text())
    rec["packages"] = {**rec["packages"], "torch": "1.0.0", "timm": "0.1.0"}
    side.write_text(json.dumps(rec))
    rep = audit(METRICS)
    [warning] = [w["message"] for w in rep["warnings"] if "packages" in w["message"]]
    assert rep["ok"] and f"torch 1.0.0 -> {now['torch']}" in warning and f"timm 0.1.0 -> {now['timm']}" in warning
    assert main([METRICS]) == 0
    capsys.readouterr()
    assert main([METRICS, "--strict-code"]) == 1
    assert f"packages differ from what made it: torch 1.0.0 -> {now['torch']}" in capsys.readouterr().out


def test_the_start_check_notes_package_drift_in_one_line(chain):
    from oracle.workflow.provenance.stale import PlannedJob, package_drift_note

    flow = f"{RUN}/oracle/flow.pt"
    job = PlannedJob(rule="oracle_train", outputs=(flow,), params=PARAMS[flow], needrun=False)
    assert package_drift_note([job]) is None
    side = record_path(chain / flow)
    rec = json.loads(side.read_text())
    rec["packages"] = {**rec["packages"], "numpy": "1.0.0"}
    side.write_text(json.dumps(rec))
    note = package_drift_note([job])
    assert note.startswith("note: 1 existing output(s) were made with other package versions (numpy 1.0.0 -> ")
    assert "\n" not in note and "audit --strict-code" in note
    assert package_drift_note([PlannedJob(rule="oracle_train", outputs=(flow,), params=PARAMS[flow],
                                          needrun=True)]) is None  # rerun anyway: nothing to note


def test_moved_tree_still_audits(chain, monkeypatch):
    new = chain.parent / (chain.name + "-moved")
    chain.rename(new)
    monkeypatch.chdir(new.parent)
    rep = audit(str(new / METRICS))
    assert rep["ok"], rep["flags"]
    assert "raw/digits.npz" in _artifacts(rep["tree"])


def test_check_numbers(chain, capsys):
    numbers = chain / RUN / "numbers.json"
    assert check_numbers(numbers) == []
    assert check_numbers(numbers, require_record=True) == []
    data = json.loads(numbers.read_text())
    data["ghost"] = {"value": 1.0, "artifact": f"{RUN}/tables/ghost.csv"}
    data["orphan"] = {"value": 2.0}
    data["bare"] = 3.0
    numbers.write_text(json.dumps(data))
    problems = check_numbers(numbers)
    assert f"ghost: artifact {RUN}/tables/ghost.csv does not exist" in problems
    assert "orphan: entry names no 'artifact'" in problems
    assert "bare: entry names no 'artifact'" in problems
    # nor does any source give them
    assert {f"{k}: in numbers.json but not re-derived from any source" for k in ("ghost", "orphan", "bare")} <= set(problems)
    assert len(problems) == 6
    assert main(["--check-numbers", "--run", RUN]) == 1
    assert "ghost" in capsys.readouterr().out
    # numbers.json itself changed: its own record flags it when audited as an artifact
    assert audit(f"{RUN}/numbers.json")["flags"][0]["message"].startswith("artifact changed")
    assert read_record(numbers)["rule"] == "numbers"


# ----------------------------------------------------------------------------- the summary (issue 48 item 8)
def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_default_output_is_a_summary_of_the_chain(chain, capsys):
    """One line per level, from the number to the raw data, and the verdict; --full the whole chain."""
    assert main([KEY, "--run", RUN]) == 0
    lines = _lines(capsys)
    assert len(lines) <= 40, lines
    level = {ln.split()[0] if not ln.startswith("read from") else "read": ln for ln in lines if ln}
    assert level["number"].startswith(f"number {KEY!r} = 0.786")
    assert level["read"] == f"read from    {RUN}/numbers.json <- {PART}  ok"
    assert level["rows"] == f"rows         {CONSTANTS}  [rule world_constants]  ok"
    assert level["inputs"] == f"inputs       {SAMPLES}  [rule merge_samples]  ok"
    assert level["upstream"] == f"upstream     {RUN}/data/train.h5  [rule data]  ok"
    assert level["checkpoint"] == f"checkpoint   {RUN}/oracle/flow.pt  [rule oracle_train]  ok"
    assert level["raw"].startswith("raw data     raw/digits.npz  [raw, sha256 ") and level["raw"].endswith("ok")
    assert "problems: none" in lines and lines[-1].startswith("verdict: OK: 5 artifacts audited: 0 flagged")
    assert not any("params" in ln or "| " in ln for ln in lines)  # no record's details
    assert main([KEY, "--run", RUN, "--full"]) == 0
    full = _lines(capsys)
    assert f"    {SAMPLES}  [rule merge_samples]  ok" in "\n".join(full) and len(full) > len(lines)
    assert any(ln.strip().startswith("| params   ") for ln in full) and not any(ln.startswith("verdict") for ln in full)
    (chain / "loose.txt").write_text("no record")  # a target without a record is no raw data
    assert main(["loose.txt"]) == 1
    lines = _lines(capsys)
    assert "artifact     loose.txt  [no record]  FLAGGED" in lines and "raw data     none reached" in lines
    assert "FLAG     loose.txt: no provenance record (expected a .prov.json sidecar)" in lines


def test_an_edited_number_shows_in_the_summary_and_fails(chain, capsys):
    """numbers.json edited by hand: the problems the full audit finds are the summary's, one line each."""
    path = chain / RUN / "numbers.json"
    data = json.loads(path.read_text())
    data[KEY]["value"] = 0.5  # (merge_numbers writes flat keys)
    path.write_text(json.dumps(data))
    clear_hash_cache()
    assert main([KEY, "--run", RUN]) == 1
    lines = _lines(capsys)
    flags = [ln for ln in lines if ln.startswith("FLAG")]
    assert len(lines) <= 40 and lines[-1].startswith("verdict: PROBLEMS: ")
    assert f"FLAG     {RUN}/numbers.json: artifact changed since its record was written" in "\n".join(flags)
    assert any("numbers.json has 0.5 for 'world.base.bayes_error' but its part world.base.json has 0.786" in f
               for f in flags), flags
    assert [ln for ln in lines if ln.startswith("read from")] == [
        f"read from    {RUN}/numbers.json <- {PART}  FLAGGED: {RUN}/numbers.json, {PART}"]
    assert len(flags) == len(audit(KEY, run=RUN)["flags"])


def _collected(n: int) -> tuple[str, list[str]]:
    """A table collected from `n` classifier records (seeds 1..n; seed 0 is the chain's), each
    made from the chain's samples, the records' params all {"device": "cpu"}: (table, metrics)."""
    metrics = [METRICS.replace("seed0", f"seed{i}") for i in range(1, n + 1)]
    for m in metrics:
        _write(m, b'{"acc": 0.9}')
        write_record(m, rule="predict_classifier", wildcards={**CLASSIFIER, "seed": m.split("seed")[-1].split("/")[0]},
                     params={"device": "cpu"}, inputs=[SAMPLES])
    table = f"{RUN}/scaling/scaling/data/runs.csv"
    _write(table, b"seed,acc\n" + b"".join(b"%d,0.9\n" % i for i in range(1, n + 1)))
    write_record(table, rule="scaling_collect", wildcards={"experiment": "scaling"}, params={"device": "cpu"},
                 inputs=metrics)
    return table, metrics


def test_many_problems_fit_the_screen_nearest_first(chain, capsys):
    """A table collected from 30 classifier records, none of which the workflow makes under the
    config now: 31 flags, the first ones on screen (the table's own first) and a count of the rest."""
    from oracle.tools.audit_text import SUMMARY_FLAGS

    table, _ = _collected(30)
    assert main([table]) == 1
    lines = _lines(capsys)
    flags = [ln for ln in lines if ln.startswith("FLAG")]
    assert len(lines) <= 40 and len(flags) == SUMMARY_FLAGS, lines
    assert flags[0].startswith(f"FLAG     {table}: no job of the workflow makes it")
    assert f"... and {31 - SUMMARY_FLAGS} more problems (--full lists every one)" in lines
    assert f"artifact     {table}  [rule scaling_collect, 30 rows]  FLAGGED" in lines
    assert f"inputs       30 files (30 predict_classifier): 30 FLAGGED" in lines
    assert lines[-1].startswith("verdict: PROBLEMS: 35 artifacts audited: 31 flagged")
    assert main([table, "--full"]) == 1
    assert sum(ln.startswith("FLAG") for ln in _lines(capsys)) == 31


def test_a_problem_shared_by_many_files_is_one_line_and_one_file_shows_two(chain, now, capsys):
    """The workflow now gives every classifier job device cuda: 30 flags with one message are one
    line; the table's 5 differing params show 2 lines, the rest counted on the second."""
    table, metrics = _collected(30)
    for m in metrics:
        now[m] = {"device": "cuda"}
    now[table] = {"device": "cpu", **{k: 1 for k in "abcde"}}
    assert main([table]) == 1
    lines = _lines(capsys)
    flags = [ln for ln in lines if ln.startswith("FLAG")]
    assert flags == [f"FLAG     {table}: params a was <missing>, is 1",
                     f"FLAG     {table}: params b was <missing>, is 1  (and 3 more problems of this file)",
                     f"FLAG     {metrics[0]}: params device was cpu, is cuda  (and 29 more artifacts)"], lines
    assert len(audit(table)["flags"]) == 35 and lines[-1].startswith("verdict: PROBLEMS: 35 artifacts audited: 35 flagged")
