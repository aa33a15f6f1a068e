"""The experiments of a run, checked and completed by their kinds; the classifiers they train,
the sets those are scored on, what a kind's own runs are trained from (`run_spec`), and what
each world's splits file must hold.

One model is trained once: an experiment's run {experiment, arch, cell, seed} names the model
of what determines its weights (`model_of`: world, arch, a condition name from N, labels and a
hash of the kind's whole training spec, seed), so two experiments (or two cells) asking for the
same classifier read the same files (`classifier_models`), and each experiment's ``classifiers``
(`classifier_views`) says which of its runs every model file stands for.

Light: standard library only (the kinds' planning halves, `oracle.experiments`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from oracle.errors import ConfigError
from oracle.experiments import kind_module
from oracle.experiments._training import CURVE_KEYS
from oracle.workflow.plan.config_paths import get_config_value
from oracle.workflow.plan.evalsets import parse_evalset

#: The keys of a training kind's entry that decide the runs it trains itself (a kind may set its
#: own ``RUN_ENTRY_KEYS``; `run_spec`); its training hyperparameters are added to them.
RUN_ENTRY_KEYS = ("world", "labels", "hard_label", "size", "val_fraction")


def resolve_experiment(config: Mapping, name: str) -> dict:
    """Experiment `name` checked and completed by its kind (`check`). What its jobs depend on
    is what the rules hand them of it (their params, `oracle.workflow.provenance.params`)."""
    entry = config["experiments"][name]
    return kind_module(entry["kind"]).check(name, dict(entry), config)


def run_spec(spec: Mapping) -> dict:
    """What the runs a kind trains in a job of its own (active learning) are made from: the
    resolved `spec`'s keys of the kind's ``RUN_ENTRY_KEYS`` and its ``training``. A rule's
    params, so a display label or a reporting setting (target_accuracy) changed reruns the
    experiment's tables, not its runs."""
    keys = getattr(kind_module(spec["kind"]), "RUN_ENTRY_KEYS", RUN_ENTRY_KEYS)
    return {k: spec[k] for k in (*keys, "training") if k in spec}


def experiment_specs(config: Mapping) -> dict[str, dict]:
    """Every experiment by name, `resolve_experiment`, each with its ``classifiers`` (the model
    files it reads and the runs each stands for: `classifier_views`)."""
    specs = {name: resolve_experiment(config, name) for name in config.get("experiments") or {}}
    views = {name: classifier_views(specs, name) for name in specs}
    for name, spec in specs.items():
        if views[name]:
            spec["classifiers"] = views[name]
    return specs


def experiment_spec(config: Mapping, name: str) -> dict:
    """The experiment called `name` (`resolve_experiment`); ConfigError if there is none."""
    exps = config.get("experiments") or {}
    if name not in exps:
        raise ConfigError(f"config key 'experiments': no experiment named {name!r} (known: {', '.join(exps) or 'none'})")
    return experiment_specs(config)[name]


def experiments_of_kind(config: Mapping, kind: str) -> list[str]:
    """Names of the experiments of one kind, in config order."""
    return [n for n, e in (config.get("experiments") or {}).items() if e["kind"] == kind]


def classifier_runs(config: Mapping, experiments: Iterable[str] | None = None,
                    specs: Mapping[str, dict] | None = None) -> list[dict]:
    """One dict {experiment, arch, cell, seed} per trained classifier, in a stable order.
    `specs`: the resolved experiments (`experiment_specs`), so the kinds' checks are not run again."""
    keep = None if experiments is None else set(experiments)
    out = []
    for name, spec in (experiment_specs(config) if specs is None else specs).items():
        if keep is None or name in keep:
            out += [{"experiment": name, **run} for run in kind_module(spec["kind"]).classifier_runs(spec)]
    return out


def prediction_runs(config: Mapping, experiment: str) -> list[dict]:
    """{experiment, arch, cell, seed} of every classifier whose predictions `experiment` reads:
    its own classifiers, or those it evaluates without training them (spec ``borrowed_runs``,
    kind estimators: the classifiers of another experiment)."""
    return runs_read_by(experiment_spec(config, experiment), classifier_runs(config, [experiment]))


def runs_read_by(spec: Mapping, own: list[dict]) -> list[dict]:
    """The classifiers a resolved experiment reads the predictions of: the ``borrowed_runs``
    of a kind that evaluates another experiment's models, else its own runs `own`."""
    if "borrowed_runs" in spec:
        return [dict(r) for r in spec["borrowed_runs"]]
    return own


def prediction_jobs(config: Mapping) -> list[tuple[str, str, str, int, str]]:
    """Every prediction the run makes, once: (world, arch, condition, seed, evaluation set) of
    each model (`model_of`) on each set an experiment reads it on."""
    specs = experiment_specs(config)
    out = set()
    for name, spec in specs.items():
        for run in runs_read_by(spec, classifier_runs(config, [name], specs)):
            m = model_of(run, specs)
            out |= {(m["world"], m["arch"], m["condition"], m["seed"], e) for e in run_evaluation_sets(spec, run)}
    return sorted(out)


def model_condition(training: Mapping) -> str:
    """The condition a model was trained under, as a path component: ``N<n>-<labels>-<hash>``,
    the hash (8 hex digits of a sha256) over the kind's whole training spec (world, n, labels,
    hard label, recipe, and a shift's prior, noise and validation split): what determines the
    weights besides the arch and the seed. Equal specs give equal names in any experiment."""
    blob = json.dumps(dict(training), sort_keys=True, separators=(",", ":"), default=str)
    return f"N{int(training['n'])}-{training['labels']}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


def model_of(run: Mapping, specs: Mapping[str, dict]) -> dict:
    """The model {world, arch, condition, seed} an experiment's run {experiment, arch, cell, seed}
    trains (or borrows): its identity by what determines its weights (`model_condition`)."""
    spec = specs[run["experiment"]]
    t = kind_module(spec["kind"]).training_spec(spec, run["cell"])
    return {"world": t["world"], "arch": run["arch"], "condition": model_condition(t), "seed": int(run["seed"])}


def classifier_id(model: Mapping) -> str:
    """``<world>/<arch>/<condition>/seed<s>``: a model's name, its folder below classifiers/, and
    the ``classifier`` its files record (what `classifier_views` is keyed by)."""
    return f"{model['world']}/{model['arch']}/{model['condition']}/seed{int(model['seed'])}"


def classifier_models(config: Mapping, specs: Mapping[str, dict] | None = None) -> dict[str, dict]:
    """Every model the run trains, once: {`classifier_id`: {world, arch, condition, seed, and
    ``runs``, the experiments' runs it stands for}}, in the order of their first run."""
    specs = experiment_specs(config) if specs is None else specs
    out: dict[str, dict] = {}
    for run in classifier_runs(config, specs=specs):
        model = model_of(run, specs)
        out.setdefault(classifier_id(model), {**model, "runs": []})["runs"].append(dict(run))
    return out


def classifier_views(specs: Mapping[str, dict], name: str) -> dict[str, list[dict]]:
    """{`classifier_id`: the runs {experiment, arch, cell, seed} it stands for} of every model
    experiment `name` reads (its own runs, or those it borrows): how its collect job names the
    rows of files that another experiment may read too. Empty for a kind without classifiers."""
    spec = specs[name]
    own = [{"experiment": name, **r} for r in kind_module(spec["kind"]).classifier_runs(spec)]
    out: dict[str, list[dict]] = {}
    for run in runs_read_by(spec, own):
        out.setdefault(classifier_id(model_of(run, specs)), []).append(
            {"experiment": run["experiment"], "arch": run["arch"], "cell": run["cell"], "seed": int(run["seed"])})
    return out


def training_spec(config: Mapping, experiment: str, cell: str, specs: Mapping[str, dict] | None = None) -> dict:
    """What the classifiers of one cell of an experiment train on (the kind's training_spec,
    `oracle.experiments._training.training_spec`), with the training-curve settings
    (`oracle.experiments._training.CURVE_KEYS`): ``curve_size`` 0 unless the kind reads the
    cell's curve (its optional ``curve_cells``), since scoring a curve costs an evaluation of
    curve_size test rows at every evaluation and moves no weight (it runs without gradients, in
    eval mode, its random numbers forked).
    `specs`: the resolved experiments (`experiment_specs`), so the kind's check is not run again."""
    spec = specs[experiment] if specs is not None else experiment_spec(config, experiment)
    mod = kind_module(spec["kind"])
    out = mod.training_spec(spec, cell)
    for name, key in CURVE_KEYS.items():
        out[name] = get_config_value(config, key)
    if not (hasattr(mod, "curve_cells") and cell in mod.curve_cells(spec)):
        out["curve_size"] = 0
    return out


def evaluation_sets(config: Mapping, experiment: str) -> list[str]:
    """The sets every model of an experiment is predicted on (world names)."""
    spec = experiment_spec(config, experiment)
    return kind_module(spec["kind"]).evaluation_sets(spec)


def run_evaluation_sets(spec: Mapping, run: Mapping) -> list[str]:
    """The sets one model {arch, cell, seed} of a resolved experiment is predicted on: the
    kind's optional ``run_evaluation_sets`` (a subset of its ``evaluation_sets``), else every
    set of `evaluation_sets`."""
    mod = kind_module(spec["kind"])
    if hasattr(mod, "run_evaluation_sets"):
        return mod.run_evaluation_sets(spec, run)
    return mod.evaluation_sets(spec)


def split_worlds(config: Mapping) -> dict[str, dict]:
    """The worlds that need a splits file, with what it must hold: {world: {"seeds": sorted
    training seeds, "max_n": largest training-set size}} (a world only tested on, directly or
    through a noisy copy of its test set, has no seeds and max_n 0): from every kind's
    classifier runs and evaluation sets, and from the optional `split_needs` of a kind."""
    out: dict[str, dict] = {}
    names = list(config["worlds"])
    for name, spec in experiment_specs(config).items():
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


def world_questions(config: Mapping) -> dict[str, list[str]]:
    """The experiments that use each world, in config order: {world: ["<experiment> (<kind>)"]},
    an experiment counted in every world it trains in or is evaluated on (a noisy copy of a
    world's test set counts as that world). Worlds no experiment uses map to []."""
    names = list(config["worlds"])
    out: dict[str, list[str]] = {w: [] for w in names}
    for name, spec in experiment_specs(config).items():
        mod = kind_module(spec["kind"])
        used = {parse_evalset(e, names)[0] for e in mod.evaluation_sets(spec)}
        used |= {mod.training_spec(spec, run["cell"])["world"] for run in mod.classifier_runs(spec)}
        used |= set(mod.split_needs(spec)) if hasattr(mod, "split_needs") else set()
        for w in names:
            if w in used:
                out[w].append(f"{name} ({spec['kind']})")
    return out


def largest_training_size(config: Mapping) -> int:
    """The largest training-set size of any classifier of the run (1 when there is none)."""
    return max([v["max_n"] for v in split_worlds(config).values()] + [1])
