"""The config schema, the presets, the cross-key checks and the DAG of every config.

The DAG tests run the snakemake CLI (dry-run, lint) in a temporary working directory where no
data, checkpoint or result exists: every preset must build its full DAG without them.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oracle.errors import ConfigError
from oracle.experiments import kind_module
from oracle.workflow.plan import config as oc
from oracle.workflow import plan
from oracle.workflow.plan import resources as res

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
    return oc.full_schema(SCHEMA)  # with every kind's entry schema


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
    default["experiments"]["scaling"]["sizes"] = [50, -3]
    with pytest.raises(ConfigError, match=r"'experiments\.scaling\.sizes\[1\]'"):
        oc.validate_config(default, schema)


def test_experiment_keys_are_checked_by_kind(default, schema):
    default["experiments"]["scaling"]["sizez"] = [1]
    with pytest.raises(ConfigError, match=r"'experiments\.scaling'.*unknown key 'sizez'"):
        oc.validate_config(default, schema)
    default["experiments"]["scaling"].pop("sizez")
    default["experiments"]["scaling"]["kind"] = "scalling"
    with pytest.raises(ConfigError, match=r"'experiments\.scaling\.kind'"):
        oc.validate_config(default, schema)


def test_world_variant_keys_are_checked(default, schema):
    default["worlds"]["hot"] = {"base_temperature": 1.5, "temperature": 2}
    with pytest.raises(ConfigError, match=r"'worlds\.hot'.*unknown key 'temperature'"):
        oc.validate_config(default, schema)
    del default["worlds"]["base"]
    default["worlds"]["hot"].pop("temperature")
    with pytest.raises(ConfigError, match=r"'worlds'.*'base'"):
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


@pytest.mark.parametrize("key, text", [("samples.n_total", "1e12"), ("oracle.train.batch_size", "1e20"),
                                       ("samples.batch_size", "1e9"), ("worlds.base.n_total", "1e9"),
                                       ("samples.n_shards", "1e7")])
def test_sizes_no_machine_holds_are_refused_in_one_line(default, tmp_path, capsys, key, text):
    """Issue 38 case 5: `samples.n_total: 1e12` started sampling (ETA 85,000 h) and a batch of
    1e20 rows grew to 13 GB at step 0. Written as in a config file (YAML 1.1 reads 1e12 as a
    string, which the schema takes for the number), each is refused when the config is read."""
    cfg = copy.deepcopy(default)
    *parents, leaf = key.split(".")
    node = cfg
    for k in parents:
        node = node[k]
    node[leaf] = "PLACEHOLDER"
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False).replace("PLACEHOLDER", text))
    assert oc.main([str(path)]) == 1
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and f"config key '{key}'" in out and "is greater than the maximum" in out, out


def test_missing_key_is_named(default, schema):
    del default["samples"]["n_shards"]
    with pytest.raises(ConfigError, match="'samples'.*'n_shards'"):
        oc.validate_config(default, schema)


def test_every_object_of_the_schema_rejects_unknown_keys(schema):
    """additionalProperties: false everywhere (maps keyed by name use a schema instead; an
    experiment entry is dispatched by `kind` to its $defs entry, which rejects unknown keys)."""

    def dispatches_by_kind(node):
        return bool(node.get("allOf")) and all("then" in part and "$ref" in part["then"] for part in node["allOf"])

    def walk(node, where):
        if isinstance(node, dict):
            typed = node.get("type") == "object" or (isinstance(node.get("type"), list) and "object" in node["type"])
            if typed and not dispatches_by_kind(node):
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


@pytest.mark.parametrize("judged_on, text", [
    ({"archs_differ": "labels"}, r"'claims\.judged_on\.archs_differ'.*'labels' is a labels experiment; archs_differ is "
                                 r"judged on a scaling experiment"),
    ({"archs_differ": "scaling-wide"}, r"'claims\.judged_on\.archs_differ'.*no experiment named 'scaling-wide' \(the "
                                       r"scaling experiments: scaling, scaling-floor\)"),
    ({"archs_differs": "scaling"}, r"'claims\.judged_on\.archs_differs'.*not a finding of claims\.csv"),
])
def test_claims_judged_on_names_a_finding_and_an_experiment_of_its_kind(default, schema, judged_on, text):
    default["claims"] = {"judged_on": judged_on}
    oc.validate_config(default, schema)  # the schema takes any names: the cross-key check names the cause
    with pytest.raises(ConfigError, match=text):
        oc.check_config(default)
    default["claims"] = {"judged_on": {"archs_differ": "scaling-floor"}}
    oc.check_config(default)


def test_size_larger_than_pool_names_n(default):
    world = default["worlds"][default["experiments"]["scaling"]["world"]]
    pool = world["n_total"] - world.get("test_size", default["splits"]["test_size"])
    default["experiments"]["scaling"]["sizes"] = [50, pool]  # N + 200 validation rows: 200 too many
    with pytest.raises(ConfigError, match=rf"'experiments\.scaling\.sizes'.*N={pool} .*\({pool} = "):
        oc.check_config(default)


def test_size_larger_than_a_variants_pool_names_the_world(default):
    n = max(default["experiments"]["scaling"]["sizes"])  # the world's pool holds 500 rows, fewer than N + 200
    default["worlds"]["small"] = {"n_total": 1500}
    default["experiments"]["small"] = {**default["experiments"]["scaling"], "world": "small"}
    with pytest.raises(ConfigError, match=rf"'experiments\.small\.sizes'.*N={n} \+ 200 validation rows.*world 'small'.*500"):
        oc.check_config(default)


def test_prior_must_sum_to_one(default):
    default["worlds"]["base"]["prior"] = [0.5, 0.6]
    with pytest.raises(ConfigError, match="'worlds.base.prior'"):
        oc.check_config(default)
    default["worlds"]["base"]["prior"] = None
    default["worlds"]["skew"] = {"prior": [0.9, 0.2]}
    with pytest.raises(ConfigError, match="'worlds.skew.prior'"):
        oc.check_config(default)


def test_prior_length_is_checked_when_k_is_known(default):
    """K fixed by the data kind (digits: 10), by data.classes or a Gaussian world is checked
    when the config is read; an image folder's K only by the data stage."""
    default["worlds"]["base"]["prior"] = [0.5, 0.5]
    with pytest.raises(ConfigError, match=r"'worlds\.base\.prior'.*2 entries.*the digits data has 10"):
        oc.check_config(default)  # a dry run refuses it: no flow job learns it after its outputs were deleted
    folder = copy.deepcopy(default)
    folder["data"].update(kind="image_folder", root="some/folder")
    oc.check_config(folder)  # K is known only once the data are read
    with pytest.raises(ConfigError, match=r"'worlds\.base\.prior'.*2 entries.*the image_folder data has 10"):
        oc.check_prior_length(folder, 10, "the image_folder data")
    default["data"]["classes"] = ["a", "b", "c"]
    with pytest.raises(ConfigError, match=r"'worlds\.base\.prior'.*2 entries.*3 classes"):
        oc.check_config(default)


def test_unknown_arch_and_world_in_experiment(default):
    default["experiments"]["scaling"]["archs"] = ["resnet18"]
    with pytest.raises(ConfigError, match="'experiments.scaling.archs'.*'resnet18'"):
        oc.check_config(default)
    default["experiments"]["scaling"]["archs"] = ["test_vit"]
    default["experiments"]["scaling"]["world"] = "hot"
    with pytest.raises(ConfigError, match="'experiments.scaling.world'.*'hot'"):
        oc.check_config(default)


def test_source_labels_are_refused_at_label_temperature_not_one(default):
    default["experiments"]["scaling"]["hard_label"] = "source"
    oc.check_config(default)  # T = 1: the source class is a draw from p(y|x)
    default["worlds"]["base"]["label_temperature"] = 3.0
    with pytest.raises(ConfigError, match=r"'experiments\.scaling\.hard_label'.*T=3"):
        oc.check_config(default)
    default["experiments"]["scaling"]["hard_label"] = "label"
    oc.check_config(default)


def test_table_options_name_the_experiments_sizes_and_archs(default):
    default["experiments"]["scaling"]["table_size"] = 77
    with pytest.raises(ConfigError, match=r"'experiments\.scaling\.table_size'.*N=77"):
        oc.check_config(default)


def test_paper_ids_must_name_an_artifact(default):
    default["paper"]["fig7"] = "scaling/soft_vs_hard"
    with pytest.raises(ConfigError, match=r"'paper\.fig7'.*no artifact 'soft_vs_hard'"):
        oc.check_config(default)
    default["paper"]["fig7"] = "hard_vs_soft/soft_vs_hard"
    with pytest.raises(ConfigError, match=r"'paper\.fig7'.*'hard_vs_soft' is neither"):
        oc.check_config(default)


def test_reserved_experiment_names(default):
    default["experiments"]["validation"] = default["experiments"].pop("scaling")
    with pytest.raises(ConfigError, match="'experiments.validation'.*reserved"):
        oc.check_config(default)


def test_world_variants_inherit_from_base_and_get_their_own_seed(default):
    default["worlds"] = {"base": default["worlds"]["base"]}  # the default's own variants aside
    default["worlds"]["base"]["label_temperature"] = 2.0
    default["worlds"]["hot"] = {"base_temperature": 1.3, "n_total": 600}
    default["worlds"]["twin"] = {"seed": 0}
    specs = plan.world_specs(default)
    assert list(specs) == ["base", "hot", "twin"]
    assert specs["hot"] == {"prior": None, "label_temperature": 2.0, "base_temperature": 1.3, "n_total": 600,
                            "n_shards": 2, "test_size": 1000, "seed": plan.derived_seed(0, "hot")}
    assert specs["base"]["seed"] == 0 and specs["twin"]["seed"] == 0
    assert specs["hot"]["seed"] != 0 and plan.derived_seed(0, "hot") == plan.derived_seed(0, "hot")
    assert plan.derived_seed(0, "hot") != plan.derived_seed(1, "hot") != plan.derived_seed(0, "cold")


def test_misspelled_timm_arch_fails_at_config_time_and_a_missing_pretrained_file_is_listed(default, tmp_path):
    oc.check_classifier_archs(default)
    default["classifiers"]["archs"]["test_resnet"]["model"] = "test_resnett"
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_resnet\.model'.*'test_resnett'.*similar.*test_resnet"):
        oc.check_classifier_archs(default)
    default["classifiers"]["archs"]["test_resnet"]["model"] = "test_resnet"
    default["classifiers"]["archs"]["test_resnet"]["pretrained"] = str(tmp_path / "nope.pth")
    oc.check_classifier_archs(default)  # a file not there: `check_pretrained_files` refuses it (below)
    missing = oc.missing_files(default)
    assert [(m.key, m.path) for m in missing] == [("classifiers.archs.test_resnet.pretrained", str(tmp_path / "nope.pth"))]
    assert "train_classifier" in missing[0].rules
    (tmp_path / "nope.pth").write_bytes(b"not a state dict")  # there, but garbage: fails when the config is read
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_resnet\.pretrained'"):
        oc.check_classifier_archs(default)
    assert oc.missing_files(default) == []


def test_a_missing_pretrained_file_is_refused_in_one_line_unless_a_dry_run_plans_only(default, tmp_path, monkeypatch):
    """Issue 49: a `pretrained:` path with no file is a bad config, refused when the config is read
    in one line naming the key, the path and the file expected; `allow_missing` (a dry run under
    ORACLE_PLAN_ONLY=1) lets the plan list it instead. A file that is there passes."""
    oc.check_pretrained_files(default)  # the default trains from scratch: no weights to check
    monkeypatch.chdir(tmp_path)
    default["classifiers"]["archs"]["test_resnet"]["pretrained"] = "weights/nope.pth"
    with pytest.raises(ConfigError) as e:
        oc.check_pretrained_files(default)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("config key 'classifiers.archs.test_resnet.pretrained': "), msg
    assert "no weights file at 'weights/nope.pth'" in msg and "timm model 'test_resnet'" in msg
    assert "torch.save" in msg and f"relative paths from {tmp_path}" in msg and "ORACLE_PLAN_ONLY=1 snakemake -n" in msg
    oc.check_pretrained_files(default, allow_missing=True)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "nope.pth").write_bytes(b"")  # there: what it holds is check_classifier_archs's to read
    oc.check_pretrained_files(default)
    # an architecture no experiment trains is not read by any job: its file is not asked for
    default["classifiers"]["archs"]["unused"] = {"model": "test_resnet", "input_size": 8, "pretrained": "gone.pth"}
    oc.check_pretrained_files(default)


@pytest.mark.parametrize("value, expected", [(None, False), ("", False), ("0", False), ("1", True), (" 1 ", True)])
def test_plan_only_reads_its_environment_variable(value, expected):
    assert oc.plan_only({} if value is None else {"ORACLE_PLAN_ONLY": value}) is expected


def test_a_bad_plan_only_value_names_the_variable():
    with pytest.raises(ConfigError, match=r"environment variable ORACLE_PLAN_ONLY='yes': expected 1 .* or 0"):
        oc.plan_only({"ORACLE_PLAN_ONLY": "yes"})


def test_missing_files_name_data_checkpoint_and_weights(default, tmp_path):
    """Every file outside results/ a run reads, listed where it is not there, with what it must hold."""
    cfg = copy.deepcopy(default)
    assert oc.missing_files(cfg) == []  # the digits ship with scikit-learn
    cfg["data"].update(kind="image_folder", root=str(tmp_path / "imgs"))
    cfg["oracle"]["checkpoint"] = str(tmp_path / "flow.pt")
    cfg["validation"].update(enabled=True, inception_weights=str(tmp_path / "incep.pth"), resnet_weights=None)
    missing = oc.missing_files(cfg)
    assert [m.key for m in missing] == ["data.root", "oracle.checkpoint", "validation.inception_weights"]
    assert "<root>/<split>/<class_name>" in missing[0].what and missing[0].rules == ("data",)
    text = oc.missing_files_text(missing)
    assert text.count("\n") == 3 and f"data.root: {tmp_path / 'imgs'}" in text and "read by rule oracle_import" in text
    err = str(oc.missing_files_error(missing))
    assert "\n" not in err and "3 file(s) this run reads are not there" in err and "snakemake -n" in err
    # a root whose loader finds its files, a checkpoint that is a file: no longer missing
    for split in ("train", "test"):
        (tmp_path / "imgs" / split / "a").mkdir(parents=True)
    (tmp_path / "flow.pt").write_bytes(b"x")
    assert [m.key for m in oc.missing_files(cfg)] == ["validation.inception_weights"]
    cfg["validation"]["enabled"] = False
    assert oc.missing_files(cfg) == []


def test_root_required_for_folders(default):
    default["data"]["kind"] = "image_folder"
    with pytest.raises(ConfigError, match="'data.root'"):
        oc.check_config(default)


def test_gpus_must_split_over_nodes(default):
    default["resources"]["oracle"].update(gpus=12, nodes=8)
    with pytest.raises(ConfigError, match="resources.oracle"):
        oc.check_config(default)


# ----------------------------------------------------------------------------- derived values


def e_max(cfg: dict) -> int:
    return max(cfg["experiments"]["scaling"]["sizes"])


def test_paper_values_in_presets():
    """Table 5 and section 4 values, read from the paper by hand."""
    afhq = load(REPO / "presets" / "afhq256.yaml")
    f, t = afhq["oracle"]["flow"], afhq["oracle"]["train"]
    assert (afhq["data"]["image_size"], f["channels"], f["patch_size"], f["num_blocks"], f["layers_per_block"]) == (256, 768, 8, 8, 8)
    assert (t["noise_std"], t["lr"], t["batch_size"], t["epochs"], t["label_dropout"]) == (0.07, 1e-4, 256, 4000, 0.1)
    assert afhq["worlds"]["base"]["label_temperature"] == 500
    # Table 1 at N = 50K, scored on appendix F.1's 2,000-row test set; the pool must hold 50K
    assert afhq["splits"]["test_size"] == 2000 and e_max(afhq) == 50000 == afhq["experiments"]["scaling"]["table_size"]
    assert afhq["samples"]["n_total"] - afhq["splits"]["test_size"] >= 50000
    e = afhq["experiments"]["scaling"]
    assert {100, 1000, 5000, 10000, 40000} <= set(e["sizes"]) and len(e["seeds"]) == 3
    assert e["hard_label"] == "label"  # T = 500: train on y ~ p_T(y|x), never the source class
    assert afhq["oracle"]["checkpoint"] is None  # appendix C: trained from scratch, not the public checkpoint
    # Table 6: ImageNet-1K-pretrained ResNet-50, from a local file the config names
    shift_arch = afhq["classifiers"]["archs"][afhq["experiments"]["shift"]["archs"][0]]
    assert shift_arch["model"] == "resnet50" and str(shift_arch["pretrained"]).endswith(".pth")
    i64 = load(REPO / "presets" / "imagenet64.yaml")
    f, t = i64["oracle"]["flow"], i64["oracle"]["train"]
    assert (f["channels"], f["patch_size"], t["noise_std"], t["batch_size"], t["epochs"]) == (768, 2, 0.05, 256, 200)
    assert max(i64["experiments"]["scaling"]["sizes"]) == 45000 and i64["worlds"]["base"]["label_temperature"] == 1
    assert i64["data"]["kind"] == "imagenet_downsampled"
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


def snakemake(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "-d", str(cwd), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def job_counts(stdout: str) -> dict[str, int]:
    block = stdout.split("Job stats:")[1].split("total")[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.mark.parametrize("path", [None, SMOKE, *PRESETS], ids=lambda p: "default" if p is None else p.stem if p.stem != "config" else "smoke")
def test_dry_run_builds_full_dag_without_data(path, dag_dry_run):
    # the session's one dry run of this config (tests/conftest.py): its default target's DAG
    dry = dag_dry_run("default" if path is None else "smoke/config" if path == SMOKE else path.stem)
    counts = dry.job_counts()
    cfg = load(path or DEFAULT)
    assert dry.config == cfg
    runs = plan.classifier_runs(cfg)
    assert counts["train_classifier"] == len(plan.classifier_models(cfg)) <= len(runs)  # one model, trained once
    assert counts["predict_classifier"] == len(plan.prediction_jobs(cfg))
    worlds = plan.world_specs(cfg)
    assert counts["sample_shard"] == sum(w["n_shards"] for w in worlds.values())
    assert counts["merge_samples"] == counts["world_constants"] == counts["world_numbers"] == len(worlds)
    assert counts["make_splits"] == len(plan.split_worlds(cfg))
    experiments = plan.experiment_specs(cfg)
    assert counts["experiment_numbers"] == len(experiments)
    arts = [a for e in experiments.values() for a in kind_module(e["kind"]).ARTIFACTS.values()]
    assert counts["experiment_table"] == sum(a.type == "table" for a in arts)
    assert counts["experiment_figure"] == sum(a.type == "figure" for a in arts)
    active = {n: e for n, e in experiments.items() if e["kind"] == "active"}
    assert counts.get("active_learning", 0) == sum(len(kind_module("active").runs(e)) for e in active.values())
    # round 0 once per (experiment, arch, seed), shared by the strategies
    assert counts.get("active_round_zero", 0) == sum(len(e["archs"]) * len(e["seeds"]) for e in active.values())
    assert counts.get("active_collect", 0) == len(active)
    for rule in ("numbers", "effective_config", "timings", "report"):
        assert counts[rule] == 1, rule
    if plan.world_kind(cfg) == "gaussian":
        # the analytic world needs no real data and no flow
        assert "data" not in counts and counts["oracle_gaussian"] == 1
    else:
        assert counts["data"] == 1
        assert counts.get("oracle_train", 0) + counts.get("oracle_import", 0) == 1
    assert not (dry.workdir / "results").exists()


def test_named_targets_dry_run(tmp_path):
    """`snakemake fig2` builds one figure: the paper's numbering is a named target."""
    proc = snakemake("table2", "-n", "--cores", "1", "--quiet", "rules", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout)
    assert counts["experiment_table"] == 1 and "experiment_figure" not in counts and "numbers" not in counts
    proc = snakemake("fig2", "-n", "--cores", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scaling/scaling/figures/scaling_panels.png" in proc.stdout
    assert "epistemic_curves" not in proc.stdout


def test_cli_rejects_unknown_key_naming_it(tmp_path):
    cfg = load(DEFAULT)
    cfg["splits"]["sizes"] = [1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--configfile", str(bad), cwd=tmp_path)
    assert proc.returncode != 0
    assert "config key 'splits': unknown key 'sizes'" in proc.stderr + proc.stdout


def test_the_workflow_refuses_a_bad_arch_when_it_reads_the_config(tmp_path):
    """Found when the config is read (even a dry run), not after data, flow and samples."""
    cfg = load(DEFAULT)
    cfg["classifiers"]["archs"]["test_resnet"]["model"] = "test_resnett"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    proc = snakemake("-n", "--configfile", str(bad), cwd=tmp_path)
    expected = "'classifiers.archs.test_resnet.model': 'test_resnett' is not a timm model name"
    assert proc.returncode != 0 and expected in proc.stderr + proc.stdout, proc.stderr[-2000:]


def test_missing_weights_refuse_a_dry_run_unless_it_plans_only_and_always_a_run(tmp_path):
    """Issue 49: a missing `pretrained:` file stops `snakemake -n` when the config is read, in one
    line naming the key, with no traceback; under ORACLE_PLAN_ONLY=1 the dry run plans the DAG and
    lists it (a cluster run planned before the weights arrive); a run refuses it in one line before
    any job, ORACLE_PLAN_ONLY or not (docs/gpu.md: dry-run a preset first)."""
    cfg = load(DEFAULT)
    cfg["classifiers"]["archs"]["test_resnet"]["pretrained"] = "weights/nope.pth"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    key = "config key 'classifiers.archs.test_resnet.pretrained': no weights file at 'weights/nope.pth'"
    for args, env in ((["-n"], {}), (["--cores", "1"], {"ORACLE_PLAN_ONLY": "1"})):
        proc = snakemake(*args, "--configfile", str(bad), cwd=tmp_path, env=env)
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ConfigError")]
        assert proc.returncode == 1 and len(errors) == 1 and key in errors[0], (args, env, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr + proc.stdout
        assert not (tmp_path / "results").exists()  # no job ran
    dry = snakemake("-n", "--configfile", str(bad), cwd=tmp_path, env={"ORACLE_PLAN_ONLY": "1"})
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "This run still needs 1 file(s)" in dry.stderr and "classifiers.archs.test_resnet.pretrained: weights/nope.pth" in dry.stderr
    assert "pretrained weights weights/nope.pth (config key classifiers.archs.test_resnet.pretrained)" in dry.stderr
    assert "a dry run plans without them, a pretrained weights file only under ORACLE_PLAN_ONLY=1;" in dry.stderr


def test_lint_is_clean(tmp_path):
    proc = snakemake("--lint", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_classifier_bundling_and_runtime_scale_with_n():
    cfg = load(DEFAULT)
    sizes = cfg["experiments"]["scaling"]["sizes"]
    n_max = plan.largest_training_size(cfg)
    assert n_max == max(sizes)
    r = cfg["resources"]["classifiers"]
    r.update(runtime=480, bundle_max_n=sizes[1], runtime_scales_with_n=False)
    assert [res.classifier_group(cfg, n) for n in sizes[:3]] == [
        res.CLASSIFIER_GROUP, res.CLASSIFIER_GROUP, res.LARGE_CLASSIFIER_GROUP]
    assert {res.classifier_runtime(cfg, n, n_max) for n in sizes} == {480}
    r["runtime_scales_with_n"] = True
    for n in sizes:
        assert res.classifier_runtime(cfg, n, n_max) == max(-(-480 * n // n_max), 10)
    assert res.classifier_runtime(cfg, n_max, n_max) == 480
    r["bundle_max_n"] = None
    assert {res.classifier_group(cfg, n) for n in sizes} == {res.CLASSIFIER_GROUP}


def test_check_cli_names_file_line_and_key(tmp_path, capsys):
    """`python -m oracle.workflow.plan.config FILE` checks a config as the workflow would; a YAML
    error names the file, line and column (Snakemake's own message names neither)."""
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("run: x\nseed: [0\n")
    bad_key = tmp_path / "key.yaml"
    cfg = load(DEFAULT)
    cfg["experiments"]["scaling"]["sizes"] = [50, 999999]
    bad_key.write_text(yaml.safe_dump(cfg))
    assert oc.main([str(DEFAULT), str(bad_yaml), str(bad_key), str(tmp_path / "missing.yaml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{DEFAULT}: ok")
    assert f"'{bad_yaml}' is not valid YAML at line 3, column 1" in out[1]
    assert "'experiments.scaling.sizes': N=999999" in out[2]
    assert "does not exist" in out[3] and len(out) == 4


def test_check_cli_lists_what_a_preset_still_needs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the preset's relative paths, from an empty working directory
    assert oc.main([str(REPO / "presets" / "afhq256.yaml")]) == 0
    out = capsys.readouterr().out
    assert "This run still needs 4 file(s)" in out
    for key, path in (("data.root", "data/afhq"), ("classifiers.archs.resnet50_in1k.pretrained",
                                                   "data/weights/resnet50_in1k.pth"),
                      ("validation.inception_weights", "data/weights/pt_inception-2015-12-05.pth")):
        assert f"{key}: {path}" in out
