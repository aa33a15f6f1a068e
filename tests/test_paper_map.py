"""The paper map: every paper id of every config (config.yaml, presets, smoke configs) names an
artifact that config makes, is a target the workflow can build, and is the README's row."""

import re
from pathlib import Path

import pytest
import yaml

from oracle.experiments import kind_module
from oracle.report.paper import paper_label
from oracle.validation.artifacts import ARTIFACTS as VALIDATION_ARTIFACTS
from oracle.workflow import plan

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {"default": REPO / "config.yaml",
           **{p.stem: p for p in sorted((REPO / "presets").glob("*.yaml"))},
           **{f"smoke/{p.stem}": p for p in sorted((REPO / "tests" / "smoke").glob("*.yaml"))}}


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def made_artifacts(cfg: dict) -> set[str]:
    """``<experiment or validation>/<artifact>`` of every table and figure `cfg` makes."""
    out = {f"{name}/{a}" for name, spec in plan.experiment_specs(cfg).items()
           for a in kind_module(spec["kind"]).ARTIFACTS}
    if cfg["validation"]["enabled"]:
        out |= {f"validation/{a}" for a in VALIDATION_ARTIFACTS}
    return out


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_paper_id_names_an_artifact_the_config_makes(name):
    cfg = load(CONFIGS[name])
    paper = cfg.get("paper") or {}
    made = made_artifacts(cfg)
    for pid, target in paper.items():
        paper_label(pid)  # table<N> or fig<N>
        assert target in made, f"{name}: paper.{pid} = {target!r} is not made (it makes {sorted(made)})"
    # one artifact, one paper id: a config never names the same artifact twice
    assert len(set(paper.values())) == len(paper), f"{name}: {paper}"


#: Configs whose numbering is their dataset's: the paper's ImageNet-64 results are Figures 6
#: and 9 only (the other scaling artifacts it makes are not in the paper); ImageNet-128 has none.
OWN_NUMBERING = {"imagenet64", "imagenet128"}


def kind_ids(cfg: dict) -> dict[tuple[str, str], str]:
    """{(kind or "validation", artifact): paper id} of `cfg`'s paper section."""
    specs = plan.experiment_specs(cfg)
    out = {}
    for pid, target in (cfg.get("paper") or {}).items():
        owner, artifact = target.split("/")
        out[("validation" if owner == "validation" else specs[owner]["kind"], artifact)] = pid
    return out


@pytest.mark.parametrize("name", [n for n in CONFIGS if n not in OWN_NUMBERING])
def test_every_paper_artifact_a_config_makes_has_the_defaults_id(name):
    canonical = kind_ids(load(CONFIGS["default"]))
    cfg = load(CONFIGS[name])
    specs = plan.experiment_specs(cfg)
    paper = cfg.get("paper") or {}
    for target in made_artifacts(cfg):
        owner, artifact = target.split("/")
        pid = canonical.get(("validation" if owner == "validation" else specs[owner]["kind"], artifact))
        if pid is not None:
            # a config with two experiments of one kind (the default's scaling and scaling-floor)
            # gives the id to one of them: the id must name this artifact of this kind
            named = paper.get(pid)
            assert named is not None, f"{name}: {target} is the paper's {pid}; paper.{pid} is not set"
            named_owner, named_artifact = named.split("/")
            assert named_artifact == artifact and (named_owner == owner or specs[named_owner]["kind"]
                                                   == specs[owner]["kind"]), \
                f"{name}: {target} is the paper's {pid}; paper.{pid} = {named!r}"


def test_no_artifact_duplicates_figure_8_panel_a():
    """accuracy_vs_labels drew panel (a) of acquisition_panels again; Figure 9 (ImageNet-64) is
    that panel of acquisition_panels."""
    assert "accuracy_vs_labels" not in kind_module("active").ARTIFACTS
    assert load(REPO / "presets" / "imagenet64.yaml")["paper"]["fig9"] == "active/acquisition_panels"


def readme_map() -> dict[tuple[str, str], set[str]]:
    text = (REPO / "README.md").read_text()
    block = text.split("<!-- paper-map:")[1].split("<!-- end paper-map -->")[0]
    rows = {}
    for m in re.finditer(r"^\| [A-Za-z]+ \d+ \(`(\w+)`\) \| `([\w/.-]+)`[^|]* \| ([^|]+) \|$", block, re.MULTILINE):
        rows[(m.group(1), m.group(2))] = {c.strip() for c in m.group(3).split(",")}
    return rows


def test_readme_paper_map_is_every_configs_paper_section():
    expected: dict[tuple[str, str], set[str]] = {}
    for name, path in CONFIGS.items():
        if name.startswith("smoke/"):
            continue
        for pid, target in (load(path).get("paper") or {}).items():
            expected.setdefault((pid, target), set()).add(name)
    assert readme_map() == expected


@pytest.mark.parametrize("name", [n for n in CONFIGS if load(CONFIGS[n]).get("paper")])
def test_every_paper_id_is_a_target_that_names_its_files(name, dag_dry_run):
    """`snakemake -n <every paper id>` plans the files of each id's artifact in the id's place
    (oracle.workflow.engine.expand_targets: so `--force fig2` forces exactly them), not the
    id's alias job (the session's one dry run of the config, tests/conftest.py, which names the
    default target and every paper id)."""
    from oracle.workflow.plan.paths import RunPaths

    cfg = load(CONFIGS[name])
    dry = dag_dry_run(name)
    assert dry.config == cfg
    counts = dry.job_counts()
    files = RunPaths(cfg).paper_files()  # needs only `run` and each experiment's kind
    for pid, target in cfg["paper"].items():
        assert pid not in counts, pid
        stem = target.split("/")[1]
        assert any(f.endswith(f"/figures/{stem}.png") or f.endswith(f"/tables/{stem}.csv") for f in files[pid]), pid
        assert all(f in dry.out for f in files[pid]), (pid, [f for f in files[pid] if f not in dry.out])


@pytest.mark.parametrize("name", [n for n in CONFIGS if any(isinstance(a.get("pretrained"), str) for a in
                                                            load(CONFIGS[n])["classifiers"]["archs"].values())])
def test_pretrained_weights_are_an_input_of_the_jobs_that_load_them(name, dag_dry_run):
    """A local pretrained file (Table 6's ImageNet ResNet-50) is an input of every training and
    active-learning job of its architecture: its sha256 goes into the model's record, and a
    replaced file retrains (the dry run places random stand-ins where the config names them)."""
    from oracle.workflow.plan.config import effective_config

    cfg, dry = effective_config(CONFIGS[name]), dag_dry_run(name)
    weights = {a: spec["pretrained"] for a, spec in cfg["classifiers"]["archs"].items()
               if isinstance(spec.get("pretrained"), str)}
    seen = 0
    for rule in ("train_classifier", "active_learning"):
        for block in re.findall(rf"^\s*rule {rule}:\n((?:\s+\w+: .*\n)+)", dry.out, re.M):
            fields = dict(ln.strip().split(": ", 1) for ln in block.splitlines())
            arch = re.search(r"\barch=([^,\s]+)", fields["wildcards"]).group(1)
            inputs = fields["input"].split(", ")
            seen += arch in weights
            assert (arch in weights) == any(f.endswith(weights.get(arch, "\0")) for f in inputs), (rule, arch, inputs)
    assert seen > 0
