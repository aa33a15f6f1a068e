"""A bad config costs nothing (issue 49): every value a job would refuse is refused when the config
is read, before Snakemake deletes a single output (oracle.workflow.plan.job_checks,
oracle.workflow.plan.budget, oracle.workflow.plan.config.check_finite).

The general rule is tested as one table: each row is a one-key change of the smoke config, the
job's own check run on what the job would be handed (it refuses the value), and the plan-time
check, which must refuse it too, naming the key. A slow test runs a few of them for real after a
finished valid run and compares every file's sha256 before and after.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from oracle.errors import ConfigError
from oracle.workflow import plan
from oracle.workflow.plan import budget
from oracle.workflow.plan import config as oc

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "tests" / "smoke" / "config.yaml"
SCHEMA = oc.full_schema(oc.SCHEMA_FILE)


def smoke() -> dict:
    return yaml.safe_load(SMOKE.read_text())


def read(cfg: dict) -> dict:
    """What the Snakefile does with a config before any job: validate, fill defaults, check."""
    oc.validate_config(cfg, SCHEMA)
    oc.fill_defaults(cfg, SCHEMA)
    oc.check_config(cfg)
    return cfg


def put(cfg: dict, key: str, value) -> dict:
    node = cfg
    *parents, last = key.split(".")
    for p in parents:
        node = node[p]
    node[last] = value
    return cfg


# ----------------------------------------------------------------------------- NaN and infinities


def _numbers(value, path=()):
    """(path, value) of every number (not bool) in a config, lists included."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, (*path, i))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def _set(cfg, path, value):
    node = cfg
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def test_nan_and_inf_in_every_numeric_key_are_refused_when_the_config_is_read():
    """JSON Schema's bounds are false for NaN (minimum: 0 passes .nan): without the walk a job
    refused the value after its outputs were deleted. Every number of the smoke config (the
    priors set so that they are numbers too), as NaN, inf and -inf."""
    base = smoke()
    base["worlds"]["base"]["prior"] = [0.1] * 10
    paths = list(_numbers(base))
    assert len(paths) > 60  # every stage's numbers, not a handful
    for path, _ in paths:
        key = oc._key_path(path)
        for bad in (math.nan, math.inf, -math.inf):
            cfg = copy.deepcopy(base)
            _set(cfg, path, bad)
            with pytest.raises(ConfigError, match=rf"config key {key!r}: {bad!r} is not a finite number".replace(
                    "[", r"\[").replace("]", r"\]")):
                read(cfg)
    read(base)  # and the config itself passes


# ----------------------------------------------------------------------------- the general rule


def _train_classifier(cfg: dict) -> None:
    """The classifier job's checks (oracle.classifiers.train.train_by_recipe) on the smoke
    experiment's training block and validation rows, on four rows of zeros."""
    from oracle.classifiers.specs import validation_size
    from oracle.classifiers.train import train_by_recipe

    spec = plan.experiment_spec(cfg, "scaling")
    t = plan.training_spec(cfg, "scaling", f"N{spec['sizes'][0]}")
    x, y = torch.zeros(4, 1, 8, 8), torch.zeros(4, dtype=torch.long)
    validation = (x, y) if validation_size(t) else None
    train_by_recipe(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10)), x, y, t["training"],
                    soft=False, seed=0, validation=validation, num_classes=10)


def _flow_job(cfg: dict) -> None:
    """The oracle_train job's checks (oracle.workflow.jobs.oracle_train): the flow's spec and
    training settings for the 600 digits it trains on (1 x 8 x 8, 10 classes)."""
    from oracle.flow_training import FlowTrainConfig

    plan.flow_spec({"oracle": cfg["oracle"]}, 1, 8, 10)
    FlowTrainConfig.from_dict(plan.flow_train_settings(cfg["oracle"]["train"], 600, 0))


def _data_job(cfg: dict) -> None:
    """The data job's check of the priors against the 10 digit classes (scripts/data.py)."""
    oc.check_prior_length(cfg, 10, "the digits data")


def _shard_job(cfg: dict) -> None:
    """The shard job's check of its precision mode on its device (oracle.float_precision)."""
    from oracle.float_precision import check_mode

    check_mode(cfg["samples"]["precision"], "cpu", allow_auto=True)


def _world_numbers(cfg: dict) -> None:
    """world_constants and world_numbers on a world of the config's prior (its rows drawn from
    that prior), as the world_constants and world_numbers jobs compute them."""
    from oracle.measures.world_constants import world_constants, world_numbers

    prior = np.asarray(cfg["worlds"]["base"]["prior"] or [0.1] * 10, dtype=np.float64)
    labels = np.random.default_rng(0).choice(len(prior), size=50, p=prior)
    log_p = np.log(np.full((50, len(prior)), 1e-6))
    log_p[np.arange(50), labels] = 0.0
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    world_numbers({"all": world_constants(log_p, prior)}, "constants.json")


def _stopping_rule(cfg: dict) -> None:
    from oracle.classifiers.stopping import StoppingRule

    StoppingRule.from_training(cfg["classifiers"]["training"])


#: (id, key, value, the job's own check on the changed config, what the plan-time error says)
GENERAL_RULE: list[tuple[str, str, object, Callable[[dict], None], str]] = [
    ("classifier lr nan", "classifiers.training.lr", math.nan, _train_classifier, "not a finite number"),
    ("classifier weight_decay nan", "classifiers.training.weight_decay", math.nan, _train_classifier,
     "not a finite number"),
    ("classifier tolerance nan", "classifiers.training.tolerance", math.nan, _stopping_rule, "not a finite number"),
    ("patience without validation rows", "classifiers.training.val_size", 0, _train_classifier,
     "'classifiers.training.patience'.*holds out no validation rows"),
    ("flow lr nan", "oracle.train.lr", math.nan, _flow_job, "not a finite number"),
    ("flow grad_clip nan", "oracle.train.grad_clip", math.nan, _flow_job, "not a finite number"),
    ("flow label_dropout nan", "oracle.train.label_dropout", math.nan, _flow_job, "not a finite number"),
    ("flow patch_size", "oracle.flow.patch_size", 3, _flow_job, "'oracle.flow.patch_size': 3 does not divide"),
    ("flow head_dim", "oracle.flow.head_dim", 12, _flow_job, "'oracle.flow.head_dim': 12 does not divide"),
    ("prior of 2 for 10 classes", "worlds.base.prior", [0.5, 0.5], _data_job,
     "'worlds.base.prior': has 2 entries but the digits data has 10 classes"),
    ("one-hot prior", "worlds.base.prior", [1.0] + [0.0] * 9, _world_numbers,
     "'worlds.base.prior'.*all its mass on one class"),
    ("tf32 on a CPU", "samples.precision", "tf32", _shard_job, "'samples.precision': 'tf32' is a CUDA mode"),
]


@pytest.mark.parametrize("case", GENERAL_RULE, ids=[c[0] for c in GENERAL_RULE])
def test_every_check_a_job_makes_runs_when_the_config_is_read(case):
    """Snakemake removes a job's outputs before the job runs: a value the job refuses (or dies
    of) must be refused when the config is read. The job's own check refuses the value; so does
    the plan, naming the key; the unchanged config passes both."""
    _, key, value, job, expected = case
    good = read(smoke())
    job(good)
    bad = put(copy.deepcopy(good), key, value)
    with pytest.raises((ConfigError, ZeroDivisionError)):
        job(bad)
    with pytest.raises(ConfigError, match=expected):
        read(put(smoke(), key, value))


def test_pretrained_true_is_refused_and_a_path_passes(tmp_path):
    """`pretrained: yes` (YAML true) trained from scratch while the records said True: refused;
    false and a path are the two meanings the schema documents."""
    cfg = put(smoke(), "classifiers.archs.test_resnet.pretrained", True)
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_resnet\.pretrained': true names no weights"):
        read(cfg)
    read(put(smoke(), "classifiers.archs.test_resnet.pretrained", str(tmp_path / "w.pth")))


# ----------------------------------------------------------------------------- memory and steps


def test_a_classifier_input_no_machine_holds_is_refused_naming_both_memories():
    """input_size 1e5 allocated 1.28 TB after two models were deleted: the plan counts the
    resized training batch (32 x 1 x s x s float32) and refuses it above this machine's memory
    and resources.classifiers.mem_mb, naming both; below either it passes."""
    side = 4096
    need = 32 * 1 * side * side * 4  # the smoke config's batch of 32 one-channel images
    cfg = read(put(smoke(), "classifiers.archs.test_resnet.input_size", side))
    specs = plan.experiment_specs(cfg)
    est = {e.key: e.nbytes for e in budget.memory_estimates(cfg, specs)}
    assert est["classifiers.archs.test_resnet.input_size"] == need
    node = cfg["resources"]["classifiers"]["mem_mb"] * 2**20
    assert node < need
    with pytest.raises(ConfigError, match=r"'classifiers\.archs\.test_resnet\.input_size': 4,096 needs at least "
                                          r"2\.1 GB .*this machine's 1\.0 GB and resources\.classifiers\.mem_mb \(2\.1 GB\)"):
        budget.check_budget(cfg, specs, memory=10**9)
    budget.check_budget(cfg, specs, memory=need)  # a machine that holds it
    cfg["resources"]["classifiers"]["mem_mb"] = need // 2**20 + 1
    budget.check_budget(cfg, specs, memory=10**9)  # a node that holds it


def test_precision_rows_and_a_flow_batch_are_estimated_from_the_config():
    cfg = read(smoke())
    est = {e.key: e for e in budget.memory_estimates(cfg, plan.experiment_specs(cfg))}
    rows = cfg["samples"]["precision_rows"]
    assert est["samples.precision_rows"].nbytes == rows * (64 * 4 + 2 * 10 * 8)
    f, batch = cfg["oracle"]["flow"], cfg["oracle"]["train"]["batch_size"]
    tokens, layers = (8 // f["patch_size"]) ** 2, f["num_blocks"] * f["layers_per_block"]
    assert est["oracle.train.batch_size"].nbytes == batch * (64 + layers * tokens * f["channels"]) * 4
    many = put(smoke(), "samples.precision_rows", 10**8)  # 1e8 x (256 B of x + 160 B of log-likelihoods)
    oc.validate_config(many, SCHEMA)
    oc.fill_defaults(many, SCHEMA)
    with pytest.raises(ConfigError, match=r"'samples\.precision_rows': 100,000,000 needs at least 41\.6 GB .*"
                                          r"this machine's 32\.0 GB"):
        budget.check_budget(many, plan.experiment_specs(many), memory=32 * 10**9)
    budget.check_budget(many, plan.experiment_specs(many), memory=42 * 10**9)


def test_a_flow_batch_larger_than_the_training_images_is_refused():
    """2^20 rows on 600 images grew to 12 GB at step 0: max_per_class x K bounds the images."""
    with pytest.raises(ConfigError, match=r"'oracle\.train\.batch_size': 1,048,576 is more than the at most 600 "
                                          r"training images .*data\.max_per_class=60 x 10 classes"):
        read(put(smoke(), "oracle.train.batch_size", 2**20))
    read(put(smoke(), "oracle.train.batch_size", 600))
    per_class = put(smoke(), "oracle.per_class", True)
    with pytest.raises(ConfigError, match=r"more than the at most 60 training images"):
        read(put(per_class, "oracle.train.batch_size", 61))


def test_steps_without_meaning_are_refused():
    """epochs 1e12 trained with an ETA of 98,773,420 h: the schema caps epochs, min_steps and the
    flow's steps, and the plan counts each training's steps (`budget.MAX_STEPS`)."""
    with pytest.raises(ConfigError, match=r"'classifiers\.training\.epochs': 1000000000000 is greater than the maximum"):
        read(put(smoke(), "classifiers.training.epochs", 10**12))
    read(put(smoke(), "classifiers.training.epochs", 10**5))  # 7 steps an epoch at N=200: 7e5 steps
    # min_steps at its cap rounds up to whole epochs of 7 steps: just over MAX_STEPS
    with pytest.raises(ConfigError, match=r"'classifiers\.training\.min_steps': the budget of a classifier of "
                                          r"experiment 'scaling' at N=\d+ takes 100,000,00\d optimizer steps"):
        read(put(smoke(), "classifiers.training.min_steps", budget.MAX_STEPS))
    flow = put(put(smoke(), "oracle.train.steps", None), "oracle.train.epochs", 10**6)
    read(flow)  # 10^6 epochs of 600 images in batches of 64: 9,375,000 steps
    with pytest.raises(ConfigError, match=r"'oracle\.train\.epochs': the flow's training on up to 600 images takes "
                                          r"600,000,000 optimizer steps"):
        read(put(flow, "oracle.train.batch_size", 1))


# ----------------------------------------------------------------------------- a real run


def _sha256s(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


#: A few of the probe's one-key changes: NaN of each stage, memory, a flow batch, a record that lied.
REAL_RUN = [("classifiers.training.lr", math.nan), ("oracle.train.lr", math.nan),
            ("worlds.base.prior", [math.nan] + [0.1] * 9), ("classifiers.archs.test_resnet.input_size", 100000),
            ("oracle.train.batch_size", 2**20), ("classifiers.archs.test_resnet.pretrained", True),
            # a weights file not there: refused when the config is read (issue 49), dry run or not
            ("classifiers.archs.test_resnet.pretrained", "weights/nope.pth")]


@pytest.mark.slow
def test_a_bad_config_after_a_valid_run_changes_no_file(smoke_run, tmp_path):
    """`snakemake` (a real run, not -n) of each bad config after a finished valid run: one line
    naming the key, no traceback, every file of results/ byte for byte as before (sha256)."""
    work = tmp_path / "work"
    import shutil

    shutil.copytree(smoke_run.workdir, work, symlinks=True)
    before = _sha256s(work / "results")
    for key, value in REAL_RUN:
        cfg = put(copy.deepcopy(smoke_run.config), key, value)
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(cfg, sort_keys=False))
        proc = subprocess.run([str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "-d",
                               str(work), "--cores", "2", "--configfile", str(bad)], cwd=work, capture_output=True,
                              text=True, timeout=600, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith(("ConfigError: ", "DataError: "))]
        assert proc.returncode == 1 and len(errors) == 1 and key.split(".")[-1] in errors[0], proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr + proc.stdout and '  File "' not in proc.stderr
        assert _sha256s(work / "results") == before, key


@pytest.mark.slow
def test_a_classifier_record_describes_what_the_job_did(smoke_run):
    """`pretrained: yes` trained from scratch while the record said True. Each classifier's record
    says which weights the job loaded (None: none, trained from scratch) and the optimizer steps
    it ran, which its training history confirms."""
    from oracle.workflow.provenance import record_path

    models = sorted(smoke_run.results.glob("classifiers/**/model.pt"))
    assert models
    for model in models:
        record = json.loads(record_path(model).read_text())
        history = json.loads(model.with_name("history.json").read_text())
        pre = smoke_run.config["classifiers"]["archs"][history["arch"]]["pretrained"]
        assert record["extra"]["weights_loaded"] == (pre or None)
        assert record["extra"]["steps_run"] == history["history"][-1]["steps"] == history["convergence"]["steps"] > 0
