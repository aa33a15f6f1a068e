"""Provenance you can audit (issue 5), end to end on the smoke workflow and in small pieces.

The slow tests read the session's one smoke run (tests/conftest.py: tests/smoke/config.yaml with
validation on, so Tables 3-4, Figure 4 and the validation numbers exist, and a second world);
tampering tests work on copies of its results.
The fast tests cover the record helpers, the params, numbers.tex and the atomic writes alone.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from oracle.io.raw_files import raw_data_inputs
from oracle.report.numbers import SPREAD_MACROS, tex_macro_name
from oracle.tools.audit import audit, check_numbers, load_numbers
from oracle.io.hashing import clear_hash_cache, file_sha256, path_sha256
from oracle.workflow.provenance.params import params_differ, params_hash, workflow_params
from oracle.workflow.provenance import read_record

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
RUN = "results/smoke"
NEWCOMMAND = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{([^{}]*)\}")


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def _model_dir(run: Path, arch: str, n: int, seed: int = 0) -> Path:
    """The folder of the scaling experiment's model of (arch, N, seed) in run folder `run`: named by
    what determines its weights (RunPaths.classifier_dir, from the run's effective config)."""
    from smoke_session import model_dir

    return model_dir(run, {"experiment": "scaling", "arch": arch, "cell": f"N{n}", "seed": seed})


def _audit_cli(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "oracle.tools.audit", *args], cwd=workdir,
                          capture_output=True, text=True, timeout=300)


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _digits_file() -> str:
    return str(raw_data_inputs({"kind": "digits"})[0][0])


def _same_file(a: str, b: str) -> bool:
    """One file under two names: a record names the raw data by the path its job saw, which
    differs from this process's where .venv is a link (a git worktree's shared venv)."""
    return Path(a).resolve() == Path(b).resolve()


# ============================================================================= the smoke run


@pytest.fixture(scope="module")
def smoke(smoke_run):
    """The session's one smoke run (tests/conftest.py), with validation on and Tables 3-4 and
    Figure 4 under their paper ids: (workdir, configfile)."""
    cfg = smoke_run.config
    assert cfg["validation"]["enabled"] and {"table3", "table4", "fig4"} <= set(cfg["paper"])
    return smoke_run.workdir, smoke_run.configfile


@pytest.fixture
def tamper(smoke, tmp_path):
    """A copy of the run's results folder to change; returns the copy's working directory."""
    work, _ = smoke
    shutil.copytree(work / "results", tmp_path / "results", symlinks=True)
    clear_hash_cache()
    return tmp_path


def _artifacts(run: Path) -> list[Path]:
    skip = {"logs", "benchmarks", "ckpt"}
    return sorted(p for p in run.rglob("*") if p.is_file() and not p.name.endswith(".prov.json")
                  and not skip.intersection(p.relative_to(run).parts))


@pytest.mark.slow
def test_every_artifact_has_a_complete_record(smoke, monkeypatch):
    work, configfile = smoke
    monkeypatch.chdir(work)
    run = work / RUN
    effective = yaml.safe_load((run / "config.yaml").read_text())
    artifacts = _artifacts(run)
    assert len(artifacts) >= 40
    now = workflow_params(work, configfile, ["all"])
    for art in artifacts:
        rec = read_record(art)
        shown = art.relative_to(work).as_posix()
        assert rec["id"] == shown and rec["artifact"]["sha256"] == file_sha256(art), shown
        assert rec["params_sha256"] == params_hash(rec["params"]), shown
        # the params its job ran with are those the workflow computes for that job now
        assert rec["params"] == now[shown], (shown, params_differ(rec["params"], now[shown]))
        for inp, h in rec["inputs"].items():
            assert path_sha256(Path(inp)) == h, (shown, inp)
        code = rec["code"]
        assert {"commit", "dirty", "files"} <= set(code) and "oracle/workflow/provenance/__init__.py" in code["files"], shown
        assert any(f.startswith("scripts/") for f in code["files"]), shown  # the rule's script
        assert rec["packages"]["torch"] and rec["packages"]["numpy"] and rec["device"]
        assert rec["wall_time_s"] is not None and rec["wall_time_s"] >= 0 and rec["started_utc"]
        if "seed" in rec["wildcards"]:
            assert rec["seed"] == int(rec["wildcards"]["seed"])
    # outputs of one job share one wall time
    walls = {read_record(run / "scaling" / "scaling" / "tables" / f"accuracy_vs_bayes.{e}")["wall_time_s"]
             for e in ("csv", "md", "tex")}
    assert len(walls) == 1
    # the data records name the raw data: scikit-learn's digits file and version
    import sklearn

    data = read_record(run / "data" / "train.h5")
    assert list(data["inputs"]) == [_digits_file()]
    assert data["extra"]["raw_data"]["scikit-learn"] == sklearn.__version__
    assert data["params"]["data"] == effective["data"] and "config" not in data
    # a classifier keeps the params of its own experiment and architecture (no display label)
    for name in ("model.pt", "metrics/base.json"):
        clf = read_record(_model_dir(run, "test_vit", 50) / name)
        assert clf["params"]["training"]["training"]["lr"] == effective["classifiers"]["training"]["lr"]
        assert "test_resnet" not in json.dumps(clf["params"])
    arch = read_record(_model_dir(run, "test_vit", 50) / "model.pt")["params"]["arch"]
    assert arch["input_size"] == effective["classifiers"]["archs"]["test_vit"]["input_size"] and "label" not in arch


@pytest.mark.slow
def test_untouched_run_audits_clean_to_data_and_checkpoint(smoke, monkeypatch):
    work, _ = smoke
    # by default one screen: a line per level of the chain, from the number to the raw data
    proc = _audit_cli(work, "scaling.accuracy.test_resnet", "--run", RUN)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) <= 40 and lines[-1].startswith("verdict: OK: ") and "problems: none" in lines, proc.stdout
    for level in (f"read from    {RUN}/numbers.json <- {RUN}/numbers/scaling.json  ok",
                  f"rows         {RUN}/scaling/scaling/data/runs.csv  [rule scaling_collect, ",
                  f"checkpoint   {RUN}/oracle/flow.pt  [rule oracle_train]  ok"):
        assert any(ln.startswith(level) for ln in lines), (level, proc.stdout)
    [raw] = [ln.split() for ln in lines if ln.startswith("raw data     ")]
    assert _same_file(raw[2], _digits_file()) and raw[3] == "[raw," and raw[-1] == "ok", proc.stdout
    assert any(ln.startswith("inputs  ") and "predict_classifier" in ln and ln.endswith(": all verified")
               for ln in lines), proc.stdout
    # the whole chain on request
    proc = _audit_cli(work, "scaling.accuracy.test_resnet", "--run", RUN, "--full")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    for part in ("number 'scaling.accuracy.test_resnet'", f"{RUN}/numbers.json  [rule numbers]",
                 f"{RUN}/numbers/scaling.json  [rule experiment_numbers]",
                 f"{RUN}/scaling/scaling/data/runs.csv  [rule scaling_collect]", "[rule predict_classifier]",
                 "[rule train_classifier]",
                 f"{RUN}/splits/base.h5  [rule make_splits]", f"{RUN}/samples/base/all.h5  [rule merge_samples]",
                 f"{RUN}/oracle/flow.pt  [rule oracle_train]", f"{RUN}/data/train.h5  [rule data]",
                 "raw input (no provenance record)", "0 flagged"):
        assert part in out, part
    [ends] = [ln for ln in out.splitlines() if ln.startswith("chain ends at raw data: ")]
    assert _same_file(ends.removeprefix("chain ends at raw data: "), _digits_file()), ends
    assert f"oracle checkpoint:      {RUN}/oracle/flow.pt" in out
    # every number's chain is clean and reaches both ends
    monkeypatch.chdir(work)
    keys = list(load_numbers(work / RUN / "numbers.json"))
    assert len(keys) > 30
    for key in keys:
        rep = audit(key, run=RUN)
        assert rep["ok"], (key, rep["flags"])
        assert len(rep["raw_inputs"]) == 1 and _same_file(rep["raw_inputs"][0], _digits_file()), key
        assert rep["oracle_checkpoints"] == [f"{RUN}/oracle/flow.pt"], key
    # figures and tables too
    for art in ("scaling/scaling/figures/scaling_panels.png", "scaling/scaling/figures/epistemic_curves.pdf",
                "validation/figures/nn_distances.png", "scaling/scaling/tables/epistemic_vs_n.csv",
                "validation/tables/summary.tex"):
        rep = audit(f"{RUN}/{art}")
        assert rep["ok"] and rep["raw_inputs"] and rep["oracle_checkpoints"], (art, rep["flags"])


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["data/train.h5", "samples/base/shard-0001.h5"])
def test_one_flipped_input_byte_is_flagged(tamper, victim):
    _flip_byte(tamper / RUN / victim)
    proc = _audit_cli(tamper, "world.base.aleatoric_floor", "--run", RUN)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    flags = [line for line in proc.stdout.splitlines() if line.startswith("FLAG")]
    assert any(f"{RUN}/{victim}: artifact changed since its record was written" in f for f in flags), flags
    assert any(f"input {RUN}/{victim} changed" in f for f in flags), flags
    rep = json.loads(_audit_cli(tamper, "world.base.aleatoric_floor", "--run", RUN, "--json").stdout)
    assert not rep["ok"] and {f["artifact"] for f in rep["flags"]} <= {
        f"{RUN}/{victim}", f"{RUN}/oracle/flow.pt", f"{RUN}/samples/base/all.h5"}


@pytest.mark.slow
def test_a_corrupted_world_stops_the_jobs_that_read_it(smoke, tamper):
    """One flipped byte in the frozen flow: the jobs downstream rerun (the file is newer) but
    each checks its inputs against their records first and stops with one line naming the
    file, instead of computing numbers from a world that is not the one recorded."""
    _, configfile = smoke
    _flip_byte(tamper / RUN / "oracle" / "flow.pt")
    proc = _snakemake(tamper, "--configfile", str(configfile))
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("DataError:")]
    assert lines and f"{RUN}/oracle/flow.pt changed since rule 'oracle_train' made it" in lines[0], \
        proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.slow
def test_edited_numbers_json_is_flagged(tamper):
    path = tamper / RUN / "numbers.json"
    numbers = json.loads(path.read_text())
    numbers["world.base.aleatoric_floor"]["value"] *= 0.5
    path.write_text(json.dumps(numbers, indent=2))
    proc = _audit_cli(tamper, "world.base.aleatoric_floor", "--run", RUN)
    assert proc.returncode == 1
    assert f"FLAG     {RUN}/numbers.json: artifact changed since its record was written" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("key,value,where", [
    ("splits.test_size", 150, "splits/base.h5"),
    # another recipe names other models (plan.model_of): the experiment's data now reads those
    ("classifiers.training.lr", 0.01, "scaling/scaling/data/runs.csv"),
    ("classifiers.archs.test_vit.label", "ViT-B", "scaling/scaling/figures/scaling_panels.png"),
])
def test_changed_parameter_of_a_figure_is_flagged(tamper, key, value, where):
    cfg_path = tamper / RUN / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    node = cfg
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    # every flag (the summary counts a message shared by several files on the first one's line)
    proc = _audit_cli(tamper, f"{RUN}/scaling/scaling/figures/scaling_panels.png", "--full")
    assert proc.returncode == 1, proc.stdout[-3000:]
    flags = [line for line in proc.stdout.splitlines() if line.startswith("FLAG")]
    assert any(line.startswith(f"FLAG     {RUN}/{where}: params ") for line in flags), flags


@pytest.mark.slow
def test_parameter_outside_the_chain_is_not_flagged(tamper):
    cfg_path = tamper / RUN / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["validation"]["n_samples"] = 7  # Figure 4 depends on it, Figure 2 does not
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert _audit_cli(tamper, f"{RUN}/scaling/scaling/figures/scaling_panels.png").returncode == 0
    proc = _audit_cli(tamper, f"{RUN}/validation/figures/nn_distances.png")
    assert proc.returncode == 1
    assert f"FLAG     {RUN}/validation/metrics.json: params validation.n_samples was " in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
def test_every_number_names_an_existing_artifact(smoke, monkeypatch):
    work, _ = smoke
    monkeypatch.chdir(work)
    run = work / RUN
    path = run / "numbers.json"
    assert check_numbers(path, require_record=True) == []
    assert _audit_cli(work, "--check-numbers", str(path)).returncode == 0
    numbers = json.loads(path.read_text())
    for key, entry in numbers.items():
        assert {"value", "unit", "artifact", "description"} <= set(entry), key
        assert entry["artifact"].startswith(f"{RUN}/") and (work / entry["artifact"]).is_file(), key
    archs = ("test_resnet", "test_vit")
    world = {f"world.base.{k}" for k in ("aleatoric_floor", "bayes_error", "bayes_accuracy", "mutual_information",
                                           "normalized_mutual_information")}
    expected = world | {"scaling.bayes_gap_min", "scaling.bayes_gap_max", "validation.fd_domain",
                        "validation.coverage", "validation.memorization_rate", "validation.stability_kl",
                        "validation.bpd"}
    expected |= {f"scaling.{k}.{a}" for a in archs for k in ("alpha", "epistemic_min_n", "epistemic_max_n", "bayes_gap")}
    assert expected <= set(numbers), expected - set(numbers)
    assert "validation.fid" not in numbers  # no Inception weights: the distance is an FD
    for key in ("world.base.aleatoric_floor", "world.base.bayes_error", "world.base.mutual_information",
                "validation.stability_kl", "validation.bpd"):
        assert numbers[key]["se"] > 0, key
    assert numbers["world.base.aleatoric_floor"]["unit"] == "nats"
    assert numbers["world.base.mutual_information"]["unit"] == "bits"
    # the numbers agree with the artifacts they name, recomputed here from the classifier level
    metrics = pd.read_csv(run / "scaling" / "scaling" / "data" / "runs.csv")
    for arch in archs:
        sub = metrics[metrics["arch"] == arch]
        at_max = sub[sub["N"] == sub["N"].max()]
        gap = 100 * (at_max["bayes_accuracy"].mean() - at_max["acc"].mean())
        assert math.isclose(numbers[f"scaling.bayes_gap.{arch}"]["value"], gap, rel_tol=1e-9), arch
        leaf = json.loads((_model_dir(run, arch, 50) / "metrics" / "base.json").read_text())
        assert math.isclose(numbers[f"scaling.epistemic_min_n.{arch}"]["value"],
                            leaf["metrics"]["epistemic"]["mean"], rel_tol=1e-12)
        assert numbers[f"scaling.epistemic_min_n.{arch}"]["se"] == leaf["metrics"]["epistemic"]["se"]
    val = json.loads((run / "validation" / "metrics.json").read_text())
    assert numbers["validation.fd_domain"]["value"] == val["feature_spaces"]["domain"]["frechet_samples_train"]
    assert numbers["validation.stability_kl"]["value"] == val["posterior_stability"]["mean_kl"]


@pytest.mark.slow
def test_numbers_tex_is_one_wellformed_macro_per_number(smoke):
    work, _ = smoke
    numbers = json.loads((work / RUN / "numbers.json").read_text())
    text = (work / RUN / "numbers.tex").read_text()
    # the folder the \paper<Id> paths start from: \paperRunDir, set between \makeatletter and \makeatother
    preamble = text[text.index("\\makeatletter"):text.index("\\makeatother")]
    assert "\\paperRunDir" in preamble and "\\CurrentFilePath" in preamble
    text = text.replace(preamble, "")
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("%") and not ln.startswith("\\makeatother")]
    # each macro, then a comment naming what it is: its numbers.json key, or the paper id of an artifact
    split = [ln.split(" % ", 1) for ln in lines]
    matches = [NEWCOMMAND.fullmatch(macro) for macro, *_ in split]
    assert all(matches), [ln for ln, m in zip(lines, matches) if not m]
    names = [m.group(1) for m in matches]
    for (_, *comment), m in zip(split, matches):
        assert comment, m.group(0)
        if m.group(1).startswith("paper"):
            assert comment[0].startswith("paper artifact: ") and \
                tex_macro_name(comment[0].split(": ", 1)[1], prefix="paper") == m.group(1), comment
        else:
            key = comment[0].removeprefix("numbers.json: ").split(" (")[0]
            assert key in numbers and m.group(1).startswith(tex_macro_name(key)), (m.group(0), comment)
    paper = yaml.safe_load((work / RUN / "config.yaml").read_text())["paper"]
    # per number its value, and per spread (se, std) the spread and the value rounded to it
    spreads = sum(v.get(f) is not None for v in numbers.values() for f in SPREAD_MACROS)
    assert spreads and len(names) == len(set(names)) == len(numbers) + 2 * spreads + len(paper)
    assert {tex_macro_name(pid, prefix="paper") for pid in paper} <= set(names)  # \paperFigTwo: its path
    by_name = {tex_macro_name(k): v["value"] for k, v in numbers.items()}
    for k, v in numbers.items():
        for f, (spread_suffix, value_suffix) in SPREAD_MACROS.items():
            if v.get(f) is not None:
                by_name[tex_macro_name(k) + spread_suffix] = (v[f], v[f])  # (value, tolerance)
                by_name[tex_macro_name(k) + value_suffix] = (v["value"], v[f])
    for m in matches:
        if m.group(1).startswith("paper"):
            path = m.group(2).removeprefix("\\paperRunDir ")
            assert (work / RUN / f"{path}.csv").exists() or (work / RUN / f"{path}.pdf").exists(), m.group(0)
            continue
        value = by_name[m.group(1)]
        if isinstance(value, tuple):  # rounded to a spread: within a spread of the number (4 digits at 0)
            assert abs(float(m.group(2)) - value[0]) <= max(value[1], 5e-4 * abs(value[0])), m.group(0)
            continue
        assert math.isclose(float(m.group(2)), value, rel_tol=5e-4, abs_tol=1e-300), m.group(0)


@pytest.mark.slow
def test_report_over_a_changed_config_refuses_in_one_line(smoke, tmp_path):
    """Issue 38 case 3: `--report` with classifiers.training.lr changed said "Report created",
    showing lr 0.002 beside numbers of lr 0.001 models. It refuses in one line, with Snakemake's
    metadata (jobs to run) and without it (a copy of the results: their records say why)."""
    work, configfile = smoke
    cfg = yaml.safe_load(Path(configfile).read_text())
    cfg["classifiers"]["training"]["lr"] = 0.002
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(cfg, sort_keys=False))
    copy = tmp_path / "copy"
    shutil.copytree(work / "results", copy / "results", symlinks=True)
    for where, words in ((work, "job(s) are still to run (rule train_classifier, e.g. "),
                         # the most common reason: the experiment's spec (tables, figures, collect),
                         # whose classifiers are now the models of the new recipe (plan.model_of)
                         (copy, "params spec.classifiers.")):
        report = tmp_path / f"{where.name}-report.html"
        proc = _snakemake(where, "--configfile", str(changed), "--report", str(report))
        out = proc.stdout + proc.stderr
        errors = [ln for ln in out.splitlines() if ln.startswith("Error: ")]
        assert proc.returncode != 0 and not report.exists(), out[-3000:]
        assert len(errors) == 1 and "the report would show results that are not this config's" in errors[0], out[-3000:]
        assert words in errors[0] and "Traceback" not in out, errors[0]


@pytest.mark.slow
def test_report_builds_with_every_table_and_figure(smoke):
    work, configfile = smoke
    proc = _snakemake(work, "--configfile", str(configfile), "--report", "report.html")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (work / "report.html").read_text(encoding="utf-8")
    assert html.lstrip().lower().startswith("<!doctype html") and not (work / "report.zip").exists()
    for name in ("scaling_panels.png", "epistemic_curves.png", "nn_distances.png", "samples_grid.png",
                 "accuracy_vs_bayes.csv", "epistemic_vs_n.csv", "checks.csv", "summary.csv", "numbers.json"):
        assert name in html, name
    # each caption: the artifact's description, then the finding computed from its data
    # (its <stem>.caption.rst, which report/artifact.rst includes)
    for caption in ("Classifiers against the Bayes-optimal bound", "(paper Table 1)",
                    "This run: at N = ", "the Bayes-optimal accuracy minus the test accuracy",
                    "Loss decomposition against N", "(paper Figure 2)", "the total cross-entropy dropped by",
                    "Validation checks of the oracle samples", "(paper Table 3)",
                    "Nearest-neighbour distances", "(paper Figure 4)", "of oracle samples lie within the memorization",
                    "In-text numbers"):
        assert caption in html, caption
    assert "System Message" not in html  # the caption files parse as reStructuredText
    assert not re.search(r"""src=["']https?://""", html)  # self-contained
    # grouped by paper id (else by kind), the Markdown tables beside the CSVs
    categories = json.loads(re.search(r"var categories = (\{.*?\});\s*$", html, re.M).group(1))
    assert {Path(f).name for f in categories["Table 1"]["scaling/accuracy_vs_bayes"]} == {
        "accuracy_vs_bayes.csv", "accuracy_vs_bayes.md"}
    assert [Path(f).name for f in categories["Figure 2"]["scaling/scaling_panels"]] == ["scaling_panels.png"]
    assert [Path(f).name for f in categories["validation"]["validation/samples_grid"]] == ["samples_grid.png"]


# ============================================================================= fast pieces
