"""Experiment kinds: one package per kind, all with the same small interface, registered here.

A kind is a package ``oracle/experiments/<kind>/`` in two halves:

* its planning half, the package itself (``__init__.py``): what the workflow needs to build
  its jobs, imported by the Snakefile at DAG-build time, so standard library only (no pandas,
  matplotlib, numpy or torch; a test keeps it so);
* its reporting half, ``report.py``: its data frames, tables, figures and numbers, importing
  pandas and matplotlib at its top. Only a collect, table, figure or numbers job imports it:
  the planning half ends with ``__getattr__ = reporting_half(__name__)``, so
  ``kind_module(kind).numbers`` (or ``oracle.experiments.<kind>.numbers``) loads it on first use.

Its interface (planning half unless marked):

``KIND``                                     the config's ``kind:`` value
``ARTIFACTS``                                {name: oracle.report.paper.Artifact}: its tables
                                             and figures, named by content
``DATA``                                     names of its data files (``<kind>/<name>/data/
                                             <data>.csv``), what its tables, figures and
                                             numbers are computed from
``COLUMNS``                                  {data name: oracle.report.columns.CsvColumns}:
                                             each data file's columns, unit and meaning (its
                                             own entries, or the shared ones it writes:
                                             ``oracle.report.columns.SHARED``); the column
                                             dictionary of docs/outputs.md gathers them
                                             (`oracle.experiments.columns`)
``SCHEMA``                                   the JSON schema of its config entry (keys besides
                                             ``kind``; ``$ref: "#/$defs/..."`` reaches the
                                             shared definitions of config.schema.yaml), which
                                             `oracle.workflow.plan.config.full_schema` slots in as
                                             ``$defs/experiment_<kind>``; its ``default``s are
                                             the entry's defaults (`with_defaults`)
``check(name, entry, config) -> dict``       the entry with defaults filled in, after the
                                             checks that need the rest of the config
                                             (ConfigError naming ``experiments.<name>.<key>``)
``collect_inputs(name, spec, paths) -> dict`` {input name: [files]} of its collect job, from
                                             ``paths``: the run's `oracle.workflow.plan.paths.RunPaths`,
                                             every path of the run by name (``paths.world_samples
                                             (world)``, ``paths.experiment_metrics(name)``, ...;
                                             the workflow is the layer above, so a kind uses the
                                             object without importing it)
``collect(spec, inputs) -> {data: frame}``   report: its data frames from those input files
``numbers(data, spec, data_paths) -> dict``  report: its in-text numbers (``oracle.report.numbers.entry``)
``table(name, data, spec) -> frame``         report, if it has a table: one table (floats:
                                             `oracle.report.tables` rule)
``figure(name, data, spec, stem) -> paths``  report, if it has a figure: one figure as
                                             <stem>.pdf/.png

Besides the two halves, ``findings.py``: ``findings(name, data, spec) -> str``, the finding
sentence of an artifact's caption computed from its data (`oracle.report.captions`; "" for an
artifact that only shows data), reached through `artifact_findings`.

Optional, with defaults (`DEFAULTS`: the planning half answers each one it does not define
with the default, as timm's registry gives a model's optional entries theirs, so a kind that
trains nothing writes none of them):

``classifier_runs(spec) -> list[dict]``      the classifiers it trains: {arch, cell, seed}
                                             (default: none)
``training_spec(spec, cell) -> dict``        what the classifiers of a cell train on
                                             (``oracle.experiments._training.training_spec``;
                                             default: ConfigError, it trains none)
``evaluation_sets(spec) -> list[str]``       the sets every classifier it reads is predicted on
                                             (default: none)

Optional hooks (`OPTIONAL`; the workflow and the contract test use them only where defined):

``split_needs(spec) -> {world: {"seeds",      what a world's splits file must hold for it: the
"max_n"}}``                                  training seeds and largest training-set size of
                                             a kind that trains its own models outside the
                                             classifiers stage, or no seeds for one that reads
                                             a world's test rows itself
                                             (`oracle.workflow.plan.split_worlds`)
``run_evaluation_sets(spec, run) -> list``   the sets one of its classifiers {arch, cell, seed}
                                             is predicted on, a subset of ``evaluation_sets``
                                             (default: all of them; `oracle.workflow.plan.
                                             run_evaluation_sets`)
``curve_cells(spec) -> list[str]``           the cells whose models score a training curve
                                             (classifiers.curve_size test rows at every
                                             evaluation) because the kind reads it; without
                                             the hook none do (`oracle.workflow.plan.training_spec`)

The workflow side: one collect rule per registered kind (``<kind>_collect``, rules/
experiments.smk) and the generic table, figure and numbers rules; a kind with jobs of its own
(``active``) adds ``rules/<kind>.smk``, included by the Snakefile. A contract test
(tests/test_experiment_kinds.py) runs over every registered kind, and another adds a toy kind
the documented way (its package, its name in `PACKAGES`, its config entry) and dry-runs it.
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

from oracle.errors import ConfigError

#: The registered kinds: the packages oracle/experiments/<name>/. Adding a kind is adding its
#: package and its name here.
PACKAGES = ("scaling", "labels", "shift", "estimators", "difficulty", "active", "calibration")

#: What every kind defines (the contract test checks them; ``table`` and ``figure`` only a kind
#: with a table or a figure).
INTERFACE = ("KIND", "ARTIFACTS", "DATA", "COLUMNS", "SCHEMA", "check", "collect_inputs", "collect", "numbers")
#: What a kind may define (the contract test checks them where present).
OPTIONAL = ("split_needs", "run_evaluation_sets", "curve_cells")
#: The names its reporting half defines.
REPORTING = ("collect", "table", "figure", "numbers")


def _no_classifier_runs(spec: Mapping) -> list[dict]:
    """None: the kind trains no classifiers."""
    return []


def _no_training_spec(spec: Mapping, cell: str) -> dict:
    raise ConfigError(f"experiment kind {spec['kind']!r} trains no classifiers (asked for cell {cell!r})")


def _no_evaluation_sets(spec: Mapping) -> list[str]:
    """None: the kind reads no classifier's predictions."""
    return []


#: The planning names a kind may leave out, and what its planning half answers instead (its
#: ``__getattr__``, `reporting_half`).
DEFAULTS = {"classifier_runs": _no_classifier_runs, "training_spec": _no_training_spec,
            "evaluation_sets": _no_evaluation_sets}


def reporting_half(package: str) -> Callable[[str], object]:
    """A module ``__getattr__`` for a kind's planning half, asked for the names the module does
    not define: the `DEFAULTS` of the optional planning names; AttributeError for an `OPTIONAL`
    hook or a planning constant (an upper-case name such as ``RUN_ENTRY_KEYS``) it lacks, so
    asking for one at DAG-build time loads nothing; any other name (those of `REPORTING`) from
    ``<package>.report``, loaded on first use."""

    def __getattr__(name: str) -> object:
        if name in DEFAULTS:
            return DEFAULTS[name]
        if name.startswith("__") or name in OPTIONAL or name.isupper():
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        report = importlib.import_module(f"{package}.report")
        try:
            return getattr(report, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__


def register(registry: dict[str, ModuleType], module: ModuleType) -> None:
    """Add the kind `module` to `registry` under its ``KIND``; ConfigError when that kind is
    registered already (two packages claiming one ``kind:`` value)."""
    kind = module.KIND
    if kind in registry:
        raise ConfigError(f"experiment kind {kind!r} is registered twice: by {registry[kind].__name__} and by "
                          f"{module.__name__}")
    registry[kind] = module


def with_defaults(entry: Mapping, schema: Mapping) -> dict:
    """A copy of `entry` with the ``default`` of every key of the kind's `schema` (its
    ``SCHEMA``) that it lacks: what `oracle.workflow.plan.config.fill_defaults` gives a validated
    config, so a kind's `check` reads each default where it is stated once, its schema.yaml."""
    out = dict(entry)
    for key, sub in (schema.get("properties") or {}).items():
        if "default" in sub:
            out.setdefault(key, copy.deepcopy(sub["default"]))
    return out


def entry_schema(package_file: str) -> dict:
    """The ``schema.yaml`` beside a kind's ``__init__.py`` (`package_file`): its ``SCHEMA``."""
    from oracle.io.yaml_text import parse_yaml

    return parse_yaml(Path(package_file).with_name("schema.yaml").read_text())


@functools.cache
def kinds() -> dict[str, ModuleType]:
    """{kind: planning half} of every registered kind, in the order of `PACKAGES`."""
    out: dict[str, ModuleType] = {}
    for name in PACKAGES:
        register(out, importlib.import_module(f"{__name__}.{name}"))
    return out


def kind_module(kind: str) -> ModuleType:
    """The package of experiment kind `kind` (its planning half; its reporting names load on
    use); ConfigError listing the known kinds otherwise."""
    found = kinds()
    if kind not in found:
        raise ConfigError(f"experiment kind {kind!r} is not one of {', '.join(found)}")
    return found[kind]


def table_csvs() -> list[tuple[str, str]]:
    """(path relative to results/<run>, caption) of every table CSV a run can write: each kind's
    table artifacts (``<kind>/<experiment>/tables/<name>.csv``, in `kinds` order) and the
    validation's (``validation/tables/<name>.csv``); the column dictionary lists them
    (`oracle.experiments.columns.dictionary_markdown`)."""
    from oracle.validation.artifacts import ARTIFACTS as VALIDATION

    out = [(f"{kind}/<experiment>/tables/{a.name}.csv", a.caption)
           for kind, module in kinds().items() for a in module.ARTIFACTS.values() if a.type == "table"]
    return out + [(f"validation/tables/{a.name}.csv", a.caption) for a in VALIDATION.values() if a.type == "table"]


def artifact_findings(kind: str, name: str, data, spec) -> str:
    """The finding sentence of artifact `name` of kind `kind`, from its ``findings`` module
    (``oracle/experiments/<kind>/findings.py``) and the artifact's data frames."""
    module = importlib.import_module(f"{kind_module(kind).__name__}.findings")
    return module.findings(name, data, spec)
