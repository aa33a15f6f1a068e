"""Experiment kinds: one module per kind, all with the same small interface, found by kind.

A kind is a module ``oracle/experiments/<kind>.py`` (modules whose name starts with ``_``
hold shared helpers and are not kinds). It is found by `kind_module` by its ``KIND``, so
adding a kind edits no function here. Its interface:

``KIND``                                     the config's ``kind:`` value
``ARTIFACTS``                                {name: oracle.report.paper.Artifact}: its tables
                                             and figures, named by content
``DATA``                                     names of its data files (``<kind>/<name>/data/
                                             <data>.csv``), what its tables, figures and
                                             numbers are computed from
``check(name, entry, config) -> dict``       the entry with defaults filled in, after the
                                             checks that need the rest of the config
                                             (ConfigError naming ``experiments.<name>.<key>``)
``classifier_runs(spec) -> list[dict]``      the classifiers it trains: {arch, cell, seed}
``training_spec(spec, cell) -> dict``        what the classifiers of a cell train on
                                             (``oracle.experiments._training.training_spec``)
``evaluation_sets(spec) -> list[str]``       the sets every classifier is predicted on
``collect(spec, inputs) -> {data: frame}``   its data frames from its rule's input files
``table(name, data, spec) -> (frame, fmt)``  one table (``fmt``: float format of .md/.tex)
``figure(name, data, spec, stem) -> paths``  one figure as <stem>.pdf/.png
``numbers(data, spec, data_paths) -> dict``  its in-text numbers (``oracle.report.numbers.entry``)

Optional (`OPTIONAL`; the workflow and the contract test check them only where defined):

``split_needs(spec) -> {world: {"seeds",      the training seeds and largest training-set size
"max_n"}}``                                  it needs in a world's splits file, for a kind that
                                             trains its own models outside the classifiers
                                             stage (`oracle.workflow.plan.split_worlds`)

The workflow side is ``rules/<kind>.smk`` (the rule that collects its data) and the generic
table, figure and numbers rules of ``rules/experiments.smk``; its config is the schema's
``$defs/experiment_<kind>``. A contract test (tests/test_experiment_kinds.py) runs over every
kind found here.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType

from oracle.errors import ConfigError

#: What every kind module defines (the contract test checks them).
INTERFACE = ("KIND", "ARTIFACTS", "DATA", "check", "classifier_runs", "training_spec", "evaluation_sets",
             "collect", "table", "figure", "numbers")
#: What a kind module may define (the contract test checks them where present).
OPTIONAL = ("split_needs",)


@functools.cache
def kinds() -> dict[str, ModuleType]:
    """{kind: module} of every kind module of this package."""
    out: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        out[module.KIND] = module
    return dict(sorted(out.items()))


def kind_module(kind: str) -> ModuleType:
    """The module of experiment kind `kind`; ConfigError listing the known kinds otherwise."""
    found = kinds()
    if kind not in found:
        raise ConfigError(f"experiment kind {kind!r} is not one of {', '.join(found)}")
    return found[kind]
