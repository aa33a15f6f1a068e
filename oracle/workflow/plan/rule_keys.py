"""The config keys each rule's artifacts depend on: declared once, here, per rule.

A rule reads its keys from this table (``params: config_keys=declared_keys("<rule>")`` in
``rules/*.smk``), its job writes them with the run's values into each artifact's record, and
everything that later asks "was this artifact made under the config now?" asks this table, not
the record: the start-of-run check (`oracle.workflow.provenance.stale`), every job's check of its inputs
(`oracle.workflow.provenance.input_identity`) and the audit. A record that lost a key from its own list
(``config_keys``) therefore still has that key compared.

Light (the Snakefile imports it at DAG-build time): standard library and the plan only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.workflow.plan.archs import arch_keys
from oracle.workflow.plan.experiments import experiment_specs, split_worlds, training_spec
from oracle.workflow.plan.worlds import divergence_keys, noisy_set_keys, samples_keys, world_constants_keys

__all__ = ["COLLECT_SUFFIX", "declared_rules", "rule_config_keys"]

#: The generic collect rule of kind K is named ``K_collect`` (rules/experiments.smk).
COLLECT_SUFFIX = "_collect"

_Wildcards = Mapping[str, str]
_Keys = Callable[[Mapping, _Wildcards, Mapping[str, dict]], list[str]]


def _validation_keys(config: Mapping) -> list[str]:
    # what the validation metrics depend on besides their inputs (`enabled` only asks for them)
    return [f"validation.{k}" for k in config["validation"] if k != "enabled"] + [
        "oracle.train.noise_std", "seed", "data.kind", "samples.class_batch"]


def _import_keys(config: Mapping) -> list[str]:
    # a native checkpoint brings its own spec; a public_tarflow one takes oracle.flow
    extra = ["oracle.flow", "oracle.per_class"] if config["oracle"]["checkpoint_format"] == "public_tarflow" else []
    return ["oracle.checkpoint", "oracle.checkpoint_format", *extra]


def _classifier_keys(config: Mapping, wc: _Wildcards, exps: Mapping[str, dict]) -> list[str]:
    return training_spec(config, wc["experiment"], wc["cell"], exps)["config_keys"] + arch_keys(config, wc["arch"])


def _experiment(exps: Mapping[str, dict], wc: _Wildcards) -> dict:
    name = wc["experiment"]
    if name not in exps:
        raise ConfigError(f"config key 'experiments': no experiment named {name!r} (known: {', '.join(exps)})")
    return exps[name]


_RULES: dict[str, _Keys] = {
    "effective_config": lambda c, wc, e: list(c),  # the whole config
    "data": lambda c, wc, e: ["data", "seed"],
    "oracle_gaussian": lambda c, wc, e: ["oracle.gaussian"],
    "oracle_train": lambda c, wc, e: ["oracle.flow", "oracle.per_class", "oracle.train", "seed"],
    "oracle_import": lambda c, wc, e: _import_keys(c),
    "validation_metrics": lambda c, wc, e: _validation_keys(c),
    "validation_table": lambda c, wc, e: ["data.kind", "paper"],
    "validation_nn_distances": lambda c, wc, e: ["paper"],
    "validation_samples_grid": lambda c, wc, e: ["paper"],
    "validation_numbers": lambda c, wc, e: [],  # a function of the metrics
    "sample_shard": lambda c, wc, e: samples_keys(c, wc["world"]),
    "merge_samples": lambda c, wc, e: [],  # a function of the shards alone
    "world_constants": lambda c, wc, e: world_constants_keys(c),
    "noisy_test_set": lambda c, wc, e: noisy_set_keys(c, wc["world"]),
    "world_divergence": lambda c, wc, e: divergence_keys(c, wc["reference"]),
    "make_splits": lambda c, wc, e: _split_keys(c, wc["world"]),
    "train_classifier": _classifier_keys,
    "predict_classifier": _classifier_keys,
    "active_learning": lambda c, wc, e: _experiment(e, wc)["run_config_keys"] + arch_keys(c, wc["arch"]),
    "experiment_table": lambda c, wc, e: _experiment(e, wc)["config_keys"] + ["paper"],
    "experiment_figure": lambda c, wc, e: _experiment(e, wc)["config_keys"] + ["paper"],
    "experiment_numbers": lambda c, wc, e: _experiment(e, wc)["config_keys"],
    "world_numbers": lambda c, wc, e: [],  # a function of the world's constants
    "numbers": lambda c, wc, e: ["paper"],
    "claims": lambda c, wc, e: [f"experiments[{name}].{k}" for name, spec in c["experiments"].items()
                                for k in ("kind", "world") if k in spec],
    "timings": lambda c, wc, e: [],  # a function of the benchmark files alone
    # what it lists (experiments by name and kind, the validation's when it runs) and how it heads them
    "report": lambda c, wc, e: ["run", "paper", "validation.enabled"] + [f"experiments[{name}].kind"
                                                                         for name in c["experiments"]],
    "paper_pdf": lambda c, wc, e: ["run", "paper", "validation.enabled"] + [f"experiments[{name}].kind"
                                                                            for name in c["experiments"]],
}


def _split_keys(config: Mapping, world: str) -> list[str]:
    worlds = split_worlds(config)
    if world not in worlds:
        raise ConfigError(f"config key 'worlds': no experiment of the config trains on or tests world {world!r}")
    return worlds[world]["config_keys"]


def declared_rules() -> list[str]:
    """The rules this table declares keys for (each kind's ``<kind>_collect`` besides)."""
    return sorted(_RULES)


def rule_config_keys(config: Mapping, rule: str, wildcards: Any = None,
                     experiments: Mapping[str, dict] | None = None) -> list[str]:
    """The config keys the artifacts of `rule`'s job with `wildcards` depend on, under `config`.

    wildcards:   a mapping (or Snakemake's Wildcards) of the job's wildcard values.
    experiments: the resolved experiments (`experiment_specs`), to skip resolving them again.
    ConfigError for a rule this workflow does not have, or wildcards the config no longer has
    (an experiment, a world, an architecture removed from it).
    """
    wc = dict(wildcards.items()) if hasattr(wildcards, "items") else dict(wildcards or {})
    exps = experiments if experiments is not None else experiment_specs(config)
    if rule.endswith(COLLECT_SUFFIX) and rule not in _RULES:
        return list(_experiment(exps, wc)["collect_config_keys"])
    if rule not in _RULES:
        raise ConfigError(f"rule {rule!r} is not a rule of this workflow (known: {', '.join(declared_rules())})")
    try:
        return list(_RULES[rule](config, wc, exps))
    except KeyError as exc:
        raise ConfigError(f"rule {rule!r} with wildcards {wc}: {exc.args[0]!r} is not in the config now") from None
