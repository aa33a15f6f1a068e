"""Provenance in small pieces, without a workflow run: config keys with selectors, the
params rules hand their jobs, the job record helper, raw data inputs, numbers.tex names, atomic writes,
the code check (tests/test_provenance_workflow.py runs the same end to end)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from oracle.errors import ConfigError, DataError
from oracle.io.atomic import atomic_output
from oracle.io.raw_files import raw_data_inputs
from oracle.report.numbers import numbers_tex
from oracle.workflow import plan
from oracle.workflow.jobs import job_script, record_job
from oracle.io.hashing import clear_hash_cache, file_sha256
from oracle.workflow.plan.config_paths import get_config_value, parse_config_key

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
NEWCOMMAND = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{([^{}]*)\}")


def test_config_key_selectors():
    cfg = {"classifiers": {"archs": {"vit.b16": {"model": "vit", "label": "ViT"}, "r": {}},
                           "experiments": [{"name": "scaling", "labels": "hard"}, {"name": "soft", "labels": "soft"}]},
           "seed": 0}
    assert parse_config_key("classifiers.experiments[name=soft].labels") == [
        "classifiers", "experiments", ("name", "soft"), "labels"]
    assert get_config_value(cfg, "classifiers.experiments[name=soft].labels") == "soft"
    assert get_config_value(cfg, "classifiers.archs[vit.b16].model") == "vit"
    with pytest.raises(ConfigError, match="not found"):
        get_config_value(cfg, "classifiers.experiments[name=nope]")
    for bad_key in ("", ".a", "a..b", "a[b"):
        with pytest.raises(ConfigError):
            parse_config_key(bad_key)


def test_the_params_of_classifier_runs_in_the_smoke_config():
    """What a classifier is trained from (the params of train_classifier and active_learning):
    its cell's training spec with the experiment's training overrides, its architecture without
    the display label, and for active learning the entry's run keys, not its reporting ones."""
    from oracle.workflow.plan.config_paths import quoted

    cfg = yaml.safe_load(SMOKE.read_text())
    cell = plan.classifier_runs(cfg, ["scaling"])[0]["cell"]
    spec = plan.training_spec(cfg, "scaling", cell)
    assert spec["training"]["lr"] == cfg["classifiers"]["training"]["lr"] and "curve_size" in spec
    cfg["experiments"]["scaling"]["training"] = {"lr": 0.5}
    assert plan.training_spec(cfg, "scaling", cell)["training"]["lr"] == 0.5
    arch = plan.arch_build_spec(cfg, "test_vit")
    assert "label" not in arch and arch["input_size"] == cfg["classifiers"]["archs"]["test_vit"]["input_size"]
    act = yaml.safe_load((REPO / "tests/smoke/active.yaml").read_text())
    (name,) = [n for n, e in act["experiments"].items() if e["kind"] == "active"]
    spec = plan.experiment_spec(act, name)
    run = plan.run_spec(spec)
    assert "arch_labels" in spec and "target_accuracy" in spec
    assert {"training", "strategies", "rounds", "batch", "world"} <= set(run)
    assert "arch_labels" not in run and "target_accuracy" not in run
    assert quoted("classifiers", "archs", "vit.b16", "label") == "classifiers.archs[vit.b16].label"
    with pytest.raises(ConfigError, match="no experiment named 'nope'"):
        plan.training_spec(cfg, "nope", cell)


def test_world_keys_follow_the_world_specs_fallback():
    """world_keys names the key each world_specs value comes from: the world's own entry, the
    base world's, or the global default."""
    from oracle.workflow.plan.config_paths import get_config_value

    cfg = yaml.safe_load(SMOKE.read_text())
    cfg["worlds"]["hot"] = {"base_temperature": 1.5, "n_total": 77}
    specs = plan.world_specs(cfg)
    params = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "test_size")
    for world in specs:
        for p in params:
            (key,) = plan.world_keys(cfg, world, (p,))
            assert get_config_value(cfg, key) == specs[world][p], (world, p, key)
    assert plan.world_keys(cfg, "hot", ("n_total", "test_size")) == ["worlds.hot.n_total", "splits.test_size"]


def _fake_job(tmp_path, **over):
    scripts = tmp_path / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / "make.py").write_text("print('the script')\n")
    inp = tmp_path / "in.txt"
    inp.write_text("input")
    out = tmp_path / "out.txt"
    out.write_text("output")
    job = SimpleNamespace(rule="make", wildcards=SimpleNamespace(seed="3", items=lambda: [("seed", "3")]),
                          input=[str(inp)], output=[str(out)],
                          params={"a": {"b": 1}, "seed": 0, "fn": print},
                          config={"a": {"b": 1, "c": 2}, "seed": 0}, scriptdir=str(scripts))
    for k, v in over.items():
        setattr(job, k, v)
    return job


def test_record_job_takes_everything_from_the_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = _fake_job(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(tmp_path / ".snakemake" / "scripts" / "tmpab12cd34.make.py")])
    assert job_script(job) == tmp_path / "scripts" / "make.py"
    [side] = record_job(job, started=1.0, extra={"note": 1})
    rec = json.loads(side.read_text())
    assert rec["rule"] == "make" and rec["seed"] == 3 and rec["wildcards"] == {"seed": "3"}
    assert rec["params"] == {"a": {"b": 1}, "seed": 0} and "config" not in rec  # its params, not the config
    assert rec["inputs"] == {"in.txt": file_sha256(tmp_path / "in.txt")} and rec["extra"] == {"note": 1}
    # the script lies outside this repository (tmp_path): only repository files are kept
    assert all(not f.endswith("make.py") for f in rec["code"]["files"])
    [side] = record_job(_fake_job(tmp_path, params=SimpleNamespace()), started=None)
    assert json.loads(side.read_text())["params"] == {}  # a rule without params


def test_raw_data_inputs_pick_the_files_read(tmp_path):
    root = tmp_path / "afhq"
    for split in ("train", "val"):
        (root / split / "cat").mkdir(parents=True)
        (root / split / "cat" / "a.png").write_bytes(b"png")
    (root / "unrelated").mkdir()
    paths, ident = raw_data_inputs({"kind": "image_folder", "root": str(root)})
    assert paths == [root / "train", root / "val"] and ident == {"kind": "image_folder", "root": str(root)}
    cifar = tmp_path / "torchvision"
    (cifar / "cifar-10-batches-py").mkdir(parents=True)
    assert raw_data_inputs({"kind": "cifar10", "root": str(cifar)})[0] == [cifar / "cifar-10-batches-py"]
    npz = tmp_path / "d.npz"
    npz.write_bytes(b"npz")
    assert raw_data_inputs({"kind": "npz", "root": str(npz)})[0] == [npz]
    assert raw_data_inputs({"kind": "svhn", "root": str(tmp_path / "none")})[0] == []
    digits, ident = raw_data_inputs({"kind": "digits"})
    assert digits[0].name == "digits.csv.gz" and digits[0].is_file() and ident["scikit-learn"]


def test_numbers_tex_names_and_collisions():
    nums = {"alpha.resnet_18": {"value": 0.0391234}, "n_max": {"value": 40000}, "x": {"value": None},
            "validation.stability_kl": {"value": 1.51e-9}}
    tex = numbers_tex(nums, {"fig2": "results/r/scaling/scaling/figures/scaling_panels"})
    got = dict(NEWCOMMAND.findall(tex))
    assert got == {"numAlphaResnetOneEight": "0.03912", "numNMax": "40000", "numX": "--",
                   "numValidationStabilityKl": "1.51e-09",
                   "paperFigTwo": "results/r/scaling/scaling/figures/scaling_panels"}
    with pytest.raises(DataError, match="'alpha.resnet18' and 'alpha.resnet_18'"):
        numbers_tex({"alpha.resnet_18": {"value": 1.0}, "alpha.resnet18": {"value": 2.0}})


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_atomic_output_applies_the_umask_at_rename(tmp_path, mask):
    old = os.umask(0o022)  # the umask in force when the module was imported, say
    try:
        os.umask(mask)  # ... changed later by the process
        with atomic_output(tmp_path / "a.txt") as tmp:
            tmp.write_text("x")
        assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o666 & ~mask
        with atomic_output(tmp_path / "b.txt") as tmp:  # a writer that replaces the file
            tmp.unlink()
            tmp.write_text("y")
        assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    finally:
        os.umask(old)
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]  # no temporary left behind



def test_torch_save_atomic_round_trip_and_no_partial_file(tmp_path):
    import torch

    from oracle.io.atomic import torch_save_atomic

    obj = {"w": torch.arange(6, dtype=torch.float64).reshape(2, 3), "step": 7}
    assert torch_save_atomic(obj, tmp_path / "sub" / "a.pt") == tmp_path / "sub" / "a.pt"
    back = torch.load(tmp_path / "sub" / "a.pt", weights_only=True)
    assert back["step"] == 7 and torch.equal(back["w"], obj["w"])
    torch_save_atomic({"step": 1}, tmp_path / "sub" / "a.pt")  # replaces the file
    with pytest.raises(Exception):  # a lambda cannot be pickled: the save fails midway
        torch_save_atomic({"f": lambda: 0}, tmp_path / "sub" / "a.pt")
    assert torch.load(tmp_path / "sub" / "a.pt", weights_only=True) == {"step": 1}  # old file intact
    assert os.listdir(tmp_path / "sub") == ["a.pt"]  # no temporary left behind

def test_validation_numbers_name_fid_only_in_inception_features():
    from oracle.validation.artifacts import validation_numbers

    spaces = {
        "inception": {"feature_kind": "inception-fid", "frechet_name": "FID", "frechet_samples_train": 28.44,
                      "feature_space": "Inception-v3 pool3 (2048-d)", "is_name": "IS",
                      "inception_score_samples": {"mean": 6.24, "std": 3.57}},
        "resnet": {"feature_kind": "resnet", "frechet_name": "FD (ResNet-50 features)", "frechet_samples_train": 3.1,
                   "feature_space": "ResNet-50 avgpool (2048-d)", "is_name": "IS-like score (ResNet-50)",
                   "inception_score_samples": {"mean": 2.0, "std": 0.1}},
    }
    nums = validation_numbers({"feature_spaces": spaces, "primary_space": "resnet",
                               "posterior_stability": {"mean_kl": 1.5e-9, "se": 1e-10, "n": 100, "noise_std": 1e-3}},
                              "v.json")
    assert nums["fid"]["value"] == 28.44 and "Inception" in nums["fid"]["description"]
    assert nums["is"]["value"] == 6.24 and nums["is"]["std"] == 3.57
    assert nums["fd_resnet"]["value"] == 3.1 and "fid_resnet" not in nums
    assert nums["stability_kl"] == {
        "value": 1.5e-9, "unit": "nats", "artifact": "v.json", "se": 1e-10, "se_over": "samples",
        "description": nums["stability_kl"]["description"]}
    only_domain = validation_numbers({"feature_spaces": {"domain": {**spaces["resnet"], "feature_kind": "domain"}},
                                      "primary_space": "domain"}, "v.json")
    assert "fid" not in only_domain and "fd_domain" in only_domain
    # torchvision's Inception weights do not give the FID (the feature kind, not the space's name, decides)
    tv = validation_numbers({"feature_spaces": {"inception": {**spaces["inception"],
                                                              "feature_kind": "inception-torchvision"}},
                             "primary_space": "inception"}, "v.json")
    assert "fid" not in tv and tv["fd_inception"]["value"] == 28.44


def test_code_check_names_the_changed_module(tmp_path):
    from oracle.tools.audit import changed_code_files
    from oracle.workflow.provenance import REPO_ROOT, code_files

    recorded = code_files()  # this process imported oracle.workflow.provenance from the repository
    assert recorded["oracle/workflow/provenance/__init__.py"] == file_sha256(REPO_ROOT / "oracle/workflow/provenance/__init__.py")
    assert all(not k.startswith(("/", ".venv/")) and "site-packages" not in k for k in recorded)
    (tmp_path / "oracle").mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / "oracle" / name).write_text(f"# {name}\n")
    rec = {"files": {f"oracle/{n}": file_sha256(tmp_path / "oracle" / n) for n in ("a.py", "b.py", "c.py")}}
    assert changed_code_files(rec, root=tmp_path) == []
    (tmp_path / "oracle" / "a.py").write_text("# a, edited\n")
    (tmp_path / "oracle" / "c.py").unlink()
    clear_hash_cache()
    assert changed_code_files(rec, root=tmp_path) == ["oracle/a.py changed", "oracle/c.py removed"]
    # one audit hashes each file of the checkout once, however many records name it
    now: dict = {}
    assert changed_code_files(rec, root=tmp_path, now=now) == ["oracle/a.py changed", "oracle/c.py removed"]
    assert now == {"oracle/a.py": file_sha256(tmp_path / "oracle" / "a.py"), "oracle/b.py": rec["files"]["oracle/b.py"],
                   "oracle/c.py": None}
    assert changed_code_files({"files": {"oracle/b.py": "0" * 64}}, root=tmp_path, now=now) == ["oracle/b.py changed"]


def test_code_files_matches_resolving_every_path(tmp_path, monkeypatch):
    """The folder-cached resolution of `code_files` against resolving each path in full: a
    repository file reached through a symlinked folder and through a symlinked file counts, a
    root-level script and a dot-folder keep their names, .venv and files outside do not."""
    import oracle.workflow.provenance as prov

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / ".hooks").mkdir()
    (repo / ".venv" / "lib").mkdir(parents=True)
    for rel in ("pkg/mod.py", "script.py", ".hooks/check.py", ".venv/lib/dep.py"):
        (repo / rel).write_text(f"# {rel}\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "other.py").write_text("# other\n")
    (tmp_path / "linked_dir").symlink_to(repo / "pkg")
    (outside / "linked_file.py").symlink_to(repo / "script.py")
    extra = [tmp_path / "linked_dir" / "mod.py", outside / "linked_file.py", repo / ".hooks" / "check.py",
             repo / ".venv" / "lib" / "dep.py", outside / "other.py"]
    monkeypatch.setattr(prov, "REPO_ROOT", repo.resolve())
    monkeypatch.setattr(sys, "modules", {})
    prov._code_folder.cache_clear()
    try:
        got = prov.code_files(extra)
    finally:
        prov._code_folder.cache_clear()
    brute = {}
    for p in extra:
        rel = Path(os.path.realpath(p)).relative_to(repo.resolve()) if os.path.realpath(p).startswith(
            str(repo.resolve()) + os.sep) else None
        if rel is not None and ".venv" not in rel.parts:
            brute[rel.as_posix()] = file_sha256(os.path.realpath(p))
    assert got == dict(sorted(brute.items()))
    assert set(got) == {"pkg/mod.py", "script.py", ".hooks/check.py"}
