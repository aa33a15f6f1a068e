"""The config schema, the presets, the cross-key checks and the DAG of every config.

The DAG tests run the snakemake CLI (dry-run, lint) in a temporary working directory where no
data, checkpoint or result exists: every preset must build its full DAG without them.
"""

from __future__ import annotations

import copy
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oracle.workflow import config as oc
from oracle.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config.schema.yaml"
PRESETS = sorted((REPO / "presets").glob("*.yaml"))
DEFAULT = REPO / "config.yaml"
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def schema() -> dict:
    return oc.load_yaml(SCHEMA)


@pytest.fixture
def default() -> dict:
    return load(DEFAULT)


# ----------------------------------------------------------------------------- schema


def test_presets_exist():
    names = {p.stem for p in PRESETS}
    assert {"afhq256", "imagenet64", "imagenet128"} <= names


@pytest.mark.parametrize("path", [DEFAULT, SMOKE, *PRESETS], ids=lambda p: p.stem if p.stem != "config" else p.parent.name)
def test_config_files_validate(path, schema):
    cfg = load(path)
    oc.validate_config(cfg, schema)
    oc.check_config(cfg)


def test_unknown_key_is_named(default, schema):
    default["oracle"]["flow"]["chanels"] = 64
    with pytest.raises(ConfigError) as err:
        oc.validate_config(default, schema)
    msg = str(err.value)
    assert "'oracle.flow'" in msg and "'chanels'" in msg and "\n" not in msg


def test_unknown_top_level_key_is_named(default, schema):
    default["sampels"] = {}
    with pytest.raises(ConfigError, match="unknown key 'sampels'"):
        oc.validate_config(default, schema)


def test_wrong_type_is_named(default, schema):
    default["oracle"]["train"]["lr"] = "fast"
    with pytest.raises(ConfigError) as err:
        oc.validate_config(default, schema)
    assert "'oracle.train.lr'" in str(err.value) and "number" in str(err.value)


def test_list_items_are_named(default, schema):
    default["splits"]["sizes"] = [50, -3]
    with pytest.raises(ConfigError, match=r"'splits\.sizes\[1\]'"):
        oc.validate_config(default, schema)


def test_unknown_key_inside_an_arch_is_named(default, schema):
    default["classifiers"]["archs"]["test_vit"]["inputsize"] = 32
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_vit'.*'inputsize'"):
        oc.validate_config(default, schema)


def test_enum_and_range(default, schema):
    bad = copy.deepcopy(default)
    bad["device"] = "tpu"
    with pytest.raises(ConfigError, match="'device'"):
        oc.validate_config(bad, schema)
    bad = copy.deepcopy(default)
    bad["data"]["test_fraction"] = 1.5
    with pytest.raises(ConfigError, match="'data.test_fraction'"):
        oc.validate_config(bad, schema)


def test_missing_key_is_named(default, schema):
    del default["samples"]["n_shards"]
    with pytest.raises(ConfigError, match="'samples'.*'n_shards'"):
        oc.validate_config(default, schema)


def test_every_object_of_the_schema_rejects_unknown_keys(schema):
    """additionalProperties: false everywhere (maps keyed by name use a schema instead)."""

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"]):
                assert "additionalProperties" in node, f"{where} allows unknown keys"
                if "propertyNames" not in node:
                    assert node["additionalProperties"] is False, f"{where} allows unknown keys"
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(schema, "schema")


# ----------------------------------------------------------------------------- cross-key checks


def test_steps_xor_epochs(default):
    default["oracle"]["train"]["epochs"] = 3
    with pytest.raises(ConfigError, match="exactly one of 'steps' and 'epochs'"):
        oc.check_config(default)


def test_size_larger_than_pool_names_n(default):
    default["splits"]["sizes"] = [50, 5000]
    with pytest.raises(ConfigError, match="N=5000"):
        oc.check_config(default)


def test_experiment_size_larger_than_pool_names_n(default):
    default["classifiers"]["experiments"].append({"name": "big", "labels": "soft", "sizes": [9000]})
    with pytest.raises(ConfigError, match="N=9000"):
        oc.check_config(default)


def test_prior_must_sum_to_one(default):
    default["oracle"]["prior"] = [0.5, 0.6]
    with pytest.raises(ConfigError, match="'oracle.prior'"):
        oc.check_config(default)


def test_unknown_arch_in_experiment(default):
    default["classifiers"]["experiments"][0]["archs"] = ["resnet18"]
    with pytest.raises(ConfigError, match="'resnet18'"):
        oc.check_config(default)


def test_analysis_experiment_must_exist(default):
    default["analysis"]["experiment"] = "nope"
    with pytest.raises(ConfigError, match="'analysis.experiment'"):
        oc.check_config(default)


def test_root_required_for_folders(default):
    default["data"]["kind"] = "image_folder"
    with pytest.raises(ConfigError, match="'data.root'"):
        oc.check_config(default)


def test_gpus_must_split_over_nodes(default):
    default["resources"]["oracle"].update(gpus=12, nodes=8)
    with pytest.raises(ConfigError, match="resources.oracle"):
        oc.check_config(default)


# ----------------------------------------------------------------------------- derived values


def test_shard_sizes_cover_n_total():
    for n, s in [(10, 3), (3200, 2), (50000, 50), (7, 7)]:
        sizes = oc.shard_sizes(n, s)
        assert sum(sizes) == n and len(sizes) == s and max(sizes) - min(sizes) <= 1
    with pytest.raises(ConfigError):
        oc.shard_sizes(2, 3)


def test_train_steps_from_epochs():
    # AFHQ, Table 5: 4000 epochs over 14,630 images at batch 256 (computed independently)
    assert oc.train_steps({"steps": None, "epochs": 4000, "batch_size": 256}, 14630) == 228594
    assert oc.train_steps({"steps": 17, "epochs": None, "batch_size": 256}, 14630) == 17


def test_effective_epochs():
    assert oc.effective_epochs(50, 10, 64, 100) == 100  # one step per epoch
    assert oc.effective_epochs(2000, 10, 64, 100) == 10  # 32 steps/epoch * 10 >= 100
    assert oc.effective_epochs(1000, 1, 64, 0) == 1
    for n, e, b, m in [(37, 3, 8, 50), (640, 2, 64, 25)]:
        eff = oc.effective_epochs(n, e, b, m)
        assert eff >= e and eff * math.ceil(n / b) >= m and (eff == e or (eff - 1) * math.ceil(n / b) < m)


def test_classifier_jobs_respect_experiment_subsets():
    cfg = load(REPO / "presets" / "afhq256.yaml")
    jobs = oc.classifier_jobs(cfg)
    scaling = [j for j in jobs if j["experiment"] == "scaling"]
    assert len(scaling) == len(cfg["classifiers"]["archs"]) * len(cfg["splits"]["sizes"]) * len(cfg["splits"]["seeds"])
    soft = [j for j in jobs if j["experiment"] == "soft_labels"]
    assert {j["arch"] for j in soft} == {"resnet18"} and {j["N"] for j in soft} == {100, 500, 1000, 2000, 5000}
    assert len({(j["experiment"], j["arch"], j["N"], j["seed"]) for j in jobs}) == len(jobs)


def test_rule_resources_single_and_multi_node():
    cfg = load(REPO / "presets" / "afhq256.yaml")
    r = oc.rule_resources(cfg, "oracle")
    assert r["gpu"] == 8 and r["nodes"] == 1 and "gres" not in r and "mpi" not in r
    assert oc.rule_resources(cfg, "classifiers")["gpu"] == 1
    assert "gpu" not in oc.rule_resources(cfg, "splits")
    cfg = load(REPO / "presets" / "imagenet128.yaml")
    r = oc.rule_resources(cfg, "oracle")
    assert r["nodes"] == 4 and r["gres"] == "gpu:8" and r["tasks"] == 4 and r["mpi"] == "srun" and "gpu" not in r


def test_oracle_launcher():
    assert oc.oracle_launcher(0, 1, "/venv/bin/python") == []
    assert oc.oracle_launcher(1, 1, "/venv/bin/python") == []
    cmd = oc.oracle_launcher(8, 1, "/venv/bin/python")
    assert cmd[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"] and "--standalone" in cmd
    assert cmd[cmd.index("--nproc_per_node") + 1] == "8" and "srun" not in cmd
    cmd = oc.oracle_launcher(32, 4, "/venv/bin/python", head_node="gpu017", job_id="123")
    assert cmd[:6] == ["srun", "--nodes", "4", "--ntasks-per-node", "1", "--gres=gpu:8"]
    assert cmd[cmd.index("--nnodes") + 1] == "4" and cmd[cmd.index("--nproc_per_node") + 1] == "8"
    assert cmd[cmd.index("--rdzv_endpoint") + 1] == "gpu017:29500"
    with pytest.raises(ConfigError, match="SLURM"):
        oc.oracle_launcher(32, 4, "python")


def test_gpus_from_resources_inverts_rule_resources():
    for preset, expected in (("afhq256", (8, 1)), ("imagenet64", (8, 1)), ("imagenet128", (32, 4))):
        cfg = load(REPO / "presets" / f"{preset}.yaml")
        assert oc.gpus_from_resources(oc.rule_resources(cfg, "oracle")) == expected
    assert oc.gpus_from_resources(oc.rule_resources(load(DEFAULT), "oracle")) == (0, 1)


def test_flow_spec_checks_divisibility(default):
    spec = oc.flow_spec(default, 1, 8, 10)
    assert spec["num_classes"] == 10 and spec["img_size"] == 8 and spec["per_class"] is False
    default["oracle"]["flow"]["patch_size"] = 3
    with pytest.raises(ConfigError, match="patch_size"):
        oc.flow_spec(default, 1, 8, 10)


def test_paper_values_in_presets():
    """Table 5 and section 4 values, read from the paper by hand."""
    afhq = load(REPO / "presets" / "afhq256.yaml")
    f, t = afhq["oracle"]["flow"], afhq["oracle"]["train"]
    assert (afhq["data"]["image_size"], f["channels"], f["patch_size"], f["num_blocks"], f["layers_per_block"]) == (256, 768, 8, 8, 8)
    assert (t["noise_std"], t["lr"], t["batch_size"], t["epochs"], t["label_dropout"]) == (0.07, 1e-4, 256, 4000, 0.1)
    assert afhq["oracle"]["label_temperature"] == 500 and afhq["samples"]["n_total"] == 50000
    assert {100, 1000, 5000, 10000, 40000} <= set(afhq["splits"]["sizes"]) and len(afhq["splits"]["seeds"]) == 3
    assert afhq["oracle"]["checkpoint_format"] == "public_tarflow"
    i64 = load(REPO / "presets" / "imagenet64.yaml")
    f, t = i64["oracle"]["flow"], i64["oracle"]["train"]
    assert (f["channels"], f["patch_size"], t["noise_std"], t["batch_size"], t["epochs"]) == (768, 2, 0.05, 256, 200)
    assert max(i64["splits"]["sizes"]) == 45000 and i64["oracle"]["label_temperature"] == 1
    assert i64["resources"]["oracle"]["gpus"] == 8
    i128 = load(REPO / "presets" / "imagenet128.yaml")
    f, t = i128["oracle"]["flow"], i128["oracle"]["train"]
    assert (f["channels"], f["patch_size"], t["noise_std"], t["batch_size"], t["epochs"]) == (1024, 4, 0.15, 768, 320)
    assert i128["resources"]["oracle"]["gpus"] == 32
    for cfg in (afhq, i64, i128):
        assert cfg["samples"]["class_batch"] == 50
        assert cfg["resources"]["samples"]["gpus"] == 1 and cfg["resources"]["classifiers"]["gpus"] == 1
        models = {a.get("model", name) for name, a in cfg["classifiers"]["archs"].items()}
        assert {"vit_base_patch16_224", "convnext_tiny", "swin_tiny_patch4_window7_224", "mobilenetv3_large_100"} <= models


# ----------------------------------------------------------------------------- Snakemake CLI


def snakemake(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(cwd), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def job_counts(stdout: str) -> dict[str, int]:
    block = stdout.split("Job stats:")[1].split("total")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.mark.parametrize("path", [None, SMOKE, *PRESETS], ids=lambda p: "default" if p is None else p.stem if p.stem != "config" else "smoke")
def test_dry_run_builds_full_dag_without_data(path, tmp_path):
    args = ["-n", "--cores", "1", "--quiet", "rules"]
    if path is not None:
        args = ["--configfile", str(path), *args]
    proc = snakemake(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    counts = job_counts(proc.stdout)
    cfg = load(path or DEFAULT)
    assert counts["classifier"] == len(oc.classifier_jobs(cfg))
    assert counts["sample_shard"] == cfg["samples"]["n_shards"]
    for rule in ("merge_samples", "make_splits", "table1", "table2", "fig2", "fig5", "numbers", "effective_config"):
        assert counts[rule] == 1, rule
    if oc.world_kind(cfg) == "gaussian":
        # the analytic world needs no real data and no flow
        assert "data" not in counts and counts["oracle_gaussian"] == 1
    else:
        assert counts["data"] == 1
        assert counts.get("oracle_train", 0) + counts.get("oracle_import", 0) == 1
    assert not (tmp_path / "results").exists()


def test_named_targets_dry_run(tmp_path):
    proc = snakemake("table2", "-n", "--cores", "1", "--quiet", "rules", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts["table2"] == 1 and "fig2" not in counts and "numbers" not in counts


def test_cli_rejects_unknown_key_naming_it(tmp_path):
    cfg = load(DEFAULT)
    cfg["splits"]["sizez"] = [1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--configfile", str(bad), cwd=tmp_path)
    assert proc.returncode != 0
    assert "config key 'splits': unknown key 'sizez'" in proc.stderr + proc.stdout


def test_lint_is_clean(tmp_path):
    proc = snakemake("--lint", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_classifier_bundling_and_runtime_scale_with_n():
    cfg = load(DEFAULT)
    sizes = sorted(oc.all_sizes(cfg))
    r = cfg["resources"]["classifiers"]
    r.update(runtime=480, bundle_max_n=sizes[1], runtime_scales_with_n=False)
    assert [oc.classifier_group(cfg, n) for n in sizes[:3]] == [
        oc.CLASSIFIER_GROUP, oc.CLASSIFIER_GROUP, oc.LARGE_CLASSIFIER_GROUP]
    assert {oc.classifier_runtime(cfg, n) for n in sizes} == {480}
    r["runtime_scales_with_n"] = True
    n_max = sizes[-1]
    for n in sizes:
        assert oc.classifier_runtime(cfg, n) == max(-(-480 * n // n_max), 10)
    assert oc.classifier_runtime(cfg, n_max) == 480
    r["bundle_max_n"] = None
    assert {oc.classifier_group(cfg, n) for n in sizes} == {oc.CLASSIFIER_GROUP}
