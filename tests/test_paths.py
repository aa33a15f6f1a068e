"""The paths of a run (oracle.workflow.plan.paths.RunPaths) and the wildcard helpers of the rules
(oracle.workflow.plan.rule_params.RuleParams): the one place rules, kinds, CI's rehearsal and the
audit take a run's paths from."""

from __future__ import annotations

import copy
import re
import types
from pathlib import Path

import pytest
import yaml

from oracle.workflow.plan import config as oc
from oracle.workflow import plan
from oracle.workflow.plan.paths import RunPaths, one_of, run_dir, world_file
from oracle.workflow.plan.rule_params import RuleParams

REPO = Path(__file__).resolve().parents[1]
SCHEMA = oc.full_schema(REPO / "config.schema.yaml")


@pytest.fixture(scope="module")
def config() -> dict:
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    oc.validate_config(cfg, SCHEMA)
    oc.fill_defaults(cfg, SCHEMA)
    return cfg


@pytest.fixture(scope="module")
def paths(config) -> RunPaths:
    return RunPaths(config)


def test_templates_live_in_the_run_folder_with_their_wildcards(paths, config):
    assert paths.RUN == run_dir(config) == f"results/{config['run']}"
    assert paths.SAMPLES == f"{paths.RUN}/samples/{{world}}/all.h5"
    assert paths.METRICS == f"{paths.RUN}/classifiers/{{world}}/{{arch}}/{{condition}}/seed{{seed}}/metrics/{{evalset}}.json"
    assert paths.ORACLE == f"{paths.RUN}/oracle/flow.pt" == world_file(paths.RUN, config)
    gaussian = copy.deepcopy(config)
    gaussian["oracle"]["world"] = "gaussian"
    assert RunPaths(gaussian).ORACLE == f"{paths.RUN}/oracle/gaussian_world.pt"
    templates = {k: v for k, v in paths.rule_names().items() if k.isupper() and isinstance(v, str)}
    assert all(v.startswith(paths.RUN) for v in templates.values()), templates


def test_an_experiment_reads_its_own_or_its_borrowed_classifiers(paths, config):
    """estimators and calibration read the scaling experiment's models: the same metrics files,
    on their own sets; scaling reads its own, on its world's test set only."""
    borrowed = [n for n, s in paths.experiments.items() if "borrowed_runs" in s]
    assert borrowed
    for name in borrowed:
        spec = paths.experiments[name]
        assert paths.prediction_runs(name) == spec["borrowed_runs"] == plan.prediction_runs(config, name)
        assert paths.experiment_runs(name) == []
        sets = plan.run_evaluation_sets(spec, spec["borrowed_runs"][0])
        assert len(paths.experiment_metrics(name)) == len(spec["borrowed_runs"]) * len(sets)
    own = paths.experiment_metrics("scaling")
    world = paths.experiments["scaling"]["world"]
    assert own == [paths.METRICS.format(**plan.model_of(r, paths.experiments), evalset=world)
                   for r in paths.experiment_runs("scaling")]
    assert all(f in paths.classifier_targets() for f in own)


def test_evaluation_sets_read_the_world_or_its_noisy_copy(paths):
    clean = paths.evalset_inputs(types.SimpleNamespace(evalset="base"))
    noisy = paths.evalset_inputs(types.SimpleNamespace(evalset=plan.noisy_set_name("base", 0.1)))
    assert clean == {"samples": paths.world_samples("base"), "splits": paths.world_splits("base")}
    assert noisy == {"samples": f"{paths.RUN}/samples/base/noise0.1/test.h5", "splits": paths.world_splits("base")}


def test_every_paper_artifact_is_a_target_of_the_run(paths, config):
    files = paths.paper_files()
    assert set(files) == set(config["paper"])
    targets = set(paths.run_targets())
    assert all(f in targets for fs in files.values() for f in fs)
    for pid, stem in paths.paper_stems().items():
        assert all(f.startswith(f"{stem}.") for f in files[pid])


def test_a_paper_file_needs_only_the_run_and_the_kinds(config):
    """CI's rehearsal asks for an artifact's files from a merged preset before any check:
    nothing but ``run`` and each experiment's ``kind`` is read."""
    bare = {"run": "r", "oracle": {}, "paper": {"fig2": "scaling/scaling_panels", "tab3": "validation/checks"},
            "experiments": {"scaling": {"kind": "scaling"}}}
    files = RunPaths(bare).paper_files()
    assert files["fig2"][0] == "results/r/scaling/scaling/figures/scaling_panels.pdf"
    assert files["tab3"][0] == "results/r/validation/tables/checks.csv"


def test_numbers_parts_name_every_experiment_world_and_the_validation(paths, config):
    parts = paths.numbers_parts()
    assert set(parts) == {*config["experiments"], *(f"world.{w}" for w in config["worlds"]), "validation"}
    assert parts["validation"] == f"{paths.RUN}/numbers/validation.json"


def test_one_of_matches_exactly_the_names():
    pattern = re.compile(f"(?:{one_of(['tau1', 'tau1.2', 'base'])})$")
    assert pattern.match("tau1.2") and pattern.match("base") and not pattern.match("tau1x")
    assert not re.match(one_of([]), "")


def test_rule_params_of_a_classifier_job(paths, config):
    params = RuleParams(config, paths)
    run = paths.experiment_runs("scaling")[0]
    wc = types.SimpleNamespace(**plan.model_of(run, paths.experiments))
    spec = params.training(wc)
    assert spec == plan.training_spec(config, run["experiment"], run["cell"])
    assert params.classifier_group(wc) == "classifiers"
    assert params.n_max == plan.largest_training_size(config)
    art = types.SimpleNamespace(kind="scaling", experiment="scaling", artifact="scaling_panels")
    assert "(paper Figure 2)" in params.artifact_caption(art)
    assert params.report_category("validation")(types.SimpleNamespace(artifact="checks")) == "Table 3"


# ----------------------------------------------------------------------------- one model, trained once
def test_a_model_is_named_by_what_determines_its_weights(paths, config):
    """The default's difficulty learner on tau0.7 (test_resnet at the learner's N, seeds 0 and 1,
    hard labels, the same recipe) is scaling's classifier of that world, arch, N and seed: one
    model, one folder, and each experiment's ``classifiers`` names it by its own run. A changed
    recipe, label or world is another model."""
    learner_n = config["experiments"]["difficulty"]["learner"]["size"]
    assert learner_n in config["experiments"]["scaling"]["sizes"]  # the default shares it on purpose
    cell = f"N{learner_n}"
    runs = {(r["experiment"], r["cell"], r["seed"]): r for r in paths.runs if r["arch"] == "test_resnet"}
    for seed in (0, 1):
        scaling, difficulty = runs[("scaling", cell, seed)], runs[("difficulty", "tau0.7", seed)]
        assert paths.classifier_dir(scaling) == paths.classifier_dir(difficulty)
        model = plan.classifier_id(plan.model_of(scaling, paths.experiments))
        assert paths.models[model]["runs"] == [scaling, difficulty]
        assert paths.experiments["difficulty"]["classifiers"][model] == [difficulty]
        assert paths.experiments["scaling"]["classifiers"][model] == [scaling]
    assert paths.classifier_dir(runs[("difficulty", "tau0.9", 0)]) != paths.classifier_dir(runs[("scaling", cell, 0)])
    assert len(paths.models) == len(paths.runs) - 2 == len({paths.classifier_dir(r) for r in paths.runs})
    assert len(paths.classifier_targets()) == len(set(paths.classifier_targets())) == len(plan.prediction_jobs(config))
    cfg = copy.deepcopy(config)
    cfg["experiments"]["difficulty"]["training"] = {"lr": 0.002}  # another recipe: another model
    other = RunPaths(cfg)
    assert len(other.models) == len(other.runs)
    t = plan.training_spec(config, "scaling", "N1000")
    assert plan.model_condition({**t, "labels": "soft"}) != plan.model_condition(t)
    assert re.fullmatch(r"N1000-hard-[0-9a-f]{8}", plan.model_condition(t))


def _dry_run(tmp_path: Path, cfg: dict) -> str:
    """`snakemake --dry-run` of `cfg` in an empty working directory: its job table and jobs."""
    import subprocess
    import sys

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(tmp_path),
                           "--configfile", str(path), "--dry-run"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _job_count(out: str, rule: str) -> int:
    block = out.split("Job stats:")[1].split("total")[0]
    m = re.search(rf"^{rule}\s+(\d+)$", block, re.M)
    return int(m.group(1)) if m else 0


def test_two_experiments_asking_for_the_same_classifier_make_one_training_job(tmp_path):
    """The smoke config's scaling experiment and a second one on the same world, recipe and labels
    with an overlapping grid: the DAG trains (and predicts) each model once, 5 models for 6 runs."""
    cfg = yaml.safe_load((REPO / "tests/smoke/config.yaml").read_text())
    first = cfg["experiments"]["scaling"]
    assert first["archs"] == ["test_resnet", "test_vit"] and first["sizes"] == [50, 200] and first["seeds"] == [0]
    cfg["experiments"]["scaling-b"] = {**copy.deepcopy(first), "archs": ["test_resnet"], "sizes": [100, 200]}
    out = _dry_run(tmp_path, cfg)
    assert _job_count(out, "train_classifier") == 5
    assert _job_count(out, "predict_classifier") == 5
    assert _job_count(out, "scaling_collect") == 2


def test_an_active_learning_round_zero_is_one_job_and_one_file_for_every_strategy(tmp_path):
    """tests/smoke/active.yaml: 4 strategies of one (arch, seed) read the same round0.pt, made by
    one active_round_zero job."""
    cfg = yaml.safe_load((REPO / "tests/smoke/active.yaml").read_text())
    active = cfg["experiments"]["active"]
    assert len(active["strategies"]) == 4 and active["seeds"] == [0] and len(active["archs"]) == 1
    out = _dry_run(tmp_path, cfg)
    assert _job_count(out, "active_round_zero") == 1 and _job_count(out, "active_learning") == 4
    inputs = re.findall(r"^\s*rule active_learning:\n(?:\s+\w+: .*\n)*?\s+input: (.*)\n", out, re.M)
    zero = {f for line in inputs for f in line.split(", ") if f.endswith("/round0.pt")}
    assert len(inputs) == 4 and len(zero) == 1
    assert zero == {f"results/{cfg['run']}/active/active/runs/test_resnet/round0/seed0/round0.pt"}


def test_a_model_file_stands_for_the_runs_its_experiment_names(tmp_path):
    """A metrics file of a shared model (its ``classifier``) becomes one row per run that the
    reading experiment's ``classifiers`` names, with that experiment's cell; a file of a model
    the experiment does not read is refused, naming the file."""
    import json

    from oracle.classifiers.evaluate import read_metrics_frame
    from oracle.errors import DataError

    path = tmp_path / "base.json"
    path.write_text(json.dumps({"classifier": "tau0.7/test_resnet/N1000-hard-0123abcd/seed0", "evalset": "tau0.7",
                                "N": 1000, "labels": "hard", "hard_label": "label", "metrics": {"acc": {"mean": 0.9, "se": 0.01}}}))
    views = {"tau0.7/test_resnet/N1000-hard-0123abcd/seed0": [
        {"experiment": "difficulty", "arch": "test_resnet", "cell": "tau0.7", "seed": 0}]}
    df = read_metrics_frame([path], views)
    assert df[["experiment", "cell", "seed", "acc"]].values.tolist() == [["difficulty", "tau0.7", 0, 0.9]]
    with pytest.raises(DataError, match=f"{path}: classifier 'tau0.7/test_resnet/N1000-hard-0123abcd/seed0' is none"):
        read_metrics_frame([path], {"other/test_resnet/N1000-hard-0123abcd/seed0": views[next(iter(views))]})
