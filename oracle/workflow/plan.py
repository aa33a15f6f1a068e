"""What the workflow derives from a config: its experiments (checked and completed by their
kinds), the classifiers they train and the sets they are scored on, shards, splits, flow specs
and step counts. The worlds (`oracle.world_specs`) and the classifier specs
(`oracle.classifiers.specs`) live in the library, which needs them too; plan re-exports them.

Light, like `oracle.workflow.config` (the Snakefile imports it at DAG-build time): standard
library only; everything takes the plain config dict and returns plain values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from oracle.errors import ConfigError
# Re-exported: the rules and scripts read the world and classifier specs as plan.<name>.
from oracle.classifiers.specs import ARCH_LABELS, arch_label, arch_spec, effective_epochs  # noqa: F401
from oracle.world_specs import (BASE_WORLD, NOISE_TAG, WORLD_KINDS, derived_seed, gaussian_spec,  # noqa: F401
                                known_num_classes, noisy_set_name, parse_evalset, resolve_prior, sigma_text,
                                world_kind, world_spec, world_specs)


def world_file(run_dir: str, config: Mapping) -> str:
    """The frozen model written by the oracle stage: `oracle/flow.pt` for a flow,
    `oracle/gaussian_world.pt` for a Gaussian world (both load with
    `oracle.worlds.world_from_checkpoint`)."""
    name = "gaussian_world.pt" if world_kind(config) == "gaussian" else "flow.pt"
    return f"{run_dir}/oracle/{name}"


# ----------------------------------------------------------------------------- experiments


def experiment_specs(config: Mapping) -> dict[str, dict]:
    """Every experiment by name, its entry checked and its defaults filled in by its kind's
    module (`oracle.experiments.kind_module(kind).check`)."""
    from oracle.experiments import kind_module

    return {name: kind_module(entry["kind"]).check(name, dict(entry), config)
            for name, entry in (config.get("experiments") or {}).items()}


def experiment_spec(config: Mapping, name: str) -> dict:
    """The experiment called `name` (defaults filled in); ConfigError if there is none."""
    exps = config.get("experiments") or {}
    if name not in exps:
        raise ConfigError(f"config key 'experiments': no experiment named {name!r} (known: {', '.join(exps) or 'none'})")
    from oracle.experiments import kind_module

    return kind_module(exps[name]["kind"]).check(name, dict(exps[name]), config)


def experiments_of_kind(config: Mapping, kind: str) -> list[str]:
    """Names of the experiments of one kind, in config order."""
    return [n for n, e in (config.get("experiments") or {}).items() if e["kind"] == kind]


def classifier_runs(config: Mapping, experiments: Iterable[str] | None = None) -> list[dict]:
    """One dict {experiment, arch, cell, seed} per trained classifier, in a stable order."""
    keep = None if experiments is None else set(experiments)
    from oracle.experiments import kind_module

    out = []
    for name, spec in experiment_specs(config).items():
        if keep is None or name in keep:
            out += [{"experiment": name, **run} for run in kind_module(spec["kind"]).classifier_runs(spec)]
    return out


def prediction_runs(config: Mapping, experiment: str) -> list[dict]:
    """{experiment, arch, cell, seed} of every classifier whose predictions `experiment` reads:
    its own classifiers, or those it evaluates without training them (spec ``borrowed_runs``,
    kind estimators: the classifiers of another experiment)."""
    spec = experiment_spec(config, experiment)
    if "borrowed_runs" in spec:
        return [dict(r) for r in spec["borrowed_runs"]]
    return classifier_runs(config, [experiment])


def prediction_jobs(config: Mapping) -> list[tuple[str, str, str, int, str]]:
    """Every prediction the run makes, once: (experiment, arch, cell, seed, evaluation set)
    of each classifier on each set an experiment reads it on."""
    out = set()
    for name in config.get("experiments") or {}:
        sets = evaluation_sets(config, name)
        out |= {(r["experiment"], r["arch"], r["cell"], int(r["seed"]), e) for r in prediction_runs(config, name)
                for e in sets}
    return sorted(out)


def training_spec(config: Mapping, experiment: str, cell: str) -> dict:
    """What the classifiers of one cell of an experiment train on (see
    `oracle.experiments._training.training_spec`)."""
    from oracle.experiments import kind_module

    spec = experiment_spec(config, experiment)
    return kind_module(spec["kind"]).training_spec(spec, cell)


def evaluation_sets(config: Mapping, experiment: str) -> list[str]:
    """The sets every model of an experiment is predicted on (world names)."""
    from oracle.experiments import kind_module

    spec = experiment_spec(config, experiment)
    return kind_module(spec["kind"]).evaluation_sets(spec)


def split_worlds(config: Mapping) -> dict[str, dict]:
    """The worlds that need a splits file, with what it must hold: {world: {"seeds": sorted
    training seeds, "max_n": largest training-set size}} (a world only tested on, directly or
    through a noisy copy of its test set, has no seeds and max_n 0): from every kind's
    classifier runs and evaluation sets, and from the optional `split_needs` of a kind."""
    from oracle.experiments import kind_module

    out: dict[str, dict] = {}
    names = list(config["worlds"])
    for spec in experiment_specs(config).values():
        mod = kind_module(spec["kind"])
        for evalset in mod.evaluation_sets(spec):
            out.setdefault(parse_evalset(evalset, names)[0], {"seeds": set(), "max_n": 0})
        for run in mod.classifier_runs(spec):
            t = mod.training_spec(spec, run["cell"])
            slot = out.setdefault(t["world"], {"seeds": set(), "max_n": 0})
            slot["seeds"].add(int(run["seed"]))
            slot["max_n"] = max(slot["max_n"], int(t["n"]))
        # kinds that train outside the classifiers stage (active) declare what they need
        for world, want in (mod.split_needs(spec) if hasattr(mod, "split_needs") else {}).items():
            slot = out.setdefault(world, {"seeds": set(), "max_n": 0})
            slot["seeds"].update(int(s) for s in want["seeds"])
            slot["max_n"] = max(slot["max_n"], int(want["max_n"]))
    return {w: {"seeds": sorted(v["seeds"]), "max_n": v["max_n"]} for w, v in out.items()}


def largest_training_size(config: Mapping) -> int:
    """The largest training-set size of any classifier of the run (1 when there is none)."""
    return max([v["max_n"] for v in split_worlds(config).values()] + [1])


# ----------------------------------------------------------------------------- shards, flows, classifiers


def shard_ids(n_shards: int) -> list[str]:
    """The shard wildcard values: '0000', '0001', ... (four digits, as in shard-0000.h5)."""
    return [f"{i:04d}" for i in range(int(n_shards))]


def shard_sizes(n_total: int, n_shards: int) -> list[int]:
    """Samples per shard: as even as possible, the first `n_total % n_shards` shards get one more."""
    if n_shards < 1 or n_total < n_shards:
        raise ConfigError(f"samples: cannot split n_total={n_total} samples into n_shards={n_shards} shards")
    base, extra = divmod(n_total, n_shards)
    return [base + (i < extra) for i in range(n_shards)]


def flow_spec(config: Mapping, in_channels: int, img_size: int, num_classes: int) -> dict:
    """The `oracle.flow_checkpoints.build_flow` spec of this run, once the data fix C, H(=W) and K."""
    f = config["oracle"]["flow"]
    if img_size % f["patch_size"]:
        raise ConfigError(
            f"config key 'oracle.flow.patch_size': {f['patch_size']} does not divide the image size {img_size}"
        )
    if f["channels"] % f["head_dim"]:
        raise ConfigError(
            f"config key 'oracle.flow.head_dim': {f['head_dim']} does not divide channels={f['channels']}"
        )
    return {
        "in_channels": int(in_channels),
        "img_size": int(img_size),
        "patch_size": f["patch_size"],
        "channels": f["channels"],
        "num_blocks": f["num_blocks"],
        "layers_per_block": f["layers_per_block"],
        "head_dim": f["head_dim"],
        "num_classes": int(num_classes),
        "per_class": bool(config["oracle"]["per_class"]),
        "nvp": bool(f["nvp"]),
    }


def train_steps(train: Mapping, n_train: int) -> int:
    """Optimizer steps of flow training: `steps`, or ceil(epochs * n_train / batch_size)."""
    if train["steps"] is not None:
        return int(train["steps"])
    if n_train < 1:
        raise ConfigError("oracle.train.epochs: the training set is empty")
    return max(1, math.ceil(train["epochs"] * n_train / train["batch_size"]))


#: Keys of oracle.train that FlowTrainConfig takes as they are (steps and epochs become steps).
FLOW_TRAIN_KEYS = ("batch_size", "lr", "weight_decay", "warmup_steps", "grad_clip", "ema_decay", "noise_std",
                   "label_dropout", "checkpoint_every")


def flow_train_settings(train: Mapping, n_train: int, seed: int) -> dict:
    """The `oracle.flow_training.FlowTrainConfig` settings of `oracle.train` for `n_train`
    training images: its keys, the step count (`train_steps`) and the seed."""
    return {**{k: train[k] for k in FLOW_TRAIN_KEYS}, "steps": train_steps(train, n_train), "seed": int(seed)}
