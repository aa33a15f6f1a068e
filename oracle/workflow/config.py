"""Run configuration: schema validation, cross-key checks and what the workflow derives from it
(worlds with their defaults, experiments with theirs, shards, splits, classifier runs).

The Snakefile imports this module at DAG-build time, so it must stay light: standard library,
PyYAML and jsonschema only (no torch, no numpy; `check_classifier_archs` imports timm on call).
Everything here takes the plain config dict (`config.yaml`, a preset) and returns plain values;
nothing knows of Snakemake.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from oracle.errors import ConfigError

#: Tolerance on sum(prior) == 1.
PRIOR_TOL = 1e-6


# ----------------------------------------------------------------------------- loading


def load_yaml(path: str | Path) -> dict:
    """Read a YAML file (a config or the schema); raises ConfigError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        with p.open() as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}: {what}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must hold a mapping at the top level")
    return data


def _key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def validate_config(config: Mapping, schema: Mapping | str | Path) -> None:
    """Validate `config` against the JSON schema; raise ConfigError naming the offending key.

    The message is one line, e.g. ``config key 'oracle.flow.channels': 'abc' is not of type
    'integer'`` or ``config key 'oracle': unknown key 'foo' (allowed: checkpoint, ...)``.
    Does not modify `config` (Snakemake's `validate` fills schema defaults afterwards).
    """
    import jsonschema

    if not isinstance(schema, Mapping):
        schema = load_yaml(schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return
    err = jsonschema.exceptions.best_match(errors)
    where = _key_path(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        if allowed:
            unknown = ", ".join(repr(k) for k in extra)
            prefix = f"config key {where!r}" if err.absolute_path else "config"
            raise ConfigError(f"{prefix}: unknown key {unknown} (allowed: {', '.join(allowed)})")
    if err.validator == "required":
        prefix = f"config key {where!r}" if err.absolute_path else "config"
        raise ConfigError(f"{prefix}: {err.message}")
    raise ConfigError(f"config key {where!r}: {err.message}")


# ----------------------------------------------------------------------------- worlds

#: Values of `oracle.world`; an absent key means the first (the flow of the paper).
WORLD_KINDS = ("flow", "gaussian")

BASE_WORLD = "base"
#: World parameters a variant inherits from the base world when it does not set them.
_WORLD_PARAMETERS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "test_size")


def world_kind(config: Mapping) -> str:
    """`oracle.world` of a config: "flow" (trained or imported TarFlow) or "gaussian" (the
    analytic world of DESIGN rule 7). Absent means "flow"."""
    kind = config["oracle"].get("world") or WORLD_KINDS[0]
    if kind not in WORLD_KINDS:
        raise ConfigError(f"config key 'oracle.world': {kind!r} is not one of {', '.join(WORLD_KINDS)}")
    return kind


def world_file(run_dir: str, config: Mapping) -> str:
    """The frozen model written by the oracle stage: `oracle/flow.pt` for a flow,
    `oracle/gaussian_world.pt` for a Gaussian world (both load with
    `oracle.worlds.world_from_checkpoint`)."""
    name = "gaussian_world.pt" if world_kind(config) == "gaussian" else "flow.pt"
    return f"{run_dir}/oracle/{name}"


def derived_seed(seed: int, name: str) -> int:
    """A 31-bit seed that is a function of the run's seed and a name (a world variant)."""
    digest = hashlib.sha256(f"oracle.world-seed/v1:{int(seed)}:{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


def world_specs(config: Mapping) -> dict[str, dict]:
    """Every world of the run with its defaults filled in, base first:
    {name: {prior (list or None), label_temperature, base_temperature, n_total, n_shards,
    test_size, seed}}. A variant inherits the base world's parameters it does not set; its seed
    defaults to `derived_seed(seed, name)` so its samples are independent of the base world's."""
    worlds = config["worlds"]
    base = worlds[BASE_WORLD]
    defaults = {"n_total": config["samples"]["n_total"], "n_shards": config["samples"]["n_shards"],
                "test_size": config["splits"]["test_size"]}
    out = {}
    for name in [BASE_WORLD, *[w for w in worlds if w != BASE_WORLD]]:
        entry = worlds[name] or {}
        spec = {k: entry.get(k, base.get(k, defaults.get(k))) for k in _WORLD_PARAMETERS}
        spec["seed"] = int(entry.get("seed", config["seed"] if name == BASE_WORLD else derived_seed(config["seed"], name)))
        out[name] = spec
    return out


def world_spec(config: Mapping, name: str) -> dict:
    """One world of `world_specs`; ConfigError naming the known worlds if there is none."""
    specs = world_specs(config)
    if name not in specs:
        raise ConfigError(f"config key 'worlds': no world named {name!r} (known: {', '.join(specs)})")
    return specs[name]


def gaussian_spec(config: Mapping) -> dict:
    """The `oracle.gaussian` section as the spec of `oracle.worlds.gaussian_world_from_spec`:
    {num_classes, channels, image_size, separation, std, seed}."""
    g = config["oracle"].get("gaussian")
    if g is None:
        raise ConfigError("config key 'oracle.gaussian': oracle.world=gaussian needs this section "
                          "(num_classes, channels, image_size, separation, std, seed)")
    return {"num_classes": int(g["num_classes"]), "channels": int(g["channels"]),
            "image_size": int(g["image_size"]), "separation": float(g["separation"]),
            "std": float(g["std"]), "seed": int(g["seed"])}


def known_num_classes(config: Mapping) -> int | None:
    """K when the config alone fixes it (a Gaussian world, or a `data.classes` list), else None
    (the data stage knows it, see `check_prior_length`)."""
    if world_kind(config) == "gaussian":
        return gaussian_spec(config)["num_classes"]
    classes = config["data"].get("classes")
    return len(classes) if classes else None


def resolve_prior(prior: list[float] | None, num_classes: int, key: str = "worlds.base.prior") -> list[float]:
    """The class prior as K floats: uniform for None; ConfigError naming `key` if its length is not K."""
    if prior is None:
        return [1.0 / num_classes] * num_classes
    if len(prior) != num_classes:
        raise ConfigError(f"config key {key!r}: has {len(prior)} entries but the world has {num_classes} classes")
    return [float(p) for p in prior]


def check_prior_length(config: Mapping, num_classes: int, where: str) -> None:
    """ConfigError when a world's prior does not have `num_classes` entries (`where` names the
    source of K, e.g. the data file); called by the data stage, before any flow is trained."""
    for name, spec in world_specs(config).items():
        if spec["prior"] is not None and len(spec["prior"]) != num_classes:
            key = f"worlds.{name}.prior" if "prior" in (config["worlds"][name] or {}) else "worlds.base.prior"
            raise ConfigError(f"config key {key!r}: has {len(spec['prior'])} entries but {where} has "
                              f"{num_classes} classes")


def _check_worlds(config: Mapping) -> None:
    specs = world_specs(config)
    k = known_num_classes(config)
    for name, spec in specs.items():
        raw = config["worlds"][name] or {}
        key = lambda field: f"worlds.{name if field in raw else BASE_WORLD}.{field}"  # noqa: E731
        prior = spec["prior"]
        if prior is not None:
            if abs(math.fsum(prior) - 1.0) > PRIOR_TOL:
                raise ConfigError(f"config key {key('prior')!r}: must sum to 1, sums to {math.fsum(prior)!r}")
            if k is not None:
                resolve_prior(prior, k, key("prior"))
        if spec["n_shards"] > spec["n_total"]:
            raise ConfigError(f"config key {key('n_shards')!r}: {spec['n_shards']} shards for "
                              f"{spec['n_total']} samples of world {name!r} leaves empty shards")


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


ARCH_LABELS = {
    "resnet18": "ResNet-18",
    "resnet50": "ResNet-50",
    "vit_base_patch16_224": "ViT-Base",
    "vit_base_patch16_224.augreg_in21k": "ViT-Base",
    "convnext_tiny": "ConvNeXt",
    "convnext_base": "ConvNeXt-B",
    "swin_tiny_patch4_window7_224": "Swin",
    "swin_base_patch4_window7_224": "Swin-B",
    "mobilenetv3_large_100": "MobileNet",
    "mobilenetv3_small_100": "MobileNet-S",
}
"""Display names of timm architectures (paper spelling); unknown names are shown as given."""


def arch_label(arch: str) -> str:
    """The paper's name of a timm architecture, or ``arch`` itself."""
    return ARCH_LABELS.get(arch, arch)


def arch_spec(config: Mapping, name: str) -> dict:
    """The architecture called `name`: {model, label, input_size, pretrained}; the label
    defaults to the paper's name of the timm model (`arch_label`)."""
    archs = config["classifiers"]["archs"]
    if name not in archs:
        raise ConfigError(f"config key 'classifiers.archs': no architecture named {name!r} (known: {', '.join(archs)})")
    a = dict(archs[name])
    a.setdefault("model", name)
    a.setdefault("label", arch_label(a["model"]))
    return a


def classifier_runs(config: Mapping, experiments: Iterable[str] | None = None) -> list[dict]:
    """One dict {experiment, arch, cell, seed} per trained classifier, in a stable order."""
    keep = None if experiments is None else set(experiments)
    from oracle.experiments import kind_module

    out = []
    for name, spec in experiment_specs(config).items():
        if keep is None or name in keep:
            out += [{"experiment": name, **run} for run in kind_module(spec["kind"]).classifier_runs(spec)]
    return out


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
    training seeds, "max_n": largest training-set size}} (a world only tested on has no
    seeds and max_n 0)."""
    from oracle.experiments import kind_module

    out: dict[str, dict] = {}
    for spec in experiment_specs(config).values():
        mod = kind_module(spec["kind"])
        for world in mod.evaluation_sets(spec):
            out.setdefault(world, {"seeds": set(), "max_n": 0})
        for run in mod.classifier_runs(spec):
            t = mod.training_spec(spec, run["cell"])
            slot = out.setdefault(t["world"], {"seeds": set(), "max_n": 0})
            slot["seeds"].add(int(run["seed"]))
            slot["max_n"] = max(slot["max_n"], int(t["n"]))
    return {w: {"seeds": sorted(v["seeds"]), "max_n": v["max_n"]} for w, v in out.items()}


def largest_training_size(config: Mapping) -> int:
    """The largest training-set size of any classifier of the run (1 when there is none)."""
    return max([v["max_n"] for v in split_worlds(config).values()] + [1])


# ----------------------------------------------------------------------------- cross-key checks


def _check_gaussian_world(config: Mapping) -> None:
    o = config["oracle"]
    g = gaussian_spec(config)
    if o["checkpoint"] is not None:
        raise ConfigError(
            f"config key 'oracle.checkpoint': {o['checkpoint']!r} is set but oracle.world=gaussian builds "
            "its world from oracle.gaussian; set checkpoint: null or world: flow"
        )
    dim = g["channels"] * g["image_size"] ** 2
    if g["num_classes"] > dim:
        raise ConfigError(
            f"config key 'oracle.gaussian.num_classes': {g['num_classes']} equidistant class means need "
            f"at most channels*image_size^2={dim} dimensions"
        )
    if config["validation"]["enabled"]:
        raise ConfigError(
            "config key 'validation.enabled': the validation stage compares the world with real images "
            "(FID, coverage, memorization, ...), which means nothing for oracle.world=gaussian; set it to false"
        )


def _check_paper(config: Mapping, specs: Mapping[str, dict]) -> None:
    from oracle.experiments import kind_module
    from oracle.validation.report import ARTIFACTS as VALIDATION_ARTIFACTS

    for pid, target in (config.get("paper") or {}).items():
        owner, _, artifact = target.partition("/")
        if owner == "validation":
            names = list(VALIDATION_ARTIFACTS)
            if not config["validation"]["enabled"]:
                raise ConfigError(f"config key 'paper.{pid}': {target!r} needs validation.enabled: true")
        elif owner in specs:
            names = list(kind_module(specs[owner]["kind"]).ARTIFACTS)
        else:
            raise ConfigError(f"config key 'paper.{pid}': {owner!r} is neither an experiment "
                              f"({', '.join(specs) or 'none'}) nor validation")
        if artifact not in names:
            raise ConfigError(f"config key 'paper.{pid}': {owner!r} has no artifact {artifact!r} "
                              f"(it makes {', '.join(names)})")


def check_config(config: Mapping) -> None:
    """Checks that span several keys (the schema checks each key alone). Raises ConfigError.

    The class count K of a flow world is known only once the data are read: the data stage
    checks the priors against it (`check_prior_length`) before any flow is trained. A Gaussian
    world or a `data.classes` list fixes K in the config, so those checks happen here.
    Architecture names and pretrained files are checked by `check_classifier_archs`, which
    imports timm and is therefore called once per workflow invocation, not per job.
    """
    if world_kind(config) == "gaussian":
        _check_gaussian_world(config)
    tr = config["oracle"]["train"]
    if (tr["steps"] is None) == (tr["epochs"] is None):
        raise ConfigError(
            "config key 'oracle.train': set exactly one of 'steps' and 'epochs' "
            f"(got steps={tr['steps']!r}, epochs={tr['epochs']!r})"
        )
    data = config["data"]
    if data["kind"] != "digits" and world_kind(config) == "flow" and not data["root"]:
        raise ConfigError(f"config key 'data.root': data.kind={data['kind']!r} needs a root path, got null")
    if config["oracle"]["checkpoint"] is not None:
        if config["oracle"]["checkpoint_format"] == "public_tarflow" and config["oracle"]["per_class"]:
            raise ConfigError(
                "config key 'oracle.per_class': the public TarFlow checkpoints are one class-conditional "
                "flow; set per_class: false with checkpoint_format: public_tarflow"
            )
    _check_worlds(config)
    for name in config.get("experiments") or {}:
        if name in ("validation", "world", "paper"):
            raise ConfigError(f"config key 'experiments.{name}': {name!r} is reserved (numbers.json "
                              "prefixes); choose another experiment name")
    specs = experiment_specs(config)
    _check_paper(config, specs)
    for stage, r in config["resources"].items():
        if r["nodes"] > 1 and (r["gpus"] == 0 or r["gpus"] % r["nodes"]):
            raise ConfigError(
                f"config key 'resources.{stage}': gpus={r['gpus']} must be a positive multiple of nodes={r['nodes']}"
            )
        if r["nodes"] > 1 and stage != "oracle":
            raise ConfigError(f"config key 'resources.{stage}.nodes': only the oracle stage runs on several nodes")


def check_classifier_archs(config: Mapping) -> None:
    """Every architecture an experiment uses is a timm model and its `pretrained` file exists.

    Imports timm (seconds), so the Snakefile calls it once in the main process: a misspelled
    name then fails before any data is read or any flow trained, not when its classifier job
    starts hours later on a cluster.
    """
    used = {run["arch"] for run in classifier_runs(config)}
    if not used:
        return
    import timm

    for name in sorted(used):
        a = arch_spec(config, name)
        if not timm.is_model(a["model"]):
            close = [m for m in timm.list_models() if _similar(a["model"], m)][:6]
            where = f"classifiers.archs.{name}.model" if "model" in config["classifiers"]["archs"][name] else "classifiers.archs"
            hint = f"; similar timm names: {', '.join(close)}" if close else ""
            raise ConfigError(f"config key {where!r}: {a['model']!r} is not a timm model name{hint}")
        pre = a["pretrained"]
        if isinstance(pre, str) and not Path(pre).is_file():
            raise ConfigError(f"config key 'classifiers.archs.{name}.pretrained': {pre!r} does not exist "
                              "(weights are never downloaded; give a local file or false)")


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


# ----------------------------------------------------------------------------- derived values


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
    """The `oracle.flows.build_flow` spec of this run, once the data fix C, H(=W) and K."""
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


def effective_epochs(n_train: int, epochs: int, batch_size: int, min_steps: int) -> int:
    """Epochs for a classifier on `n_train` samples: at least `epochs`, and enough for `min_steps`.

    Small N would otherwise take only a handful of optimizer steps (N=50, batch 64: one per
    epoch). Steps per epoch count the last partial batch.
    """
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return max(int(epochs), math.ceil(min_steps / steps_per_epoch))


def prepend_pythonpath(path: str | Path) -> None:
    """Put `path` first on PYTHONPATH of this process's environment (inherited by every child
    process), unless it is already there."""
    import os

    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    path = str(path)
    if path not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([path, *parts])


def existing(paths: Iterable[str | None]) -> list[str]:
    """The paths that exist now (optional rule inputs: present files are tracked, absent ones
    are reported by the rule's script instead of failing the DAG)."""
    return [p for p in paths if p and Path(p).exists()]


def main(argv: list[str] | None = None) -> int:
    """``python -m oracle.workflow.config FILE...``: check config files as the workflow would
    (YAML syntax with line and column, the schema, the cross-key checks, the timm names and
    pretrained files) and print one line per file. Snakemake reads a --configfile before the
    workflow can check it and then reports neither the file nor the line of a YAML error."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m oracle.workflow.config", description=main.__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="config files (a preset, config.yaml, your own)")
    args = ap.parse_args(argv)
    schema = Path(__file__).resolve().parents[2] / "config.schema.yaml"
    status = 0
    for f in args.files:
        try:
            cfg = load_yaml(f)
            validate_config(cfg, schema)
            check_config(cfg)
            check_classifier_archs(cfg)
        except ConfigError as exc:
            print(f"{f}: {exc}")
            status = 1
        else:
            print(f"{f}: ok ({len(world_specs(cfg))} world(s), {len(cfg.get('experiments') or {})} experiment(s))")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
