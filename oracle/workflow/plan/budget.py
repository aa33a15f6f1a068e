"""What the jobs of a config would hold and run, known when the config is read: lower bounds of
the peak memory of the jobs whose size a config key sets, the optimizer steps of every training,
and the flow's batch against the training images (`check_budget`, called by `check_config`).

Snakemake deletes a job's outputs before the job runs, so a job that refuses its config (or dies
allocating what no machine holds, or trains for a century) has already cost the outputs of the
previous, valid config. Each estimate here counts one array the job must hold at once, so it is
a lower bound of its peak and refusing it never refuses a job that could run:

``classifiers.archs.<arch>.input_size``  a training batch resized to input_size:
                                          batch_size x C x input_size^2 float32
``samples.precision_rows``                the precision check's samples, drawn at once, and their
                                          log-likelihoods in float64 and in the mode checked
                                          (`oracle.sample_shards.precision_attrs`):
                                          rows x (C x H x W float32 + 2 x K float64)
``oracle.train.batch_size``               the flow's training batch and the input of each of its
                                          transformer layers, kept for the backward pass:
                                          batch per node x (C x H x W + blocks x layers x tokens
                                          x channels) float32

A job may have the larger of this machine's memory and its stage's ``resources.<stage>.mem_mb``
(a cluster node): an estimate above both is refused, naming the key, the estimate and both
memories. Steps beyond `MAX_STEPS` (a classifier's budget of epochs or min_steps at its largest
N, the flow's steps or epochs) have no meaning for any machine and are refused as well.

Light (the Snakefile imports it at DAG-build time): standard library only. Sizes in bytes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import NamedTuple

from oracle.classifiers.specs import training_epochs, validation_rows
from oracle.errors import ConfigError
from oracle.experiments import kind_module
from oracle.world_specs import known_num_classes, world_kind
from oracle.io.data_sets import KINDS, kind_facts
from oracle.workflow.plan.disk import sample_shape

__all__ = ["MAX_STEPS", "Estimate", "check_budget", "flow_trains", "machine_memory",
           "memory_estimates", "plan_num_classes", "step_estimates", "training_images_bound", "training_key"]

#: Optimizer steps past which a training has no meaning: 10^8 steps at 10 ms each are 11 days,
#: and no preset's training comes within a factor of 100 of it.
MAX_STEPS = 10**8
FLOAT32, FLOAT64 = 4, 8


class Estimate(NamedTuple):
    """A lower bound of one job's peak memory: the config `key` that sets it, its `value`, what
    is counted (`what`), the bytes and the `stage` whose resources the job gets."""

    key: str
    value: object
    what: str
    nbytes: int
    stage: str


def machine_memory() -> int:
    """Physical memory of this machine in bytes (0 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def plan_num_classes(config: Mapping) -> int | None:
    """K when the config fixes it: a Gaussian world, a `data.classes` list, or a data kind with a
    fixed set of classes (`oracle.io.data_sets`); else None."""
    k = known_num_classes(config)
    if k is None and world_kind(config) == "flow" and config["data"]["kind"] in KINDS:
        k = kind_facts(config["data"]["kind"]).num_classes
    return k


def flow_trains(config: Mapping) -> bool:
    """Whether the oracle stage trains a flow (a flow world without a checkpoint to import)."""
    return world_kind(config) == "flow" and config["oracle"]["checkpoint"] is None


def training_images_bound(config: Mapping) -> tuple[int, str] | None:
    """An upper bound of the flow's training images and where it comes from, or None when only
    the data stage knows: data.max_per_class x K where both are known, the data kind's training
    split (`oracle.io.data_sets`' ``n_train``), whichever is smaller; data.max_per_class for a flow per class."""
    kind, cap = config["data"]["kind"], config["data"]["max_per_class"]
    if config["oracle"]["per_class"]:  # one flow per class: its own class's images
        return (int(cap), f"data.max_per_class={cap} of its class") if cap is not None else None
    bounds = []
    n_train = kind_facts(kind).n_train if kind in KINDS else None
    if n_train is not None and not config["data"].get("classes"):
        bounds.append((n_train, f"the {kind} data set's {n_train:,} images"))
    k = plan_num_classes(config)
    if k is not None and cap is not None:
        bounds.append((k * int(cap), f"data.max_per_class={cap} x {k} classes"))
    return min(bounds) if bounds else None


def training_key(config: Mapping, experiment: str, field: str) -> str:
    """The config key of training setting `field` of `experiment`'s classifiers: its own
    override (``experiments.<name>.training.<field>``) or ``classifiers.training.<field>``."""
    own = config["experiments"][experiment].get("training") or {}
    return f"experiments.{experiment}.training.{field}" if field in own else f"classifiers.training.{field}"


def memory_estimates(config: Mapping, specs: Mapping[str, dict]) -> list[Estimate]:
    """The lower bounds of the module docstring for `config` with its resolved experiments
    `specs` (`oracle.workflow.plan.experiment_specs`); those whose shape is unknown are left out."""
    shape = sample_shape(config)
    channels = shape[0] if shape is not None else 1
    out = []
    batches: dict[str, int] = {}
    for spec in specs.values():
        for arch in spec.get("archs") or []:
            if "training" in spec:
                batches[arch] = max(batches.get(arch, 0), int(spec["training"]["batch_size"]))
    for arch, batch in sorted(batches.items()):
        side = int(config["classifiers"]["archs"][arch]["input_size"])
        out.append(Estimate(f"classifiers.archs.{arch}.input_size", side,
                            f"a training batch of {batch} images of {channels}x{side}x{side} float32",
                            batch * channels * side * side * FLOAT32, "classifiers"))
    if shape is None:
        return out
    d = shape[0] * shape[1] * shape[2]
    rows = int(config["samples"]["precision_rows"])
    k = plan_num_classes(config) or 2  # 2: a lower bound where only the data stage knows K
    out.append(Estimate("samples.precision_rows", rows, f"the precision check's {rows:,} samples of "
                        f"{'x'.join(map(str, shape))} float32 and their log p(x|k) for {k} classes in float64 "
                        "and in the mode checked", rows * (d * FLOAT32 + 2 * k * FLOAT64), "samples"))
    if flow_trains(config):
        # the global batch is split over the nodes (DDP): a node holds its share
        f, nodes = config["oracle"]["flow"], int(config["resources"]["oracle"]["nodes"])
        batch = math.ceil(int(config["oracle"]["train"]["batch_size"]) / nodes)
        tokens = (shape[1] // f["patch_size"]) * (shape[2] // f["patch_size"])
        layers = f["num_blocks"] * f["layers_per_block"]
        out.append(Estimate("oracle.train.batch_size", batch,
                            f"a flow training batch of {batch} images per node and the input of its {layers} "
                            f"transformer layers ({tokens} tokens x {f['channels']} channels each), float32",
                            batch * (d + layers * tokens * f["channels"]) * FLOAT32, "oracle"))
    return out


def step_estimates(config: Mapping, specs: Mapping[str, dict]) -> list[tuple[str, int, str]]:
    """(config key, optimizer steps, what) of the longest training of each experiment that trains
    classifiers in the classifiers stage (its budget: epochs or min_steps, whichever rules, at its
    largest N) and of the flow where its step count is known."""
    out = []
    for name, spec in specs.items():
        mod = kind_module(spec["kind"])
        longest = None
        for run in mod.classifier_runs(spec):
            t = mod.training_spec(spec, run["cell"])
            tr, n = t["training"], int(t["n"])
            fit = n - validation_rows(n, t.get("val_fraction"))
            per_epoch = max(1, math.ceil(fit / int(tr["batch_size"])))
            steps = training_epochs(tr, n, t.get("val_fraction")) * per_epoch
            if longest is None or steps > longest[1]:
                field = "epochs" if int(tr["epochs"]) * per_epoch >= int(tr["min_steps"]) else "min_steps"
                longest = (training_key(config, name, field), steps,
                           f"the budget of a classifier of experiment {name!r} at N={n}")
        if longest is not None:
            out.append(longest)
    if flow_trains(config):
        tr = config["oracle"]["train"]
        if tr["steps"] is not None:
            out.append(("oracle.train.steps", int(tr["steps"]), "the flow's training"))
        elif (bound := training_images_bound(config)) is not None:
            steps = math.ceil(float(tr["epochs"]) * bound[0] / int(tr["batch_size"]))
            out.append(("oracle.train.epochs", steps, f"the flow's training on up to {bound[0]:,} images"))
    return out


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e3:,.1f} kB"


def check_budget(config: Mapping, specs: Mapping[str, dict], memory: int | None = None) -> None:
    """ConfigError naming the key of the first job that cannot run (module docstring): a flow
    batch larger than the training images, a memory estimate over what the job may have
    (`memory`: this machine's, default `machine_memory`), steps over `MAX_STEPS`."""
    if flow_trains(config) and (bound := training_images_bound(config)) is not None:
        batch = int(config["oracle"]["train"]["batch_size"])
        if batch > bound[0]:
            raise ConfigError(f"config key 'oracle.train.batch_size': {batch:,} is more than the at most "
                              f"{bound[0]:,} training images of the flow ({bound[1]}): one step would pass "
                              f"over them {math.ceil(batch / bound[0]):,} times; lower it")
    memory = machine_memory() if memory is None else int(memory)
    for e in memory_estimates(config, specs):
        node = int(config["resources"][e.stage]["mem_mb"]) * 2**20
        if e.nbytes > max(memory, node):
            raise ConfigError(f"config key {e.key!r}: {e.value:,} needs at least {_size(e.nbytes)} of memory in one "
                              f"job ({e.what}), more than this machine's {_size(memory)} and "
                              f"resources.{e.stage}.mem_mb ({_size(node)})")
    for key, steps, what in step_estimates(config, specs):
        if steps > MAX_STEPS:
            raise ConfigError(f"config key {key!r}: {what} takes {steps:,} optimizer steps, more than the "
                              f"{MAX_STEPS:,} any run can finish")
