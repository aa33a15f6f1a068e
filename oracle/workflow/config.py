"""Run configuration: schema validation, cross-key checks and what the workflow derives from it.

The Snakefile imports this module at DAG-build time, so it must stay light: standard library,
PyYAML and jsonschema only (no torch, no numpy). Everything here takes the plain config dict
(`config.yaml`, a preset) and returns plain values; nothing knows of Snakemake.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from oracle.errors import ConfigError

STAGES = ("data", "oracle", "validation", "samples", "splits", "classifiers", "analysis")

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
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {first}") from None
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


# ----------------------------------------------------------------------------- cross-key checks


def experiment_specs(config: Mapping) -> list[dict]:
    """Every classifier experiment with its defaults filled in (archs, sizes, seeds, hard_label)."""
    cls = config["classifiers"]
    out = []
    for exp in cls["experiments"]:
        e = dict(exp)
        e.setdefault("hard_label", "source")
        e.setdefault("archs", list(cls["archs"]))
        e.setdefault("sizes", list(config["splits"]["sizes"]))
        e.setdefault("seeds", list(config["splits"]["seeds"]))
        e["sizes"] = sorted(e["sizes"])
        out.append(e)
    return out


def experiment_spec(config: Mapping, name: str) -> dict:
    """The experiment called `name` (defaults filled in); ConfigError if there is none."""
    for e in experiment_specs(config):
        if e["name"] == name:
            return e
    known = ", ".join(e["name"] for e in config["classifiers"]["experiments"])
    raise ConfigError(f"classifiers.experiments: no experiment named {name!r} (known: {known})")


def arch_spec(config: Mapping, name: str) -> dict:
    """The architecture called `name`: {model, label, input_size, pretrained}."""
    archs = config["classifiers"]["archs"]
    if name not in archs:
        raise ConfigError(f"classifiers.archs: no architecture named {name!r} (known: {', '.join(archs)})")
    a = dict(archs[name])
    a.setdefault("model", name)
    a.setdefault("label", name)
    return a


def all_sizes(config: Mapping) -> list[int]:
    """Every training-set size N that some experiment uses, ascending (the splits file holds all)."""
    sizes = set(config["splits"]["sizes"])
    for e in experiment_specs(config):
        sizes.update(e["sizes"])
    return sorted(sizes)


#: Values of `oracle.world`; an absent key means the first (the flow of the paper).
WORLD_KINDS = ("flow", "gaussian")


def world_kind(config: Mapping) -> str:
    """`oracle.world` of a config: "flow" (trained or imported TarFlow) or "gaussian" (the
    analytic world of DESIGN rule 7). Absent means "flow", so configs without the key keep
    their meaning."""
    kind = config["oracle"].get("world") or WORLD_KINDS[0]
    if kind not in WORLD_KINDS:
        raise ConfigError(f"config key 'oracle.world': {kind!r} is not one of {', '.join(WORLD_KINDS)}")
    return kind


def world_file(run_dir: str, config: Mapping) -> str:
    """The frozen world written by the oracle stage: `oracle/flow.pt` for a flow world,
    `oracle/gaussian_world.pt` for a Gaussian one (both load with
    `oracle.worlds.world_from_checkpoint`)."""
    name = "gaussian_world.pt" if world_kind(config) == "gaussian" else "flow.pt"
    return f"{run_dir}/oracle/{name}"


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
    if o["prior"] is not None:
        resolve_prior(o["prior"], g["num_classes"])
    if config["validation"]["enabled"]:
        raise ConfigError(
            "config key 'validation.enabled': the validation stage compares the world with real images "
            "(FID, coverage, memorization, ...), which means nothing for oracle.world=gaussian; set it to false"
        )


def check_config(config: Mapping) -> None:
    """Checks that span several keys (the schema checks each key alone). Raises ConfigError.

    The data-dependent checks (class count of a checkpoint, K of the prior against the data)
    happen when the rules run, since the data are not read at DAG time. A Gaussian world
    (`oracle.world: gaussian`) fixes K in the config, so its checks all happen here.
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
    if data["kind"] in ("image_folder", "npz") and not data["root"]:
        raise ConfigError(f"config key 'data.root': data.kind={data['kind']!r} needs a root path, got null")

    prior = config["oracle"]["prior"]
    if prior is not None and abs(math.fsum(prior) - 1.0) > PRIOR_TOL:
        raise ConfigError(f"config key 'oracle.prior': must sum to 1, sums to {math.fsum(prior)!r}")
    if config["oracle"]["checkpoint"] is not None:
        if config["oracle"]["checkpoint_format"] == "public_tarflow" and config["oracle"]["per_class"]:
            raise ConfigError(
                "config key 'oracle.per_class': the public TarFlow checkpoints are one class-conditional "
                "flow; set per_class: false with checkpoint_format: public_tarflow"
            )

    samples, splits = config["samples"], config["splits"]
    if samples["n_shards"] > samples["n_total"]:
        raise ConfigError(
            f"config key 'samples.n_shards': {samples['n_shards']} shards for samples.n_total="
            f"{samples['n_total']} samples leaves empty shards"
        )
    pool = samples["n_total"] - splits["test_size"]
    if pool < 1:
        raise ConfigError(
            f"config key 'splits.test_size': {splits['test_size']} leaves no training pool out of "
            f"samples.n_total={samples['n_total']}"
        )
    for n in all_sizes(config):
        if n > pool:
            raise ConfigError(
                f"config key 'splits.sizes': N={n} exceeds the training pool of {pool} samples "
                f"(samples.n_total={samples['n_total']} minus splits.test_size={splits['test_size']})"
            )

    cls = config["classifiers"]
    names = [e["name"] for e in cls["experiments"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"config key 'classifiers.experiments': duplicate experiment name {dup[0]!r}")
    for i, e in enumerate(cls["experiments"]):
        for a in e.get("archs", []):
            if a not in cls["archs"]:
                raise ConfigError(
                    f"config key 'classifiers.experiments[{i}].archs': {a!r} is not in classifiers.archs "
                    f"({', '.join(cls['archs'])})"
                )
        for s in e.get("seeds", []):
            if s not in splits["seeds"]:
                raise ConfigError(
                    f"config key 'classifiers.experiments[{i}].seeds': seed {s} is not in splits.seeds {splits['seeds']}"
                )

    an = config["analysis"]
    if an["experiment"] not in names:
        raise ConfigError(
            f"config key 'analysis.experiment': no classifiers experiment named {an['experiment']!r} "
            f"(known: {', '.join(names)})"
        )
    main = experiment_spec(config, an["experiment"])
    if an["table1_size"] is not None and an["table1_size"] not in main["sizes"]:
        raise ConfigError(
            f"config key 'analysis.table1_size': N={an['table1_size']} is not a size of experiment "
            f"{main['name']!r} ({main['sizes']})"
        )
    for a in an["table2_archs"] or []:
        if a not in main["archs"]:
            raise ConfigError(
                f"config key 'analysis.table2_archs': {a!r} is not an architecture of experiment "
                f"{main['name']!r} ({', '.join(main['archs'])})"
            )
    for n in an["table2_sizes"] or []:
        if n not in main["sizes"]:
            raise ConfigError(
                f"config key 'analysis.table2_sizes': N={n} is not a size of experiment {main['name']!r} ({main['sizes']})"
            )

    for stage in STAGES:
        r = config["resources"][stage]
        if r["nodes"] > 1 and (r["gpus"] == 0 or r["gpus"] % r["nodes"]):
            raise ConfigError(
                f"config key 'resources.{stage}': gpus={r['gpus']} must be a positive multiple of nodes={r['nodes']}"
            )
        if r["nodes"] > 1 and stage != "oracle":
            raise ConfigError(f"config key 'resources.{stage}.nodes': only the oracle stage runs on several nodes")


def load_config(path: str | Path, schema: str | Path) -> dict:
    """Read, validate and cross-check a config file; the dict the workflow would run with."""
    cfg = load_yaml(path)
    validate_config(cfg, schema)
    check_config(cfg)
    return cfg


# ----------------------------------------------------------------------------- derived values


def shard_ids(config: Mapping) -> list[str]:
    """The shard wildcard values: '0000', '0001', ... (four digits, as in shard-0000.h5)."""
    return [f"{i:04d}" for i in range(config["samples"]["n_shards"])]


def shard_sizes(n_total: int, n_shards: int) -> list[int]:
    """Samples per shard: as even as possible, the first `n_total % n_shards` shards get one more."""
    if n_shards < 1 or n_total < n_shards:
        raise ConfigError(f"samples: cannot split n_total={n_total} samples into n_shards={n_shards} shards")
    base, extra = divmod(n_total, n_shards)
    return [base + (i < extra) for i in range(n_shards)]


def classifier_jobs(config: Mapping, experiments: Iterable[str] | None = None) -> list[dict]:
    """One dict {experiment, arch, N, seed} per classifier job, in a stable order."""
    keep = None if experiments is None else set(experiments)
    jobs = []
    for e in experiment_specs(config):
        if keep is not None and e["name"] not in keep:
            continue
        for arch in e["archs"]:
            for n in e["sizes"]:
                for seed in e["seeds"]:
                    jobs.append({"experiment": e["name"], "arch": arch, "N": n, "seed": seed})
    return jobs


def classifier_dir(run_dir: str, job: Mapping) -> str:
    """results/<run>/classifiers/<experiment>/<arch>/N<N>/seed<seed> for one job."""
    return f"{run_dir}/classifiers/{job['experiment']}/{job['arch']}/N{job['N']}/seed{job['seed']}"


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


def effective_epochs(n_train: int, epochs: int, batch_size: int, min_steps: int) -> int:
    """Epochs for a classifier on `n_train` samples: at least `epochs`, and enough for `min_steps`.

    Small N would otherwise take only a handful of optimizer steps (N=50, batch 64: one per
    epoch). Steps per epoch count the last partial batch.
    """
    steps_per_epoch = max(1, math.ceil(n_train / batch_size))
    return max(int(epochs), math.ceil(min_steps / steps_per_epoch))


def resolve_prior(prior: list[float] | None, num_classes: int) -> list[float]:
    """The class prior as K floats: uniform for None; ConfigError if its length is not K."""
    if prior is None:
        return [1.0 / num_classes] * num_classes
    if len(prior) != num_classes:
        raise ConfigError(
            f"config key 'oracle.prior': has {len(prior)} entries but the world has {num_classes} classes"
        )
    return [float(p) for p in prior]


# ----------------------------------------------------------------------------- resources


def rule_threads(config: Mapping, stage: str) -> int:
    """`threads:` of every rule of `stage` (Snakemake caps it at --cores locally)."""
    return int(config["resources"][stage]["cpus"])


def rule_resources(config: Mapping, stage: str) -> dict:
    """`resources:` of every rule of `stage`, in snakemake-executor-plugin-slurm's names.

    Single node: `gpu=<gpus>` (sbatch --gpus). Several nodes: `gres=gpu:<per node>`, `nodes`,
    `tasks=<nodes>` and `mpi=srun` (the plugin then leaves the launch to the rule's command,
    which starts one torchrun per node) and `tasks_per_gpu=0` (no --ntasks-per-gpu).
    """
    r = config["resources"][stage]
    out: dict[str, Any] = {
        "cpus_per_task": int(r["cpus"]),
        "mem_mb": int(r["mem_mb"]),
        "runtime": int(r["runtime"]),
        "nodes": int(r["nodes"]),
    }
    if r["nodes"] > 1:
        out["gres"] = f"gpu:{r['gpus'] // r['nodes']}"
        out["tasks"] = int(r["nodes"])
        out["tasks_per_gpu"] = 0
        out["mpi"] = "srun"
    elif r["gpus"] > 0:
        out["gpu"] = int(r["gpus"])
    if r["partition"]:
        out["slurm_partition"] = r["partition"]
    return out


CLASSIFIER_GROUP = "classifiers"
LARGE_CLASSIFIER_GROUP = "classifiers_large"


def classifier_group(config: Mapping, n: int) -> str:
    """The Snakemake group of a classifier job of size `n`: "classifiers" (bundled by the
    profile's group-components) unless resources.classifiers.bundle_max_n is set and n exceeds
    it, then "classifiers_large" (one SLURM job each: the profile does not bundle it)."""
    limit = config["resources"]["classifiers"].get("bundle_max_n")
    return LARGE_CLASSIFIER_GROUP if limit is not None and n > limit else CLASSIFIER_GROUP


def classifier_runtime(config: Mapping, n: int) -> int:
    """Minutes a classifier job of size `n` asks for (see `runtime_scales_with_n`)."""
    r = config["resources"]["classifiers"]
    runtime = int(r["runtime"])
    if not r.get("runtime_scales_with_n", False):
        return runtime
    n_max = max(all_sizes(config))
    return max(math.ceil(runtime * n / n_max), min(runtime, 10))


def gpus_from_resources(resources: Mapping) -> tuple[int, int]:
    """(GPUs in total, nodes) of a job from its Snakemake resources (see `rule_resources`)."""
    nodes = int(resources.get("nodes", 1) or 1)
    gres = str(resources.get("gres", "") or "")
    if gres.startswith("gpu"):
        per_node = int(gres.split(":")[-1]) if gres.split(":")[-1].isdigit() else 1
        return per_node * nodes, nodes
    return int(resources.get("gpu", 0) or 0), nodes


def oracle_launcher(gpus: int, nodes: int, python: str, head_node: str | None = None,
                    job_id: str | None = None) -> list[str]:
    """The argv prefix that starts flow training on `gpus` GPUs over `nodes` nodes.

    gpus <= 1: [] (run in-process). One node: `python -m torch.distributed.run --standalone
    --nproc_per_node G` (torchrun; one process per GPU, oracle.flow_training does DDP).
    Several nodes (SLURM): `srun` starts one torchrun per node; they meet at `head_node`
    (the allocation's first node) by c10d rendezvous.
    """
    if gpus <= 1:
        return []
    if nodes <= 1:
        return [python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc_per_node", str(gpus)]
    if gpus % nodes:
        raise ConfigError(f"config key 'resources.oracle': gpus={gpus} must be a multiple of nodes={nodes}")
    if not head_node:
        raise ConfigError(
            f"resources.oracle.nodes={nodes}: a multi-node run needs a SLURM allocation (SLURM_JOB_NODELIST) "
            "to find the rendezvous node; run it with --profile slurm"
        )
    # the step asks for the node's GPUs explicitly: job steps do not inherit the job's GRES
    return ["srun", "--nodes", str(nodes), "--ntasks-per-node", "1", f"--gres=gpu:{gpus // nodes}",
            python, "-m", "torch.distributed.run",
            "--nnodes", str(nodes), "--nproc_per_node", str(gpus // nodes), "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"{head_node}:29500", "--rdzv_id", str(job_id or "oracle")]


# ----------------------------------------------------------------------------- provenance helpers


def subset(config: Mapping, *keys: str) -> dict:
    """The part of the config that an artifact depends on: dotted keys -> values (deep copies)."""
    out = {}
    for key in keys:
        node: Any = config
        for part in key.split("."):
            node = node[part]
        out[key] = copy.deepcopy(node)
    return out


def config_hash(config: Mapping) -> str:
    """sha256 of the canonical JSON of a (sub)config, to tell configs apart in provenance."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def classifier_metrics(config: Mapping, run_dir: str, experiments: Iterable[str] | None = None) -> list[str]:
    """metrics.json path of every classifier job of `experiments` (default: all experiments)."""
    return [f"{classifier_dir(run_dir, job)}/metrics.json" for job in classifier_jobs(config, experiments)]


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
