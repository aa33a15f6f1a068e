"""The contract every experiment kind keeps (oracle.experiments): one module with the same
small interface, its config entry in the schema, its rules file, and its presence in the
embedded default. Runs over every kind the registry finds, so a new kind is checked without
editing this file."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import pytest
import yaml

from oracle.errors import ConfigError
from oracle.experiments import INTERFACE, OPTIONAL, kind_module, kinds
from oracle.report.paper import Artifact
from oracle.workflow import config as oc
from oracle.workflow import plan

REPO = Path(__file__).resolve().parents[1]
DEFAULT = yaml.safe_load((REPO / "config.yaml").read_text())
SCHEMA = oc.load_yaml(REPO / "config.schema.yaml")
KINDS = sorted(kinds())

SIGNATURES = {
    "check": ["name", "entry", "config"],
    "classifier_runs": ["spec"],
    "training_spec": ["spec", "cell"],
    "evaluation_sets": ["spec"],
    "collect": ["spec", "inputs"],
    "table": ["name", "data", "spec"],
    "figure": ["name", "data", "spec", "stem"],
    "numbers": ["data", "spec", "data_paths"],
    "split_needs": ["spec"],  # optional
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
    for name, params in SIGNATURES.items():
        if name in OPTIONAL and not hasattr(mod, name):
            continue
        assert list(inspect.signature(getattr(mod, name)).parameters)[: len(params)] == params, name
    assert mod.ARTIFACTS
    for name, art in mod.ARTIFACTS.items():
        assert isinstance(art, Artifact) and art.name == name and len(art.caption) > 20


@pytest.mark.parametrize("kind", KINDS)
def test_schema_has_the_kind(kind):
    assert f"experiment_{kind}" in SCHEMA["$defs"]
    dispatch = SCHEMA["properties"]["experiments"]["additionalProperties"]
    assert kind in dispatch["properties"]["kind"]["enum"]
    assert any(p["if"]["properties"]["kind"]["const"] == kind for p in dispatch["allOf"])


@pytest.mark.parametrize("kind", KINDS)
def test_rules_file_collects_every_data_file(kind):
    rules = (REPO / "rules" / f"{kind}.smk").read_text()
    assert f'include: "rules/{kind}.smk"' in (REPO / "Snakefile").read_text()
    for data in kind_module(kind).DATA:
        assert f"/data/{data}.csv" in rules, f"rules/{kind}.smk writes no data/{data}.csv"


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
            assert need["seeds"] and 1 <= need["max_n"] <= w["n_total"] - w["test_size"]
            assert set(need["seeds"]) <= set(plan.split_worlds(DEFAULT)[world]["seeds"])
        if "world" in entry:
            bad = copy.deepcopy(DEFAULT)
            bad["experiments"][name]["world"] = "no_such_world"
            with pytest.raises(ConfigError, match=rf"'experiments\.{name}\.world'"):
                mod.check(name, copy.deepcopy(bad["experiments"][name]), bad)
