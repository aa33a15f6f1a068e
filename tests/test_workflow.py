"""End to end: the whole workflow on the tiny config of tests/smoke/, and its error paths.

Runs the snakemake CLI in temporary working directories (`-d`), so nothing lands in the
repository's results/. Marked slow: `make test-fast` skips it.
"""

from __future__ import annotations

import re

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import yaml

from oracle.classifiers.train import curve_epochs
from oracle.report.claims import FINDINGS
from tests.table_formats import compile_tables, latex_labels, markdown_column_counts, overfull_pt

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """The snakemake CLI in `workdir`; targets go before --configfile (which takes several files)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def smoke_config(**changes) -> dict:
    cfg = yaml.safe_load(SMOKE.read_text())
    for dotted, value in changes.items():
        node = cfg
        *parents, last = dotted.split(".")
        for p in parents:
            node = node[p]
        node[last] = value
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def log_softmax(a: np.ndarray) -> np.ndarray:
    m = a.max(axis=1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis=1, keepdims=True))


@pytest.fixture(scope="module")
def results(smoke_run) -> Path:
    """results/smoke of the session's one smoke run (tests/conftest.py, tests/smoke_session.py:
    tests/smoke/config.yaml with validation, a second world and bundle_max_n added)."""
    return smoke_run.results


# ----------------------------------------------------------------------------- the smoke run


def test_samples_are_complete_and_merged_virtually(results):
    cfg = smoke_config()
    n_total, n_shards = cfg["samples"]["n_total"], cfg["samples"]["n_shards"]
    shards = sorted((results / "samples" / "base").glob("shard-*.h5"))
    assert [p.name for p in shards] == [f"shard-{i:04d}.h5" for i in range(n_shards)]
    rows = 0
    for p in shards:
        with h5py.File(p, "r") as f:
            assert bool(f.attrs["complete"])
            rows += f["x"].shape[0]
            assert np.isfinite(f["loglik"][()]).all()
    assert rows == n_total
    assert not list((results / "samples" / "base").glob(".*partial"))
    with h5py.File(results / "samples" / "base" / "all.h5", "r") as f:
        for name in ("x", "source_class", "label", "loglik", "index"):
            assert f[name].is_virtual, name
        # T = 1: the world's label is the class each sample was drawn from (DESIGN rule 8)
        np.testing.assert_array_equal(f["label"][()], f["source_class"][()])
        assert f["x"].shape[0] == n_total
        np.testing.assert_array_equal(np.sort(f["index"][()]), np.arange(n_total))
        assert f["loglik"].shape == (n_total, 10)
    assert (results / "samples" / "base" / "all.h5").stat().st_size < 64 * 1024  # no copy of the data


def test_tables_are_sane(results):
    cfg = smoke_config()
    exp = cfg["experiments"]["scaling"]
    tables = results / "scaling" / "scaling" / "tables"
    t1 = pd.read_csv(tables / "accuracy_vs_bayes.csv")
    assert len(t1) == len(exp["archs"])
    assert set(t1["Architecture"]) == {cfg["classifiers"]["archs"][a]["label"] for a in exp["archs"]}
    assert (t1["N"] == max(exp["sizes"])).all()
    assert t1["Accuracy (%)"].between(0, 100).all()
    assert np.allclose(t1["Gap (%)"], t1["Bayes (%)"] - t1["Accuracy (%)"])
    t2 = pd.read_csv(tables / "epistemic_vs_n.csv")
    assert list(t2["Dataset size N"]) == sorted(exp["sizes"])
    means = [c for c in t2.columns if c != "Dataset size N" and not c.endswith(" std")]
    assert [c for c in t2.columns if c.endswith(" std")] == [f"{c} std" for c in means]  # a std beside each
    values = t2[means].to_numpy(float)
    assert np.isfinite(values).all() and (values >= 0).all()
    for stem in ("accuracy_vs_bayes", "epistemic_vs_n"):
        for ext in ("md", "tex"):
            assert (tables / f"{stem}.{ext}").stat().st_size > 100
    # the paper's numbering reaches the captions (config `paper:`)
    assert "(paper Table 1)" in (tables / "accuracy_vs_bayes.md").read_text()


def test_every_table_of_the_run_works_in_its_tool(results, tmp_path):
    """Every .tex table the run wrote (and numbers.tex) compiles in a plain article with booktabs
    under a real pdflatex, and every Markdown table (tables, claims.md, timings.md) keeps one
    column count in every row (issue 32 items 1 and 2)."""
    variants = (".column.tex", ".note.tex")
    tables = sorted(p for p in results.rglob("tables/*.tex") if not p.name.endswith(variants))
    tex = tables + [results / "numbers.tex"]
    assert len(tex) >= 3, tex  # the smoke run: scaling's two tables, the validation summary, numbers.tex
    status, errors = compile_tables([*tex, *(p.with_suffix(".note.tex") for p in tables)], tmp_path)
    assert status == 0, errors
    assert max(overfull_pt(tmp_path), default=0.0) <= 1.0  # every table fits a plain article's text width
    labels = latex_labels(tex)
    assert len(labels) == len(set(labels)), labels  # unique per run: the experiment is in the label
    # and each has a column variant (same label) that fits one column of [twocolumn]{article}
    columns = [p.with_suffix(".column.tex") for p in tables]
    status, errors = compile_tables(columns, tmp_path, twocolumn=True)
    assert status == 0, errors
    assert max(overfull_pt(tmp_path), default=0.0) <= 1.0
    assert latex_labels(columns) == latex_labels(tables)
    for path in tables:  # the caption says what the table shows; this run's finding is the note file
        caption = re.search(r"\\caption\{(.*)\}\n", path.read_text()).group(1)
        assert "This run" not in caption and "The paper:" not in caption, (path, caption)
        assert "This run" not in path.read_text() and "This run" not in path.with_suffix(".column.tex").read_text()
    md = sorted(results.rglob("tables/*.md")) + [results / "claims.md", results / "timings.md"]
    for path in md:
        blocks, block = [], []
        for line in path.read_text().splitlines() + [""]:
            if line.strip().startswith("|"):
                block.append(line)
            elif block:
                blocks.append(block)
                block = []
        assert blocks, f"{path}: no Markdown table"
        for b in blocks:
            counts = markdown_column_counts("\n".join(b))
            assert len(set(counts)) == 1, f"{path}: rows with {sorted(set(counts))} columns"


def test_every_figure_caption_names_only_the_panels_it_draws(results):
    """Issue 48: each figure of the run (every kind's, the validation's) and its caption file:
    no caption names a panel letter the figure does not draw or describes a panel as another."""
    from oracle.report.captions import read_caption
    from oracle.report.figures import caption_panel_problems, pdf_facts

    pdfs = sorted(results.rglob("figures/*.pdf"))
    assert len(pdfs) >= 5, pdfs
    lettered = 0
    for pdf in pdfs:
        panels = pdf_facts(pdf.read_bytes())["panels"]
        lettered += bool(panels)
        caption = read_caption(pdf.with_name(f"{pdf.stem}.caption.rst"))
        assert not caption_panel_problems(caption, panels), (pdf, panels, caption)
        assert "Layout warning" not in caption, pdf  # the tests' runs are strict: no figure written with one
    assert lettered >= 2  # scaling_panels and more draw lettered panels


def test_figures_exist(results):
    for stem in ("scaling_panels", "epistemic_curves"):
        pdf = (results / "scaling" / "scaling" / "figures" / f"{stem}.pdf").read_bytes()
        png = (results / "scaling" / "scaling" / "figures" / f"{stem}.png").read_bytes()
        assert pdf.startswith(b"%PDF") and png.startswith(b"\x89PNG") and len(png) > 10_000


def test_numbers_match_an_independent_computation(results):
    numbers = json.loads((results / "numbers.json").read_text())
    for key in ("aleatoric_floor", "bayes_error", "bayes_accuracy", "mutual_information",
                "normalized_mutual_information"):
        assert f"world.base.{key}" in numbers
    for key, entry in numbers.items():
        assert {"value", "unit", "artifact", "description"} <= set(entry), key
        assert (results.parents[1] / entry["artifact"]).exists(), entry["artifact"]
    archs = smoke_config()["experiments"]["scaling"]["archs"]
    assert {f"scaling.alpha.{a}" for a in archs} <= set(numbers)
    numbers = {k.removeprefix("world.base."): v for k, v in numbers.items()}
    # world constants from the raw log-likelihoods, by numpy: uniform prior, T = 1
    with h5py.File(results / "samples" / "base" / "all.h5", "r") as f:
        ll = f["loglik"][()]
    log_p = log_softmax(ll)
    p = np.exp(log_p)
    h = -(p * log_p).sum(axis=1)
    k = ll.shape[1]
    assert math.isclose(numbers["aleatoric_floor"]["value"], h.mean(), rel_tol=1e-9)
    assert math.isclose(numbers["aleatoric_floor"]["se"], h.std(ddof=1) / math.sqrt(len(h)), rel_tol=1e-6)
    assert math.isclose(numbers["bayes_accuracy"]["value"], p.max(axis=1).mean(), rel_tol=1e-9)
    assert math.isclose(numbers["bayes_error"]["value"] + numbers["bayes_accuracy"]["value"], 1.0, rel_tol=1e-9)
    assert math.isclose(numbers["mutual_information"]["value"], math.log2(k) - h.mean() / math.log(2), rel_tol=1e-9)
    assert 0 <= numbers["normalized_mutual_information"]["value"] <= 1
    tex = (results / "numbers.tex").read_text()
    assert "\\newcommand{\\numWorldBaseAleatoricFloor}" in tex
    # paths from the folder numbers.tex is read from (\paperRunDir), so a manuscript anywhere can \input it
    assert "\\newcommand{\\paperFigTwo}{\\paperRunDir scaling/scaling/figures/scaling_panels}" in tex
    # the claims table: one row per finding, each with a verdict (oracle.report.claims)
    claims = pd.read_csv(results / "claims.csv")
    assert len(claims) == len(FINDINGS) and set(claims["verdict"]) <= {"supported", "contradicted", "unresolved", "not posed", "not run"}
    assert "Verdicts:" in (results / "claims.md").read_text()


def test_classifier_metrics_match_their_predictions(results):
    cfg = smoke_config()
    exp = cfg["experiments"]["scaling"]
    with h5py.File(results / "samples" / "base" / "all.h5", "r") as f:
        ll, labels = f["loglik"][()], f["label"][()]
    df = pd.read_csv(results / "scaling" / "scaling" / "data" / "runs.csv")
    assert len(df) == len(exp["archs"]) * len(exp["sizes"]) * len(exp["seeds"])
    assert np.allclose(df["total"], df["aleatoric"] + df["epistemic"], rtol=1e-9)
    for _, row in df.iterrows():
        folder = results.parent.parent / row["source"].split("/metrics/")[0]  # the model's folder (plan.model_of)
        assert folder.parent.parent.parent.name == exp["world"] and folder.parent.name.startswith(f"N{row['N']}-hard-")
        with h5py.File(folder / "predictions" / "base.h5", "r") as f:
            log_q, index = f["log_q"][()], f["index"][()]
        assert len(index) == cfg["splits"]["test_size"]
        log_p = log_softmax(ll[index])
        kl = (np.exp(log_p) * (log_p - log_q)).sum(axis=1).mean()
        assert math.isclose(row["epistemic"], kl, rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(row["acc"], (log_q.argmax(axis=1) == labels[index]).mean(), rel_tol=1e-12)
        assert not (folder / "train_state.pt").exists()
        blob = json.loads((folder / "history.json").read_text())
        history = blob["history"]
        run = blob["convergence"]["epochs_run"]
        # the budget bounds the constant-rate epochs; the final decay of the rate follows them
        main = [h for h in history if h.get("phase", "main") == "main"]
        assert len(main) <= row["epochs"] and [h["epoch"] for h in history] == list(range(1, run + 1))
        assert blob["convergence"]["kept_lr"] is not None
        if blob["curve_size"] == 0:
            # scaling reads no training curve, so its models score none (plan.training_spec)
            assert blob["curve_epochs"] == []
        elif cfg["classifiers"]["training"]["patience"] is None:
            # a fixed budget: the curve is scored after classifiers.curve_points epochs spread evenly
            assert blob["curve_epochs"] == curve_epochs(row["epochs"], cfg["classifiers"]["curve_points"])
        else:
            # the stopping rule: the curve is scored at its evaluations, where the validation loss is
            assert blob["curve_epochs"] == [h["epoch"] for h in history if "val_loss" in h]
        scored = [h for h in history if "curve_acc" in h]
        assert [h["epoch"] for h in scored] == blob["curve_epochs"]
        assert all(0 <= h["curve_acc"] <= 1 and h["curve_epistemic"] >= 0 for h in scored)


def test_every_artifact_has_provenance_log_and_benchmark(results):
    artifacts = [p for p in results.rglob("*") if p.is_file() and p.suffix in {".h5", ".pt", ".json", ".csv", ".md", ".tex", ".pdf", ".png", ".jsonl", ".yaml"}
                 and not p.name.endswith(".prov.json") and "logs" not in p.parts and "benchmarks" not in p.parts
                 and "ckpt" not in p.parts]
    assert len(artifacts) > 20
    missing = [str(p.relative_to(results)) for p in artifacts if not p.with_name(p.name + ".prov.json").exists()]
    assert not missing, missing
    assert (results / "logs" / "oracle_train.log").exists()
    assert (results / "benchmarks" / "oracle_train.tsv").exists()
    record = json.loads((results / "scaling" / "scaling" / "tables" / "epistemic_vs_n.csv.prov.json").read_text())
    assert record["rule"] == "experiment_table" and any(k.endswith("data/runs.csv") for k in record["inputs"])


def test_effective_config_is_the_run_config(smoke_run):
    effective = yaml.safe_load((smoke_run.results / "config.yaml").read_text())
    expected = copy.deepcopy(smoke_run.config)
    for e in expected["experiments"].values():  # schema defaults are filled in
        e.setdefault("hard_label", "label")
    expected.setdefault("figures", {"width_in": 6.8, "column_width_in": 3.3})
    expected.setdefault("claims", {"judged_on": {}})
    assert "job_server" not in effective  # the switch is the environment's (ORACLE_JOB_SERVER), not the config's
    assert effective == expected


def test_rerun_is_a_no_op(smoke_run):
    proc = snakemake(smoke_run.workdir, "--configfile", str(smoke_run.configfile), "-n")
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr


def test_second_run_is_bit_identical(results, smoke_second_run):
    """Flow training, sampling, splits, classifiers and every number are deterministic on CPU,
    and the files are byte-reproducible: flow.pt (torch.save embeds no temporary name), the
    shards and numbers.json have the same sha256 in two identical runs, so provenance hashes
    downstream agree too. The second run is the session's run of the same config through the
    SLURM profile where the test cluster runs (tests/conftest.py), else a second local run."""
    from oracle.io.hashing import file_sha256

    again = smoke_second_run.results
    assert again != results
    assert (again / "config.yaml").read_bytes() == (results / "config.yaml").read_bytes()  # the same effective config
    for rel in ("oracle/flow.pt", "samples/base/shard-0000.h5", "samples/base/shard-0001.h5", "splits/base.h5",
                "numbers.json", "numbers.tex"):
        assert file_sha256(results / rel) == file_sha256(again / rel), rel
    for pred in sorted((results / "classifiers").rglob("predictions/*.h5")):
        with h5py.File(pred, "r") as f, h5py.File(again / pred.relative_to(results), "r") as g:
            np.testing.assert_array_equal(f["log_q"][()], g["log_q"][()])


# ----------------------------------------------------------------------------- error paths


def _error_lines(proc: subprocess.CompletedProcess, kind: str) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith(f"{kind}:")]


def test_missing_data_root_names_the_path(tmp_path):
    root = tmp_path / "no" / "afhq"
    cfg = smoke_config(run="missing", **{"data.kind": "image_folder", "data.root": str(root)})
    proc = snakemake(tmp_path, "results/missing/data/train.h5", "--configfile", str(write_config(tmp_path / "c.yaml", cfg)))
    assert proc.returncode != 0
    lines = _error_lines(proc, "DataError")
    assert lines and str(root) in lines[0] and "<class_name>" in lines[0]
    data_dir = tmp_path / "results" / "missing" / "data"
    assert not data_dir.exists() or not [p for p in data_dir.iterdir() if p.suffix != ".log"]


def test_size_beyond_the_pool_names_n(tmp_path):
    cfg = smoke_config(run="big", **{"experiments.scaling.sizes": [50, 400]})  # pool = 500 - 200 = 300
    proc = snakemake(tmp_path, "--configfile", str(write_config(tmp_path / "c.yaml", cfg)))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "N=400" in out and "experiments.scaling.sizes" in out
    assert not (tmp_path / "results").exists()


def test_checkpoint_with_other_class_count_is_refused(tmp_path):
    from oracle.flow_checkpoints import build_flow, save_flow

    spec = {"in_channels": 1, "img_size": 8, "patch_size": 2, "channels": 16, "num_blocks": 1,
            "layers_per_block": 1, "head_dim": 16, "num_classes": 3}
    ckpt = tmp_path / "three_classes.pt"
    save_flow(ckpt, build_flow(spec, seed=0), spec)
    cfg = smoke_config(run="mismatch", **{"oracle.checkpoint": str(ckpt)})
    proc = snakemake(tmp_path, "results/mismatch/oracle/flow.pt", "--configfile", str(write_config(tmp_path / "c.yaml", cfg)))
    assert proc.returncode != 0
    lines = _error_lines(proc, "WorldError")
    assert lines and str(ckpt) in lines[0] and "3 classes" in lines[0] and "10" in lines[0]
    oracle_dir = tmp_path / "results" / "mismatch" / "oracle"
    assert not oracle_dir.exists() or not list(oracle_dir.iterdir())


def test_missing_checkpoint_names_the_path(tmp_path):
    ckpt = tmp_path / "nowhere.pth"
    cfg = smoke_config(run="nockpt", **{"oracle.checkpoint": str(ckpt), "oracle.checkpoint_format": "public_tarflow"})
    cfgfile = write_config(tmp_path / "c.yaml", cfg)
    dry = snakemake(tmp_path, "--configfile", str(cfgfile), "-n")
    assert dry.returncode == 0, dry.stderr[-2000:]  # the DAG builds without the checkpoint
    proc = snakemake(tmp_path, "results/nockpt/oracle/flow.pt", "--configfile", str(cfgfile))
    assert proc.returncode != 0
    lines = _error_lines(proc, "DataError")
    assert lines and str(ckpt) in lines[0]


def _kill_once_checkpointed(workdir: Path, target: str) -> int:
    """Start the workflow on `target`, SIGKILL its whole process group once the flow training
    has written a checkpoint, unlock; returns the step of that checkpoint (skips the test when
    training finished first)."""
    import signal
    import time

    import torch

    ckpt = workdir / "results" / "resume" / "oracle" / "ckpt" / "last.pt"
    proc = subprocess.Popen([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", target,
                             "--configfile", str(workdir / "c.yaml")], cwd=workdir, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not ckpt.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if (workdir / target).exists():
        pytest.skip("training finished before it could be killed")
    assert ckpt.exists()
    step = torch.load(ckpt, weights_only=True)["step"]
    unlock = snakemake(workdir, "--configfile", str(workdir / "c.yaml"), "--unlock")  # the kill left the lock
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    return step


def _started(workdir: Path, *args: str) -> subprocess.Popen:
    """`snakemake(workdir, *args)` started and not waited for (`_finished` waits): two flow
    trainings that do not depend on each other run side by side on the 2 cores."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(workdir), "--cores", "2", *args],
                            cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def _finished(proc: subprocess.Popen, timeout: int = 600) -> str:
    """The output of a `_started` run, which must succeed (killed with its session on a timeout)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    return out


def _flow_state(path: Path) -> dict:
    import torch

    return torch.load(path, weights_only=True)["state_dict"]


def test_killed_flow_training_resumes_to_the_same_flow(tmp_path):
    """SIGKILL the whole snakemake process group once a checkpoint exists, rerun: the resumed
    flow equals an uninterrupted one (oracle/ckpt/ survives the failed job and is removed once
    the flow is written)."""
    import torch

    cfg = smoke_config(run="resume", **{"oracle.train.steps": 400, "oracle.train.checkpoint_every": 20})
    target = "results/resume/oracle/flow.pt"
    ref_dir, kill_dir = tmp_path / "ref", tmp_path / "killed"
    for d in (ref_dir, kill_dir):
        d.mkdir()
        write_config(d / "c.yaml", cfg)
    ref = _started(ref_dir, target, "--configfile", str(ref_dir / "c.yaml"))  # the uninterrupted run, beside
    try:
        assert 0 < _kill_once_checkpointed(kill_dir, target) < 400
        # rerun-incomplete is the default (profiles/default): the same command finishes the run
        again = snakemake(kill_dir, target, "--configfile", str(kill_dir / "c.yaml"))
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    finally:
        _finished(ref)
    flow = kill_dir / target
    a, b = _flow_state(ref_dir / target), _flow_state(flow)
    assert all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (flow.parent / "train_log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 400
    assert not (flow.parent / "ckpt").exists()


def test_stale_flow_checkpoint_of_another_setting_is_not_resumed(tmp_path):
    """The issue's case: training state left by a run with head_dim 16 (every weight shape is
    the same with 8) must not become the head_dim-8 flow. The rerun discards it (one line in
    the log) and equals a fresh head_dim-8 run bit for bit."""
    import torch

    cfg = smoke_config(run="resume", **{"oracle.train.steps": 400, "oracle.train.checkpoint_every": 20})
    target = "results/resume/oracle/flow.pt"
    fresh_dir, stale_dir = tmp_path / "fresh", tmp_path / "stale"
    for d in (fresh_dir, stale_dir):
        d.mkdir()
    write_config(stale_dir / "c.yaml", cfg)  # head_dim 16: the run that leaves the stale state
    cfg["oracle"]["flow"]["head_dim"] = 8
    write_config(fresh_dir / "c.yaml", cfg)
    fresh = _started(fresh_dir, target, "--configfile", str(fresh_dir / "c.yaml"))  # the fresh run, beside
    try:
        _kill_once_checkpointed(stale_dir, target)
        write_config(stale_dir / "c.yaml", cfg)
        proc = snakemake(stale_dir, target, "--configfile", str(stale_dir / "c.yaml"))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    finally:
        _finished(fresh)
    log = (stale_dir / "results" / "resume" / "logs" / "oracle_train.log").read_text()
    assert log.count("discarding the flow training resume state") == 1 and "spec" in log
    a, b = _flow_state(fresh_dir / target), _flow_state(stale_dir / target)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_multi_gpu_training_relaunches_under_torchrun(results, tmp_path):
    """resources.oracle.gpus > 1 starts torchrun (here 2 CPU processes with gloo): DDP over
    halves of each batch trains the same flow as one process, up to float summation order."""
    import torch

    cfg = smoke_config(**{"resources.oracle.gpus": 2, "resources.oracle.cpus": 2})
    proc = snakemake(tmp_path, "results/smoke/oracle/flow.pt", "--configfile", str(write_config(tmp_path / "c.yaml", cfg)))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    log = (tmp_path / "results" / "smoke" / "logs" / "oracle_train.log").read_text()
    assert "torch.distributed.run" in log and "--nproc_per_node 2" in log and "rank 1:" in log
    a = torch.load(results / "oracle" / "flow.pt", weights_only=True)["state_dict"]
    b = torch.load(tmp_path / "results" / "smoke" / "oracle" / "flow.pt", weights_only=True)["state_dict"]
    for k in a:  # Adam amplifies float-order differences a little over 60 steps
        torch.testing.assert_close(a[k], b[k], rtol=1e-2, atol=1e-3)
    losses = [[json.loads(line)["loss"] for line in (d / "oracle" / "train_log.jsonl").read_text().splitlines()]
              for d in (results, tmp_path / "results" / "smoke")]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
