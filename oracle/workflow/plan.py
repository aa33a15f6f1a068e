"""What the workflow derives from a config: its worlds (with the base world's defaults and
their seeds), its experiments (checked and completed by their kinds), the classifiers they
train and the sets they are scored on, shards, splits, flow specs and step counts.

Light, like `oracle.workflow.config` (the Snakefile imports it at DAG-build time): standard
library only; everything takes the plain config dict and returns plain values.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

from oracle.errors import ConfigError

#: Values of `oracle.world`; an absent key means the first (the flow of the paper).
WORLD_KINDS = ("flow", "gaussian")

BASE_WORLD = "base"
#: World parameters a variant inherits from the base world when it does not set them.
_WORLD_PARAMETERS = ("prior", "label_temperature", "base_temperature", "n_total", "n_shards", "test_size")
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


#: An evaluation set is a world's test set (named by the world) or a noisy copy of it
#: (``<world>-noise<sigma>``, `oracle.noisy_test_sets`), which reads the world's splits.
NOISE_TAG = "-noise"


def sigma_text(sigma: float) -> str:
    """The one spelling of a noise std in names and paths (``0.1``, ``0.05``, ``1e-05``)."""
    return f"{float(sigma):g}"


def noisy_set_name(world: str, sigma: float) -> str:
    """The evaluation set of `world`'s test set with clipped Gaussian noise of std `sigma`:
    ``<world>-noise<sigma>`` (`sigma_text`: equal sigmas share one file)."""
    return f"{world}{NOISE_TAG}{sigma_text(sigma)}"


def parse_evalset(name: str, worlds: Iterable[str]) -> tuple[str, float | None]:
    """(world, sigma) of an evaluation set name: sigma None for a world's own test set.
    ConfigError when `name` names neither a world nor a noisy set of one."""
    worlds = list(worlds)
    if name in worlds:
        return name, None
    world, tag, sigma = name.rpartition(NOISE_TAG)
    if tag and world in worlds:
        try:
            value = float(sigma)
        except ValueError:
            value = math.nan
        if value > 0 and noisy_set_name(world, value) == name:
            return world, value
    raise ConfigError(f"evaluation set {name!r} is neither a world ({', '.join(worlds)}) nor "
                      f"<world>{NOISE_TAG}<sigma> of one")


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


def effective_epochs(n_train: int, epochs: int, batch_size: int, min_steps: int) -> int:
    """Epochs for a classifier on `n_train` samples: at least `epochs`, and enough for `min_steps`.

    Small N would otherwise take only a handful of optimizer steps (N=50, batch 64: one per
    epoch). Steps per epoch count the last partial batch.
    """
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return max(int(epochs), math.ceil(min_steps / steps_per_epoch))
