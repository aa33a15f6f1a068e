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
    assert paths.METRICS == f"{paths.RUN}/classifiers/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}/metrics/{{evalset}}.json"
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
    assert own == [paths.METRICS.format(**r, evalset=world) for r in paths.experiment_runs("scaling")]
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
    wc = types.SimpleNamespace(**run)
    spec = params.training(wc)
    assert spec == plan.training_spec(config, run["experiment"], run["cell"])
    assert params.classifier_group(wc) == "classifiers"
    assert params.n_max == plan.largest_training_size(config)
    art = types.SimpleNamespace(kind="scaling", experiment="scaling", artifact="scaling_panels")
    assert "(paper Figure 2)" in params.artifact_caption(art)
    assert params.report_category("validation")(types.SimpleNamespace(artifact="checks")) == "Table 3"
