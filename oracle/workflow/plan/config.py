"""Run configuration: loading, schema validation and the checks that span several keys (what
the workflow derives from a valid config is `oracle.workflow.plan`).

The Snakefile imports this module at DAG-build time, so it must stay light: standard library,
PyYAML and jsonschema only (no torch, no numpy; `check_classifier_archs` imports timm only to
read a new timm's names once, or to check a pretrained file).
Everything here takes the plain config dict (`config.yaml`, a preset) and returns plain values;
nothing knows of Snakemake.
"""

from __future__ import annotations

import contextlib
import copy
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from oracle.errors import ConfigError
from oracle.io.yaml_text import parse_yaml
from oracle.workflow import plan
from oracle.workflow.plan import budget, job_checks
from oracle.workflow.plan.needed_files import (NeededFile, check_needed_files, check_pretrained_files,  # noqa: F401
                                               missing_files, missing_files_error, missing_files_text, needed_files,
                                               plan_only, used_archs)
from oracle.workflow.plan.paths import REPO_ROOT

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
            data = parse_yaml(fh)
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


def full_schema(schema: Mapping | str | Path) -> dict:
    """The config schema (config.schema.yaml, or its loaded mapping) with every registered
    experiment kind slotted in: its entry schema (the kind's ``SCHEMA``) as
    ``$defs/experiment_<kind>``, and per kind an if/then that validates an experiment entry of
    that kind against it. A schema that already has them is returned as it is."""
    from oracle.experiments import kinds

    schema = copy.deepcopy(dict(schema) if isinstance(schema, Mapping) else load_yaml(schema))
    entry = schema["properties"]["experiments"]["additionalProperties"]
    if "allOf" in entry:
        return schema
    found = kinds()
    entry["properties"]["kind"] = {"enum": list(found)}
    entry["allOf"] = [{"if": {"properties": {"kind": {"const": k}}}, "then": {"$ref": f"#/$defs/experiment_{k}"}}
                      for k in found]
    for kind, mod in found.items():
        schema["$defs"][f"experiment_{kind}"] = copy.deepcopy(mod.SCHEMA)
    return schema


def fill_defaults(config: dict, schema: Mapping | str | Path) -> None:
    """Set every ``default`` of the schema (`full_schema`) that `config` lacks, in place, as
    Snakemake's ``validate(config, schema)`` does (the same jsonschema extension, so the
    effective config is the same); call after `validate_config`."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    properties = base.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, subschema):
        for name, sub in props.items():
            if "default" in sub and isinstance(instance, dict):
                instance.setdefault(name, sub["default"])
        yield from properties(validator, props, instance, subschema)

    filler = jsonschema.validators.extend(base, {"properties": set_defaults})
    filler(full_schema(schema)).validate(config)


#: A number in exponent notation without a dot (``1e-3``): a float in YAML 1.2 and JSON, but a
#: string to PyYAML and to Snakemake's config loader, which follow YAML 1.1.
EXPONENT_NUMBER = re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+")


def _types(err) -> set[str]:
    v = err.validator_value
    return {v} if isinstance(v, str) else set(v)


def _number_strings(errors: Iterable) -> Iterator:
    """The type errors (also nested in anyOf/oneOf) whose value is an exponent-notation string
    at a key typed number, or typed integer with an integral value."""
    for err in errors:
        yield from _number_strings(err.context or ())
        if err.validator == "type" and isinstance(err.instance, str) and EXPONENT_NUMBER.fullmatch(err.instance):
            if "number" in _types(err) or ("integer" in _types(err) and float(err.instance).is_integer()):
                yield err


def coerce_exponent_numbers(config: dict, validator) -> None:
    """Turn strings such as ``1e-3`` into numbers, in place, where the schema expects a number
    (an integer where it expects one and the value is integral).

    YAML 1.1 (PyYAML, and Snakemake, which reads --configfile itself) needs a dot in a float
    (``1.0e-3``), so ``lr: 1e-3`` arrives as the string '1e-3' and would fail as "not of type
    'number'". Only values at keys typed number/integer in the schema change; a string key
    keeps the string.
    """
    while found := list(_number_strings(validator.iter_errors(config))):
        for err in found:
            parent = config
            for part in list(err.absolute_path)[:-1]:
                parent = parent[part]
            value = float(err.instance)
            parent[err.absolute_path[-1]] = value if "number" in _types(err) else int(value)


def validate_config(config: Mapping, schema: Mapping | str | Path) -> None:
    """Validate `config` against the JSON schema (`full_schema`); raise ConfigError naming the
    offending key.

    The message is one line, e.g. ``config key 'oracle.flow.channels': 'abc' is not of type
    'integer'`` or ``config key 'oracle': unknown key 'foo' (allowed: checkpoint, ...)``.
    Does not modify `config` except to read YAML 1.1's strings such as ``1e-3`` as the numbers
    they are where the schema expects a number (`coerce_exponent_numbers`); `fill_defaults`
    fills schema defaults afterwards.
    """
    import jsonschema

    if "job_server" in config:  # moved out of the science config (issue 18)
        raise ConfigError("config key 'job_server' is gone: the local job server is switched by the environment, "
                          "ORACLE_JOB_SERVER=auto|on|off and ORACLE_JOB_SERVER_IDLE=<seconds> (README); "
                          "delete the key")
    validator = jsonschema.Draft202012Validator(full_schema(schema))
    if isinstance(config, dict):
        coerce_exponent_numbers(config, validator)
    check_finite(config)
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


def check_finite(value: Any, path: tuple = ()) -> None:
    """ConfigError naming the first key of `value` (a config, walked recursively) that holds NaN or
    an infinity: JSON Schema's bounds are false for NaN (``minimum: 0`` passes ``.nan``) and every
    key of the config means a finite number, so without this a job would refuse the value only
    after Snakemake deleted its outputs."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"config key {_key_path(path)!r}: {value!r} is not a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            check_finite(v, (*path, k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite(v, (*path, i))


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Where the Snakefile reads its config: a ConfigError is printed as one line on stderr
    (``ConfigError: config key ...``) and ends the process with status 1, instead of Snakemake's
    report of an exception in the Snakefile with its stack frames under it."""
    try:
        yield
    except ConfigError as exc:
        print(f"ConfigError: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


# ----------------------------------------------------------------------------- worlds


def check_prior_length(config: Mapping, num_classes: int, where: str) -> None:
    """ConfigError when a world's prior does not have `num_classes` entries (`where` names the
    source of K, e.g. the data file); called by the data stage, before any flow is trained."""
    for name, spec in plan.world_specs(config).items():
        if spec["prior"] is not None and len(spec["prior"]) != num_classes:
            key = f"worlds.{name}.prior" if "prior" in (config["worlds"][name] or {}) else "worlds.base.prior"
            raise ConfigError(f"config key {key!r}: has {len(spec['prior'])} entries but {where} has "
                              f"{num_classes} classes")


def _classes_source(config: Mapping) -> str:
    """What fixes K in the config (`budget.plan_num_classes`), as a prior's error names it."""
    if plan.world_kind(config) == "gaussian":
        return "oracle.gaussian.num_classes"
    return "data.classes" if config["data"].get("classes") else f"the {config['data']['kind']} data"


def _check_worlds(config: Mapping) -> None:
    specs = plan.world_specs(config)
    k = budget.plan_num_classes(config)
    for name, spec in specs.items():
        raw = config["worlds"][name] or {}
        key = lambda field: f"worlds.{name if field in raw else plan.BASE_WORLD}.{field}"  # noqa: E731
        prior = spec["prior"]
        if prior is not None:
            if abs(math.fsum(prior) - 1.0) > PRIOR_TOL:
                raise ConfigError(f"config key {key('prior')!r}: must sum to 1, sums to {math.fsum(prior)!r}")
            if k is not None:
                check_prior_length(config, k, _classes_source(config))
            if sum(p > 0 for p in prior) < 2:
                raise ConfigError(f"config key {key('prior')!r}: {prior} puts all its mass on one class: such a "
                                  "world has nothing to classify (H(Y) = 0); give at least two classes mass")
        if spec["n_shards"] > spec["n_total"]:
            raise ConfigError(f"config key {key('n_shards')!r}: {spec['n_shards']} shards for "
                              f"{spec['n_total']} samples of world {name!r} leaves empty shards")


# ----------------------------------------------------------------------------- experiments


# ----------------------------------------------------------------------------- cross-key checks


def _check_gaussian_world(config: Mapping) -> None:
    o = config["oracle"]
    g = plan.gaussian_spec(config)
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


def _check_claims(config: Mapping) -> None:
    """``claims.judged_on``: each key a finding, each value an experiment of that finding's kind."""
    from oracle.report.claim_ids import FINDING_KINDS

    experiments = config.get("experiments") or {}
    for fid, name in ((config.get("claims") or {}).get("judged_on") or {}).items():
        key = f"claims.judged_on.{fid}"
        if fid not in FINDING_KINDS:
            raise ConfigError(f"config key {key!r}: {fid!r} is not a finding of claims.csv "
                              f"(one of {', '.join(FINDING_KINDS)})")
        kind = FINDING_KINDS[fid]
        if name not in experiments:
            raise ConfigError(f"config key {key!r}: no experiment named {name!r} (the {kind} experiments: "
                              f"{', '.join(x for x, e in experiments.items() if e.get('kind') == kind) or 'none'})")
        if experiments[name].get("kind") != kind:
            raise ConfigError(f"config key {key!r}: {name!r} is a {experiments[name].get('kind')} experiment; "
                              f"{fid} is judged on a {kind} experiment")


def _check_paper(config: Mapping, specs: Mapping[str, dict]) -> None:
    from oracle.experiments import kind_module
    from oracle.validation.artifacts import ARTIFACTS as VALIDATION_ARTIFACTS

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
    Architecture names and pretrained files are checked by `check_classifier_archs`, once per
    workflow invocation, not per job.
    """
    if plan.world_kind(config) == "gaussian":
        _check_gaussian_world(config)
    tr = config["oracle"]["train"]
    if (tr["steps"] is None) == (tr["epochs"] is None):
        raise ConfigError(
            "config key 'oracle.train': set exactly one of 'steps' and 'epochs' "
            f"(got steps={tr['steps']!r}, epochs={tr['epochs']!r})"
        )
    data = config["data"]
    if data["kind"] != "digits" and plan.world_kind(config) == "flow" and not data["root"]:
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
    for name, arch in config["classifiers"]["archs"].items():
        if arch["pretrained"] is True:  # YAML's yes/true: the job would train from scratch
            raise ConfigError(f"config key 'classifiers.archs.{name}.pretrained': true names no weights (nothing is "
                              "downloaded); set false, or the path of a local weights file")
    specs = plan.experiment_specs(config)
    _check_paper(config, specs)
    _check_claims(config)
    # what the jobs would refuse, hold and run (memory, steps), before Snakemake deletes any output
    job_checks.check_jobs(config, specs)
    budget.check_budget(config, specs)
    for stage, r in config["resources"].items():
        if r["nodes"] > 1 and (r["gpus"] == 0 or r["gpus"] % r["nodes"]):
            raise ConfigError(
                f"config key 'resources.{stage}': gpus={r['gpus']} must be a positive multiple of nodes={r['nodes']}"
            )
        if r["nodes"] > 1 and stage != "oracle":
            raise ConfigError(f"config key 'resources.{stage}.nodes': only the oracle stage runs on several nodes")


def check_classifier_archs(config: Mapping) -> None:
    """Every architecture an experiment uses is a timm model and its `pretrained` file, where
    it is there, holds weights for it (a file that is not there: `missing_files`).

    The Snakefile calls it once per invocation in the main process: a misspelled name or a
    garbage weights file then fails before any data is read or any flow trained, not when its
    classifier job starts hours later on a cluster. The names come from
    `oracle.classifiers.timm_names` (timm is imported once per installed version, not on every
    invocation: the import costs ~6 s of CPU). A `pretrained` file is read
    memory-mapped through `oracle.io.state_dicts` (tensors are not loaded) and its names are
    compared with those of the timm model built on the meta device (no memory): a file that
    is not a state dict, or shares no parameter name with the model, fails here. That costs
    timm's import and about 1 s per pretrained file per invocation (ResNet-50: 0.6 s to map its
    100 MB, 0.3-0.9 s for the model), and nothing for configs without one; shapes are checked by
    the job (they depend on the data's channels and size).
    """
    used = used_archs(config)
    if not used:
        return
    from oracle.classifiers import timm_names

    known = timm_names.model_names()
    for name in used:
        a = plan.arch_spec(config, name)
        if not timm_names.is_model(a["model"], known):
            close = [m for m in sorted(known) if _similar(a["model"], m)][:6]
            where = f"classifiers.archs.{name}.model" if "model" in config["classifiers"]["archs"][name] else "classifiers.archs"
            hint = f"; similar timm names: {', '.join(close)}" if close else ""
            raise ConfigError(f"config key {where!r}: {a['model']!r} is not a timm model name{hint}")
        pre = a["pretrained"]
        # a file not there is `check_pretrained_files`'s to refuse (or, under ORACLE_PLAN_ONLY=1,
        # a dry run's to list): here only a file that is there is read
        if isinstance(pre, str) and Path(pre).is_file():
            _check_pretrained_file(name, a["model"], pre)


def _check_pretrained_file(name: str, model: str, path: str) -> None:
    import timm
    import torch

    from oracle.errors import DataError
    from oracle.io.state_dicts import read_state_dict

    key = f"classifiers.archs.{name}.pretrained"
    try:
        state = read_state_dict(path, "pretrained weights file", key, mmap=True)
    except DataError as exc:
        raise ConfigError(f"config key {key!r}: {exc}") from None
    with torch.device("meta"):
        own = timm.create_model(model, pretrained=False).state_dict()
    names = {k[len("backbone."):] if k.startswith("backbone.") else k for k in state}
    if not names & set(own):
        raise ConfigError(f"config key {key!r}: {path!r} shares no parameter name with timm model {model!r} "
                          f"(file: {', '.join(sorted(names)[:3])}, ...; model: {', '.join(list(own)[:3])}, ...)")


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


# ----------------------------------------------------------------------------- derived values


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


#: The config schema of this checkout (the kinds' fragments are slotted in by `full_schema`).
SCHEMA_FILE = REPO_ROOT / "config.schema.yaml"


def effective_config(path: str | Path) -> dict:
    """A config file as the Snakefile sees a --configfile: read, validated, defaults filled in,
    checked (ConfigError naming the file's first problem); equal to the run's effective config."""
    cfg = load_yaml(path)
    try:
        validate_config(cfg, SCHEMA_FILE)
        fill_defaults(cfg, SCHEMA_FILE)
        check_config(cfg)
    except ConfigError as exc:
        raise ConfigError(f"config file {str(path)!r}: {exc}") from None
    return cfg


def main(argv: list[str] | None = None) -> int:
    """``python -m oracle.workflow.plan.config FILE...``: check config files as the workflow would
    (YAML syntax with line and column, the schema, the cross-key checks, the timm names and
    pretrained files) and print one line per file, and under it the raw data and weights it
    names that are not there (`missing_files`). Snakemake reads a --configfile before the
    workflow can check it and then reports neither the file nor the line of a YAML error."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m oracle.workflow.plan.config", description=main.__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="config files (a preset, config.yaml, your own)")
    args = ap.parse_args(argv)
    schema = SCHEMA_FILE
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
            print(f"{f}: ok ({len(plan.world_specs(cfg))} world(s), {len(cfg.get('experiments') or {})} experiment(s))")
            if missing := missing_files(cfg):  # relative paths: from the folder the workflow will run in
                print("  " + missing_files_text(missing).replace("\n", "\n  "))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
