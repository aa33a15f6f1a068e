"""oracle.tools.gpu.cost (the projected GPU cost of docs/gpu.md) and oracle.tools.gpu.check (scripts/tools/gpu_check.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oracle.tools.gpu import cost as gpu_cost
from oracle.workflow import plan
from oracle.workflow.plan.config import check_config, load_yaml, validate_config
from oracle.tools.gpu.check import run_checks

REPO = Path(__file__).resolve().parents[1]
TINY_FLOW = {"patch_size": 8, "channels": 64, "num_blocks": 2, "layers_per_block": 1, "head_dim": 32, "nvp": True}


def _preset(name: str) -> dict:
    cfg = load_yaml(REPO / "presets" / f"{name}.yaml")
    validate_config(cfg, REPO / "config.schema.yaml")
    check_config(cfg)
    return cfg


@pytest.fixture
def tiny_afhq(monkeypatch):
    """The afhq256 preset with a small flow at 32 px and a constant classifier forward cost
    (the timm models are the slow part of counting; their plan is what these tests check)."""
    cfg = _preset("afhq256")
    cfg["oracle"]["flow"].update(TINY_FLOW)
    cfg["data"]["image_size"] = 32
    monkeypatch.setattr(gpu_cost, "classifier_forward_flops", lambda *a: 1_000_000)
    return cfg


def test_sampling_flops_fitted_equal_a_direct_count():
    spec = {"in_channels": 3, "img_size": (8, 8 * 9), "patch_size": 8, "channels": 64, "num_blocks": 2,
            "layers_per_block": 2, "head_dim": 32, "num_classes": 3}
    ff = gpu_cost.flow_flops(spec)
    flops, ops = gpu_cost._reverse_counts(spec, 9)  # the real token count, counted directly
    assert 9 not in gpu_cost.FIT_TOKENS
    assert ff.sample == 2 * flops and ff.sample_ops == 2 * ops
    assert ff.sample_steps == 2 * 8


def test_forward_and_training_flops_from_two_block_counts_equal_a_direct_count():
    spec = {"in_channels": 3, "img_size": 16, "patch_size": 4, "channels": 32, "num_blocks": 5,
            "layers_per_block": 2, "head_dim": 16, "num_classes": 3}
    ff = gpu_cost.flow_flops(spec)
    forward, train = gpu_cost._forward_train_counts(spec)  # all 5 blocks, counted directly
    assert (ff.forward, ff.train) == (forward, train)
    one, two = (gpu_cost._forward_train_counts({**spec, "num_blocks": k}) for k in (1, 2))
    assert two[0] > one[0] > 0 and forward > two[0]


def test_flow_training_is_three_forward_passes():
    spec = {"in_channels": 3, "img_size": 32, "patch_size": 4, "channels": 64, "num_blocks": 2,
            "layers_per_block": 2, "head_dim": 32, "num_classes": 3}
    ff = gpu_cost.flow_flops(spec)
    assert ff.forward > 0
    assert 2.9 < ff.train / ff.forward < 3.1
    # attention makes the inverse pass cheaper than a forward pass that computes all T x T scores
    assert 0.5 * ff.forward < ff.sample <= ff.forward


def test_stage_costs_follow_the_plan(tiny_afhq):
    cfg = tiny_afhq
    facts = gpu_cost.data_facts(cfg)
    stages = {s.stage: s for s in gpu_cost.stage_costs(cfg)}
    ff = gpu_cost.flow_flops(plan.flow_spec(cfg, 3, 32, 3))
    steps = plan.train_steps(cfg["oracle"]["train"], facts.n_train)
    assert stages["flow training"].flops == steps * 256 * ff.train
    assert stages["sampling"].flops == 52000 * ff.sample
    # the estimators experiment scores 4 noisy copies of the 2,000-row test set
    assert stages["posterior"].flops == (52000 + 4 * 2000) * 3 * ff.forward
    assert stages["precision check (float64)"].precision == "fp64"
    active = plan.experiment_spec(cfg, "active")
    n_active = len(active["strategies"]) * len(active["seeds"]) * (active["rounds"] + 1)
    assert stages["classifier training"].what.startswith(f"{len(plan.classifier_runs(cfg)) + n_active:,} models")
    # min_steps is 0: twice the epochs, twice the classifier training
    longer = copy.deepcopy(cfg)
    longer["classifiers"]["training"]["epochs"] *= 2
    longer["experiments"]["shift"]["training"]["epochs"] *= 2
    doubled = {s.stage: s for s in gpu_cost.stage_costs(longer)}
    assert doubled["classifier training"].flops == 2 * stages["classifier training"].flops
    assert doubled["predictions"].flops == stages["predictions"].flops


def test_gpu_hours_use_the_stated_peak_and_utilisation():
    s = gpu_cost.StageCost("x", 989e12 * 0.4 * 3600, "bf16", "")
    assert s.gpu_hours(gpu_cost.GPUS["H100"]) == pytest.approx(1.0)
    assert s.gpu_hours(gpu_cost.GPUS["A100"], 0.8) == pytest.approx(989 / 312 / 2)


def test_projection_holds_the_totals_and_the_flows_wall_time_on_its_gpus():
    """What the dry run prints beside its request (`oracle.workflow.plan.dry_run.projection_lines`):
    the run's GPU-hours per GPU type and flow training's hours on resources.oracle.gpus GPUs (the
    total over its nodes), for the config whose fingerprint it carries."""
    from oracle.workflow.plan.dry_run import config_fingerprint

    h100_hour = 989e12 * 0.4 * 3600  # FLOPs of one H100 GPU-hour at 40%
    stages = [gpu_cost.StageCost("flow training", 160 * h100_hour, "bf16", ""),
              gpu_cost.StageCost("sampling", 4 * h100_hour, "bf16", "")]
    cfg = {"resources": {"oracle": {"gpus": 32, "nodes": 4}}, "run": "x"}
    out = gpu_cost.projection(cfg, stages)
    assert out["config_sha256"] == config_fingerprint(cfg) and out["utilisation"] == 0.4
    assert out["gpu_hours"] == [["H100 SXM", 164.0], ["A100 SXM", round(164 * 989 / 312, 1)]]
    assert out["flow"] == {"gpus": 32, "wall_h": [["H100 SXM", 5.0], ["A100 SXM", round(160 * 989 / 312 / 32, 1)]]}
    assert gpu_cost.projection(cfg, stages[1:])["flow"] is None  # an imported flow trains nothing


def test_unknown_run_names_the_key():
    with pytest.raises(Exception, match="config key 'run'"):
        gpu_cost.data_facts({"run": "mine"})


def test_a_failing_check_is_reported_and_the_others_run():
    cfg = _preset("afhq256")
    lines = []
    out = run_checks(cfg, torch.device("cpu"), ["classifier"], small=True, arch="no_such_arch", echo=lines.append)
    assert out == {}
    assert len(lines) == 1 and lines[0].startswith("classifier FAILED") and "no_such_arch" in lines[0]


@pytest.mark.slow
def test_gpu_check_small_runs_every_check_on_cpu(tmp_path):
    out = tmp_path / "checks.json"
    proc = subprocess.run([sys.executable, "scripts/tools/gpu_check.py", "--preset", "presets/afhq256.yaml", "--small",
                           "--device", "cpu", "--json-out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for check in ("posterior", "flow_step", "shard", "classifier"):
        assert any(line.startswith(f"{check} ok:") for line in lines), proc.stdout
    import json

    results = json.loads(out.read_text())["results"]
    assert set(results["posterior"]["modes"]) == {"float64", "float32", "bf16"}
    assert results["posterior"]["modes"]["float64"]["max_abs_dp"] == 0.0


@pytest.mark.slow
def test_gpu_cost_table_is_current():
    """docs/gpu.md's table equals what scripts/tools/gpu_cost_table.py computes now."""
    proc = subprocess.run([sys.executable, "scripts/tools/gpu_cost_table.py", "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=3600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
