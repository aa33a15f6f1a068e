"""The checks the jobs make on their config, run when the config is read (`check_jobs`, called by
`oracle.workflow.plan.config.check_config`).

Snakemake deletes a job's outputs before the job runs, so a value the job refuses must be refused
before the run starts, or it costs the outputs of the previous, valid config (DESIGN,
Conventions). Where a job's check is light it is called here as it is (the classifiers' stopping
rule, the flow's spec); where it lives in a module that imports torch, its rule is restated here
with the config key it comes from, and tests/test_job_checks.py runs each job's own check beside
this one on the same config, so the two cannot drift apart:

========================================  =================================================
job check                                  here
========================================  =================================================
`oracle.classifiers.stopping.StoppingRule`  called on every training block
`oracle.classifiers.train.train_classifier` patience without validation rows
`oracle.workflow.plan.flows.flow_spec`      called where the data kind fixes C, H and K
`oracle.flow_training.train_flow`           a flow batch that the GPUs do not split evenly
`oracle.float_precision.check_mode`         TF32 on a CPU
========================================  =================================================

NaN and infinities (`config.check_finite`), a prior's length and mass (`config._check_worlds`),
`pretrained: true` (`config.check_config`) and the memory and steps of each job
(`oracle.workflow.plan.budget`) are checked beside these.

Light (the Snakefile imports it at DAG-build time): standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

from oracle.classifiers.specs import validation_size
from oracle.classifiers.stopping import StoppingRule
from oracle.errors import ConfigError
from oracle.experiments import kind_module
from oracle.workflow.plan.budget import flow_trains, plan_num_classes, training_key
from oracle.workflow.plan.disk import sample_shape
from oracle.workflow.plan.flows import flow_spec

__all__ = ["check_jobs"]


def _check_classifier_training(config: Mapping, specs: Mapping[str, dict]) -> None:
    for name, spec in specs.items():
        mod = kind_module(spec["kind"])
        for run in mod.classifier_runs(spec):
            t = mod.training_spec(spec, run["cell"])
            tr = t["training"]
            try:
                StoppingRule.from_training(tr)
            except ConfigError as exc:
                raise ConfigError(f"config key {training_key(config, name, 'patience')!r} (or eval_steps, "
                                  f"tolerance): {exc}") from None
            held_out = float(t.get("val_fraction") or 0.0) > 0 or validation_size(t) > 0
            if tr.get("patience") is not None and not held_out:
                raise ConfigError(f"config key {training_key(config, name, 'patience')!r}: {tr['patience']} "
                                  f"evaluations of a validation loss, but experiment {name!r} holds out no "
                                  f"validation rows ({training_key(config, name, 'val_size')} is 0); set "
                                  "val_size > 0 or patience: null")


def _check_flow(config: Mapping) -> None:
    shape, k = sample_shape(config), plan_num_classes(config)
    if shape is not None and k is not None:
        flow_spec(config, shape[0], shape[1], k)  # the oracle_train job's own call, once the data are read
    gpus = int(config["resources"]["oracle"]["gpus"])
    batch = int(config["oracle"]["train"]["batch_size"])
    if gpus > 1 and batch % gpus:
        raise ConfigError(f"config key 'oracle.train.batch_size': {batch} does not split evenly over the "
                          f"{gpus} GPUs of resources.oracle.gpus (one share per GPU under DDP)")


def check_jobs(config: Mapping, specs: Mapping[str, dict]) -> None:
    """ConfigError naming the key of the first value a job of `config` would refuse (module
    docstring); `specs`: the resolved experiments (`oracle.workflow.plan.experiment_specs`)."""
    _check_classifier_training(config, specs)
    if flow_trains(config):
        _check_flow(config)
    if config["samples"]["precision"] == "tf32" and config["device"] == "cpu":
        raise ConfigError("config key 'samples.precision': 'tf32' is a CUDA mode and device is 'cpu'; "
                          "use float32 or auto")
