"""The files outside results/ that a run reads and the user must put in place (raw data, a flow
checkpoint to import, pretrained classifier weights, the validation's feature-network weights):
which the config names, which are not there, and the dry run's list and the run's one-line
error about them. Nothing is ever downloaded.

Pretrained classifier weights (`classifiers.archs.<arch>.pretrained`) are stricter: a path that is
not a file is refused when the config is read (`check_pretrained_files`), dry run or not, unless
``ORACLE_PLAN_ONLY=1`` asks a dry run to plan without them (`plan_only`); a run always refuses.

Light (the Snakefile imports it at DAG-build time): standard library and the plan only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from oracle.errors import ConfigError, DataError
from oracle.workflow import plan


def used_archs(config: Mapping) -> list[str]:
    """Names (keys of classifiers.archs) of every architecture any experiment trains: those of
    the classifier runs and those an experiment trains itself (the `archs` of an `active`
    entry, which has no classifier runs)."""
    used = {run["arch"] for run in plan.classifier_runs(config)}
    for spec in plan.experiment_specs(config).values():
        used.update(spec.get("archs") or [])
    return sorted(used)


class NeededFile(NamedTuple):
    """A file or folder outside results/ that the config names and a job reads: its config
    key, its path, what it must hold, and the rules whose jobs read it."""

    key: str
    path: str
    what: str
    rules: tuple[str, ...]
    label: str = "file"  # a short name for the one-line error ("npz data", "flow checkpoint")


def needed_files(config: Mapping) -> list[NeededFile]:
    """Every file outside results/ the run of `config` reads (raw data, a flow checkpoint to
    import, pretrained classifier weights, the validation's feature-network weights), in the
    order a run reads them. Nothing is ever downloaded: each must be put there by the user."""
    from oracle.io.data_sets import layout

    out = []
    data, oracle_cfg = config["data"], config["oracle"]
    flow = plan.world_kind(config) == "flow"
    if flow and data["kind"] != "digits" and data["root"]:
        out.append(NeededFile("data.root", str(data["root"]), f"{data['kind']} data: {layout(data['kind'])}",
                              ("data",), f"{data['kind']} data"))
    if flow and oracle_cfg["checkpoint"] is not None:
        out.append(NeededFile("oracle.checkpoint", str(oracle_cfg["checkpoint"]),
                              f"the flow to import ({oracle_cfg['checkpoint_format']} checkpoint)", ("oracle_import",),
                              "flow checkpoint"))
    for name in used_archs(config):
        pre = plan.arch_spec(config, name)["pretrained"]
        if isinstance(pre, str):
            out.append(NeededFile(f"classifiers.archs.{name}.pretrained", pre,
                                  f"a state dict of timm model {plan.arch_spec(config, name)['model']!r}",
                                  ("train_classifier", "active_round_zero", "active_learning"), "pretrained weights"))
    val = config.get("validation") or {}
    if val.get("enabled"):
        for key, what in (("inception_weights", "the TF-FID Inception-v3 weights (pt_inception-2015-12-05)"),
                          ("resnet_weights", "ImageNet ResNet-50 weights (the validation's feature space)")):
            if val.get(key):
                out.append(NeededFile(f"validation.{key}", str(val[key]), what, ("validation_metrics",),
                                      "feature-network weights"))
    return out


def missing_files(config: Mapping) -> list[NeededFile]:
    """The `needed_files` that are not there: a weights file or checkpoint that is no file, raw
    data whose loader would find none of its files under the root (`oracle.io.raw_files`)."""
    from oracle.io.raw_files import raw_data_inputs

    out = []
    for f in needed_files(config):
        if f.key == "data.root":
            there = bool(raw_data_inputs(config["data"])[0])
        else:
            there = Path(f.path).is_file()
        if not there:
            out.append(f)
    return out


#: The environment switch of a dry run that plans without the pretrained weights: ``1`` (on) or
#: ``0`` / unset (off). An environment variable, not a config key: it says what this invocation
#: is for (planning a cluster run before the weights arrive), not what the run computes.
PLAN_ONLY_ENV = "ORACLE_PLAN_ONLY"

#: What a pretrained weights file must hold (`oracle.io.state_dicts.read_state_dict` reads it).
PRETRAINED_FORMAT = ("a state dict saved by torch.save (.pth/.pt) or a .safetensors file, "
                     "with timm or torchvision parameter names")


def plan_only(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``ORACLE_PLAN_ONLY`` (in `environ`, default this process's environment) asks a dry
    run to list missing pretrained weights instead of refusing them; ConfigError naming the
    variable for a value other than 1, 0 or empty."""
    value = (os.environ if environ is None else environ).get(PLAN_ONLY_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigError(f"environment variable {PLAN_ONLY_ENV}={value!r}: expected 1 (a dry run, snakemake -n, "
                          "lists missing pretrained weights instead of refusing them) or 0")
    return value == "1"


def check_pretrained_files(config: Mapping, *, allow_missing: bool = False) -> None:
    """ConfigError (one line: each key, its path, the file expected) when a `pretrained:` weights
    file of an architecture some experiment trains is not a file, relative paths read from the
    working directory (Snakemake's --directory). `allow_missing`: a dry run under
    ``ORACLE_PLAN_ONLY=1`` (`plan_only`), which lists them instead; a run passes False.

    Called where the Snakefile reads its config (before the DAG is built or any output touched)
    and again by a run's start hook, which ignores ``ORACLE_PLAN_ONLY``: the weights decide what
    every classifier of their architecture learns, so a config naming a file that is not there is
    a bad config, like a misspelled timm name, not an input still to come."""
    if allow_missing:
        return
    specs = {name: plan.arch_spec(config, name) for name in used_archs(config)}
    missing = {name: a for name, a in specs.items()
               if isinstance(a["pretrained"], str) and not Path(a["pretrained"]).is_file()}
    if not missing:
        return
    where = f" (relative paths from {os.getcwd()})" if any(not Path(a["pretrained"]).is_absolute()
                                                          for a in missing.values()) else ""
    each = "; ".join(f"config key 'classifiers.archs.{name}.pretrained': no weights file at {a['pretrained']!r} "
                     f"(expected the weights of timm model {a['model']!r}: {PRETRAINED_FORMAT})"
                     for name, a in missing.items())
    raise ConfigError(f"{each}{where}. Nothing is downloaded: put the file there, or set pretrained: false to train "
                      f"from scratch; {PLAN_ONLY_ENV}=1 snakemake -n plans the run without it (a run always refuses)")


def missing_files_text(missing: Iterable[NeededFile]) -> str:
    """What a dry run prints about the files the run still needs: one line each with its key,
    path and what it must hold."""
    missing = list(missing)
    # a pretrained file is listed only where it stopped nothing: ORACLE_PLAN_ONLY=1, or the config CLI
    weights = (f", a pretrained weights file only under {PLAN_ONLY_ENV}=1"
               if any(m.key.endswith(".pretrained") for m in missing) else "")
    lines = [f"This run still needs {len(missing)} file(s) that are not there (nothing is downloaded; a dry run "
             f"plans without them{weights}; a run refuses to start while a job that reads one is to run):"]
    lines += [f"  {m.key}: {m.path}  ({m.what}; read by {'rule' if len(m.rules) == 1 else 'rules'} "
              f"{', '.join(m.rules)})" for m in missing]
    return "\n".join(lines)


def missing_files_error(missing: Iterable[NeededFile]) -> DataError:
    """The one-line error of a run that would read files that are not there: each named with
    its path, config key and what it must hold (its expected layout, for raw data)."""
    missing = list(missing)
    each = [f"{m.label} not found at {m.path} (config key {m.key}; {m.what})" for m in missing]
    if len(each) == 1:
        return DataError(f"{each[0]} (snakemake -n lists what a run still needs)")
    return DataError(f"{len(each)} file(s) this run reads are not there: " + "; ".join(each)
                     + " (a dry run, snakemake -n, lists them)")


def check_needed_files(config: Mapping, rules: Iterable[str]) -> None:
    """Raise `missing_files_error` (one line) when a file that a job of `rules` (the rules of
    the jobs about to run) reads is not there; a dry run only lists them (`missing_files_text`)."""
    rules = set(rules)
    if needed := [m for m in missing_files(config) if rules & set(m.rules)]:
        raise missing_files_error(needed)
