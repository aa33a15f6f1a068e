"""What the workflow derives from a config (oracle.workflow.plan, oracle.workflow.plan.resources):
shards, step counts, the classifier runs of each experiment, training overrides, rule
resources and the multi-node flow launcher, and the flow spec's checks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oracle.errors import ConfigError
from oracle.workflow import plan
from oracle.workflow.plan import resources as res

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "config.yaml"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.fixture
def default() -> dict:
    return load(DEFAULT)


def test_shard_sizes_cover_n_total():
    for n, s in [(10, 3), (3200, 2), (50000, 50), (7, 7)]:
        sizes = plan.shard_sizes(n, s)
        assert sum(sizes) == n and len(sizes) == s and max(sizes) - min(sizes) <= 1
    with pytest.raises(ConfigError):
        plan.shard_sizes(2, 3)


def test_train_steps_from_epochs():
    # AFHQ, Table 5: 4000 epochs over 14,630 images at batch 256 (computed independently)
    assert plan.train_steps({"steps": None, "epochs": 4000, "batch_size": 256}, 14630) == 228594
    assert plan.train_steps({"steps": 17, "epochs": None, "batch_size": 256}, 14630) == 17


def test_classifier_runs_follow_each_experiment():
    cfg = load(REPO / "presets" / "afhq256.yaml")
    runs = plan.classifier_runs(cfg)
    e = cfg["experiments"]["scaling"]
    scaling = [r for r in runs if r["experiment"] == "scaling"]
    assert len(scaling) == len(e["archs"]) * len(e["sizes"]) * len(e["seeds"])
    lab = [r for r in runs if r["experiment"] == "labels"]
    assert {r["arch"] for r in lab} == {"resnet18"}
    assert {r["cell"] for r in lab} == {f"{m}-N{n}" for m in ("hard", "soft") for n in (100, 500, 1000, 2000, 5000)}
    assert len(lab) == 2 * 5 * 3
    assert len({tuple(r.values()) for r in runs}) == len(runs)
    assert plan.training_spec(cfg, "labels", "hard-N500")["hard_label"] == "posterior_argmax"
    t = plan.training_spec(cfg, "labels", "soft-N1000")
    assert t == {"world": "base", "n": 1000, "labels": "soft", "hard_label": None,
                 "training": {"epochs": 40, "min_steps": 0, "batch_size": 32, "lr": 0.0001, "weight_decay": 0.01,
                              "val_size": 0, "patience": None, "eval_steps": 1, "tolerance": 0.01,
                              "decay_fraction": 0.2},
                 "curve_size": cfg["classifiers"]["curve_size"], "curve_points": cfg["classifiers"]["curve_points"]}
    # a training curve only where the experiment reads it: Figure 7's sizes (100, 1000, 5000)
    assert cfg["classifiers"]["curve_size"] > 0
    assert plan.training_spec(cfg, "labels", "soft-N500")["curve_size"] == 0
    assert plan.training_spec(cfg, "labels", "hard-N5000")["curve_size"] == cfg["classifiers"]["curve_size"]
    assert {plan.training_spec(cfg, "scaling", r["cell"])["curve_size"] for r in scaling} == {0}
    splits = plan.split_worlds(cfg)
    assert list(splits) == ["base"] and splits["base"]["seeds"] == [0, 1, 2] and splits["base"]["max_n"] == 50000


def test_an_experiment_overrides_single_training_keys(default):
    default["experiments"]["scaling"]["training"] = {"epochs": 3}
    t = plan.training_spec(default, "scaling", "N50")["training"]
    assert t["epochs"] == 3 and t["batch_size"] == default["classifiers"]["training"]["batch_size"]


def test_rule_resources_single_and_multi_node():
    cfg = load(REPO / "presets" / "afhq256.yaml")
    r = res.rule_resources(cfg, "oracle")
    assert r["gpu"] == 8 and r["nodes"] == 1 and "gres" not in r and "mpi" not in r
    assert res.rule_resources(cfg, "classifiers")["gpu"] == 1
    assert "gpu" not in res.rule_resources(cfg, "splits")
    cfg = load(REPO / "presets" / "imagenet128.yaml")
    r = res.rule_resources(cfg, "oracle")
    assert r["nodes"] == 4 and r["gres"] == "gpu:8" and r["tasks"] == 4 and r["mpi"] == "srun" and "gpu" not in r


def test_oracle_launcher():
    assert res.oracle_launcher(0, 1, "/venv/bin/python") == []
    assert res.oracle_launcher(1, 1, "/venv/bin/python") == []
    cmd = res.oracle_launcher(8, 1, "/venv/bin/python")
    assert cmd[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"] and "--standalone" in cmd
    assert cmd[cmd.index("--nproc_per_node") + 1] == "8" and "srun" not in cmd
    cmd = res.oracle_launcher(32, 4, "/venv/bin/python", head_node="gpu017", job_id="123")
    assert cmd[:6] == ["srun", "--nodes", "4", "--ntasks-per-node", "1", "--gres=gpu:8"]
    assert cmd[cmd.index("--nnodes") + 1] == "4" and cmd[cmd.index("--nproc_per_node") + 1] == "8"
    assert cmd[cmd.index("--rdzv_endpoint") + 1] == "gpu017:29500"
    with pytest.raises(ConfigError, match="SLURM"):
        res.oracle_launcher(32, 4, "python")


def test_gpus_from_resources_inverts_rule_resources():
    for preset, expected in (("afhq256", (8, 1)), ("imagenet64", (8, 1)), ("imagenet128", (32, 4))):
        cfg = load(REPO / "presets" / f"{preset}.yaml")
        assert res.gpus_from_resources(res.rule_resources(cfg, "oracle")) == expected
    assert res.gpus_from_resources(res.rule_resources(load(DEFAULT), "oracle")) == (0, 1)


def test_flow_spec_checks_divisibility(default):
    spec = plan.flow_spec(default, 1, 8, 10)
    assert spec["num_classes"] == 10 and spec["img_size"] == 8 and spec["per_class"] is False
    default["oracle"]["flow"]["patch_size"] = 3
    with pytest.raises(ConfigError, match="patch_size"):
        plan.flow_spec(default, 1, 8, 10)


def test_world_questions_name_the_experiments_of_each_world(default):
    q = plan.world_questions(default)
    assert list(q) == list(default["worlds"])  # every world, in config order, used or not
    # an experiment that trains and tests in one world (its `world` key) is listed there and nowhere else
    for name in ("scaling", "scaling-floor", "labels"):
        world = default["experiments"][name]["world"]
        kind = default["experiments"][name]["kind"]
        assert [w for w, users in q.items() if f"{name} ({kind})" in users] == [world], name
    # shift is asked in its training world and in each shifted world it tests on
    shifted = {c["world"] for c in default["experiments"]["shift"]["configurations"].values() if "world" in c}
    assert {w for w, users in q.items() if "shift (shift)" in users} == {default["experiments"]["shift"]["world"]} | shifted
    default["worlds"]["unused"] = default["worlds"]["base"]
    assert plan.world_questions(default)["unused"] == []
