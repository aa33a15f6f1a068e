"""The contract every experiment kind keeps (oracle.experiments): one package with the same
small interface, a light planning half, its config entry's schema, a collect rule that writes
its data files, any rules file of its own included, and its presence in the embedded default.
Runs over every registered kind, so a new kind is checked without editing this file."""

from __future__ import annotations

import copy
import inspect
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from oracle.errors import ConfigError
from oracle.experiments import INTERFACE, OPTIONAL, PACKAGES, REPORTING, kind_module, kinds, register
from oracle.report.paper import Artifact
from oracle.workflow.plan import config as oc
from oracle.workflow import plan

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
SCHEMA = oc.full_schema(REPO / "config.schema.yaml")
KINDS = sorted(kinds())

SIGNATURES = {
    "check": ["name", "entry", "config"],
    "classifier_runs": ["spec"],
    "training_spec": ["spec", "cell"],
    "evaluation_sets": ["spec"],
    "collect_inputs": ["name", "spec", "paths"],
    "collect": ["spec", "inputs"],
    "table": ["name", "data", "spec"],
    "figure": ["name", "data", "spec", "stem"],
    "numbers": ["data", "spec", "data_paths"],
    "split_needs": ["spec"],  # optional
    "run_evaluation_sets": ["spec", "run"],  # optional
}


def entries_of(kind: str) -> dict[str, dict]:
    return {name: e for name, e in DEFAULT["experiments"].items() if e["kind"] == kind}


def test_registry_finds_the_kinds_and_refuses_others():
    assert "scaling" in KINDS
    with pytest.raises(ConfigError, match="not one of"):
        kind_module("no_such_kind")


@pytest.mark.parametrize("kind", KINDS)
def test_module_has_the_interface(kind):
    mod = kind_module(kind)
    missing = [name for name in INTERFACE if not hasattr(mod, name)]
    assert not missing, f"oracle.experiments.{kind} lacks {missing}"
    assert mod.KIND == kind and mod.DATA and all(isinstance(d, str) for d in mod.DATA)
    kinds_of_artifact = {art.type for art in mod.ARTIFACTS.values()}
    for name, params in SIGNATURES.items():
        if name in OPTIONAL and not hasattr(mod, name):
            continue
        if name in ("table", "figure") and name not in kinds_of_artifact:  # only a kind with one defines it
            continue
        assert list(inspect.signature(getattr(mod, name)).parameters)[: len(params)] == params, name
    assert mod.ARTIFACTS
    for name, art in mod.ARTIFACTS.items():
        assert isinstance(art, Artifact) and art.name == name and len(art.caption) > 20
        assert hasattr(mod, art.type), f"oracle.experiments.{kind} has a {art.type} ({name}) but no {art.type}()"


def test_a_kind_that_trains_nothing_gets_the_defaults():
    """classifier_runs, training_spec and evaluation_sets have defaults (a kind that trains
    nothing writes no stubs); an optional hook a kind lacks is absent without its report loading."""
    from oracle.experiments import DEFAULTS, reporting_half

    getattr_ = reporting_half("oracle.experiments.no_such_kind")  # its report would not import
    assert getattr_("classifier_runs")({}) == [] and getattr_("evaluation_sets")({}) == []
    with pytest.raises(ConfigError, match="'toy' trains no classifiers"):
        getattr_("training_spec")({"kind": "toy"}, "N10")
    for name in OPTIONAL:
        with pytest.raises(AttributeError):
            getattr_(name)
    lazy = [k for k in KINDS if any(n not in vars(kind_module(k)) for n in DEFAULTS)]
    assert lazy, "no registered kind relies on the defaults"


def test_a_kind_registered_twice_is_an_error():
    registry: dict = {}
    register(registry, types.SimpleNamespace(KIND="scaling", __name__="oracle.experiments.scaling"))
    with pytest.raises(ConfigError, match="'scaling' is registered twice.*by oracle.experiments.scaling and by copy"):
        register(registry, types.SimpleNamespace(KIND="scaling", __name__="copy"))
    assert len(PACKAGES) == len(set(PACKAGES)) == len(kinds())


def test_the_planning_halves_import_no_heavy_library():
    """The Snakefile imports every planning half when it builds the DAG: no numpy, pandas,
    matplotlib, scipy or torch there, nor when it asks the kinds for the experiments' paths and
    jobs (a fresh interpreter, so other tests' imports do not count)."""
    code = ("import copy, sys, yaml; from oracle.experiments import kinds; from oracle.workflow.plan import config; from oracle.workflow import plan; "
            "from oracle.workflow.plan.paths import RunPaths; kinds(); "
            "c = yaml.safe_load(open('config.yaml')); s = config.full_schema('config.schema.yaml'); "
            "config.validate_config(c, s); config.fill_defaults(c, s); p = RunPaths(c); "
            "p.experiment_targets(); [p.collect_inputs(n) for n in c['experiments']]; plan.prediction_jobs(c); "
            "print(' '.join(m for m in ('numpy', 'pandas', 'matplotlib', 'scipy', 'torch', 'seaborn') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("kind", KINDS)
def test_reporting_half_loads_on_use(kind):
    mod = kind_module(kind)
    report = __import__(f"oracle.experiments.{kind}.report", fromlist=["collect"])
    for name in REPORTING:
        if hasattr(report, name):
            assert getattr(mod, name) is getattr(report, name)
    with pytest.raises(AttributeError):
        mod.no_such_name  # noqa: B018


@pytest.mark.parametrize("kind", KINDS)
def test_schema_has_the_kind(kind):
    assert SCHEMA["$defs"][f"experiment_{kind}"] == kind_module(kind).SCHEMA
    dispatch = SCHEMA["properties"]["experiments"]["additionalProperties"]
    assert kind in dispatch["properties"]["kind"]["enum"]
    assert any(p["if"]["properties"]["kind"]["const"] == kind for p in dispatch["allOf"])


def test_every_rules_file_of_a_kind_is_included():
    """A kind's own rules file (rules/<kind>.smk, jobs besides its collect) must be included by
    the Snakefile; the collect rules come from one loop over the registry (rules/experiments.smk)."""
    included = set(re.findall(r'^include: "rules/(\w+)\.smk"', (REPO / "Snakefile").read_text(), re.M))
    own = {k for k in KINDS if (REPO / "rules" / f"{k}.smk").exists()}
    assert own == {"active"} and own <= included
    assert "for _kind, _mod in kinds().items():" in (REPO / "rules" / "experiments.smk").read_text()


@pytest.mark.parametrize("kind", KINDS)
def test_collect_inputs_name_what_collect_reads(kind):
    """collect_inputs of every default entry returns {name: [paths]}, each a file of the run
    (oracle.workflow.plan.paths.RunPaths, the one object every path reaches a kind through)."""
    from oracle.workflow.plan.paths import RunPaths

    config = copy.deepcopy(DEFAULT)
    oc.validate_config(config, SCHEMA)
    oc.fill_defaults(config, SCHEMA)
    paths = RunPaths(config)
    for name in entries_of(kind):
        inputs = paths.collect_inputs(name)
        assert inputs and all(isinstance(v, list) and v for v in inputs.values()), inputs
        assert all(f.startswith(f"{paths.RUN}/") for v in inputs.values() for f in v), inputs


@pytest.mark.parametrize("kind", KINDS)
def test_the_embedded_default_runs_every_kind(kind):
    assert entries_of(kind), f"config.yaml has no experiment of kind {kind!r}: the default runs the whole paper"


@pytest.mark.parametrize("kind", KINDS)
def test_check_fills_defaults_and_names_bad_keys(kind):
    mod = kind_module(kind)
    for name, entry in entries_of(kind).items():
        spec = mod.check(name, copy.deepcopy(entry), DEFAULT)
        assert spec["kind"] == kind
        for cell in {r["cell"] for r in mod.classifier_runs(spec)}:
            t = mod.training_spec(spec, cell)
            world = plan.world_spec(DEFAULT, t["world"])
            assert 1 <= t["n"] <= world["n_total"] - world["test_size"]
        for evalset in mod.evaluation_sets(spec):  # a world's test set or a noisy copy of it
            plan.world_spec(DEFAULT, plan.parse_evalset(evalset, DEFAULT["worlds"])[0])
        for world, need in (mod.split_needs(spec) if hasattr(mod, "split_needs") else {}).items():
            w = plan.world_spec(DEFAULT, world)
            if not need["seeds"]:  # a kind that reads the world's test rows itself trains on none
                assert need["max_n"] == 0, need
                continue
            assert 1 <= need["max_n"] <= w["n_total"] - w["test_size"]
            assert set(need["seeds"]) <= set(plan.split_worlds(DEFAULT)[world]["seeds"])
        if "world" in entry:
            bad = copy.deepcopy(DEFAULT)
            bad["experiments"][name]["world"] = "no_such_world"
            with pytest.raises(ConfigError, match=rf"'experiments\.{name}\.world'"):
                mod.check(name, copy.deepcopy(bad["experiments"][name]), bad)
