"""The reproduction checklists (docs/reproduce-afhq256.md, docs/reproduce-imagenet.md) cannot
drift from the repository: every repository path, config key and Python name they put in
backticks exists; the data and weight files they list are exactly the ones the workflow says
the preset needs (`oracle.workflow.plan.needed_files`); every paper id they pair with an
artifact is the preset's `paper:` entry; the disk and parameter figures are the ones the
preset gives; the launch command is the preset's. README.md and every docs/*.md: each
relative link leads to a file, and each #anchor to a heading of it. The README's quickstart
runs the smoke config and points at that run's report and claims.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
#: checklist -> the presets it documents (a config key it names must exist in each of them)
CHECKLISTS = {"docs/reproduce-afhq256.md": ["presets/afhq256.yaml"],
              "docs/reproduce-imagenet.md": ["presets/imagenet64.yaml", "presets/imagenet128.yaml"]}
#: class counts of the presets' datasets (AFHQ: cat, dog, wild; ImageNet-1K): the data, not
#: the preset, fixes them, and the flow's parameter count depends on them
NUM_CLASSES = {"afhq256": 3, "imagenet64": 1000, "imagenet128": 1000}
_TOP_LEVEL = ("presets/", "oracle/", "scripts/", "docs/", "slurm/", "rules/", "tests/", "profiles/", "envs/")
_TOP_FILES = {"requirements.txt", "pyproject.toml", "Snakefile", "Makefile", "README.md", "config.yaml"}


def load(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())


def code_spans(text: str) -> list[str]:
    """The contents of the `inline code` spans of a Markdown text (fenced blocks left out)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.findall(r"`([^`\n]+)`", text)


def lookup(config: dict, dotted: str) -> bool:
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def importable(dotted: str) -> bool:
    """`dotted` is a module of this repository or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_every_repository_path_named_exists(doc):
    missing = []
    for span in code_spans((REPO / doc).read_text()):
        for word in span.split():
            path = word.rstrip(".,;:")
            if (path.startswith(_TOP_LEVEL) or path in _TOP_FILES) and not re.search(r"[<>{}*]", path):
                if not (REPO / path).exists():
                    missing.append(path)
    assert not missing, f"{doc} names files the repository does not have: {missing}"


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_every_config_key_named_is_in_the_presets(doc):
    """A dotted name whose first part is a top-level config key is a key of every preset the
    checklist documents, or else (`oracle.workflow...`) a Python name of this repository."""
    configs = [load(p) for p in CHECKLISTS[doc]]
    top = set().union(*configs)
    bad = []
    for span in code_spans((REPO / doc).read_text()):
        name = span.split(":")[0].strip()  # `oracle.checkpoint_format: public_tarflow` names a key
        if not re.fullmatch(r"[a-z_]+(\.[A-Za-z0-9_]+)+", name) or name.split(".")[0] not in top:
            continue
        if not all(lookup(c, name) for c in configs) and not importable(name):
            bad.append(name)
    assert not bad, f"{doc} names keys that are not in {CHECKLISTS[doc]}: {bad}"


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_the_files_to_put_in_place_are_what_the_workflow_needs(doc):
    """Every (config key, path) `needed_files` gives for each preset is named, and every
    data/ path named is one of them or lies under a preset's data root."""
    from oracle.workflow.plan.config import effective_config
    from oracle.workflow.plan.needed_files import needed_files

    spans = code_spans((REPO / doc).read_text())
    needed = [f for p in CHECKLISTS[doc] for f in needed_files(effective_config(REPO / p))]
    assert needed
    for f in needed:
        assert f.key in spans and f.path in spans, f"{doc} does not name {f.key} = {f.path}"
    roots = {f.path for f in needed if f.key == "data.root"}
    paths = {f.path for f in needed}
    stray = [s for s in spans if s.startswith("data/") and s not in paths
             and not any(s.startswith(r + "/") for r in roots)]
    assert not stray, f"{doc} names data paths no preset reads: {stray}"


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_paper_ids_and_results_paths_are_the_presets(doc):
    text = (REPO / doc).read_text()
    configs = {load(p)["run"]: load(p) for p in CHECKLISTS[doc]}
    pairs = re.findall(r"`([\w-]+/[\w-]+)` \(`(\w+)`\)", text)
    assert pairs, f"{doc} pairs no artifact with its paper id"
    for artifact, pid in pairs:
        assert any((c.get("paper") or {}).get(pid) == artifact for c in configs.values()), (pid, artifact)
    for span in code_spans(text):
        if span.startswith("results/"):
            assert span.split("/")[1] in {*configs, "<run>"}, span


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_disk_and_flow_size_are_the_presets(doc):
    """Samples: n_total x 3 x S x S float32 bytes, n_total x K float64 log-likelihoods; the
    flow's parameter count (built on the meta device from the preset's flow section)."""
    import torch

    from oracle.flows import TarFlow

    text = (REPO / doc).read_text()
    for p in CHECKLISTS[doc]:
        cfg = load(p)
        n, size, k = cfg["samples"]["n_total"], cfg["data"]["image_size"], NUM_CLASSES[cfg["run"]]
        assert f"{n * 3 * size * size * 4:,} bytes" in text, (p, "samples")
        assert f"{n * k * 8:,}" in text, (p, "log-likelihoods")
        flow = cfg["oracle"]["flow"]
        with torch.device("meta"):
            model = TarFlow(3, size, flow["patch_size"], flow["channels"], flow["num_blocks"],
                            flow["layers_per_block"], num_classes=k, nvp=flow["nvp"], head_dim=flow["head_dim"])
        assert f"{sum(t.numel() for t in model.parameters()):,}" in text, (p, "flow parameters")


@pytest.mark.parametrize("doc", CHECKLISTS)
def test_the_launch_command_is_named(doc):
    text = (REPO / doc).read_text()
    for p in CHECKLISTS[doc]:
        assert f"snakemake --cores all --profile slurm --configfile {p}" in text
        assert f"snakemake --cores all --profile slurm --configfile {p}" in (REPO / p).read_text()


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(md: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", md.read_text(), flags=re.M | re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("md", ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))])
def test_every_relative_link_resolves(md):
    source = REPO / md
    text = re.sub(r"^```.*?^```", "", source.read_text(), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (source.parent / path) if path else source
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{md}: links to nothing: {broken}"


def test_the_readme_starts_with_the_smoke_quickstart():
    """The first section is the quickstart; its first shell block runs the smoke config, and it
    points at that run's report and claims (the config's `run:` names the folder)."""
    text = (REPO / "README.md").read_text()
    first = text.split("\n## ")[1]
    assert first.startswith("Quickstart"), first[:40]
    block = re.search(r"```bash\n(.*?)```", first, re.S).group(1)
    assert "--configfile tests/smoke/config.yaml" in block
    run = load("tests/smoke/config.yaml")["run"]
    assert f"results/{run}/report.html" in first and f"results/{run}/claims.md" in first
