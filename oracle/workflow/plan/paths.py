"""Every path of a run, in one place: `RunPaths(config)`.

A run's artifacts live under ``results/<run>/`` (``run:`` in the config); the first folder
below it names the stage or experiment kind that writes them, and so its rules file::

    data/{train,test}.h5                                          rules/data.smk
    oracle/flow.pt (gaussian_world.pt), train_log.jsonl           rules/oracle.smk
    validation/...                                                rules/validation.smk
    samples/<world>/{shard-XXXX,all}.h5, constants.json           rules/samples.smk
    samples/<world>/noise<sigma>/{test.h5,constants.json}         (a noisy test set)
    samples/<world>/kl_from_<reference>.json                      (exact KL vs Monte Carlo)
    splits/<world>.h5                                             rules/splits.smk
    classifiers/<world>/<arch>/<condition>/seed<s>/...            rules/classifiers.smk
                               (a model by what determines its weights: plan.model_of)
    <kind>/<experiment>/data/*.csv, tables/..., figures/...       rules/experiments.smk
    active/<experiment>/runs/<arch>/<strategy>/seed<s>/rounds.json  rules/active.smk
    active/<experiment>/runs/<arch>/round0/seed<s>/round0.pt     (round 0, every strategy's)
    numbers/*.json, numbers.{json,tex}, claims.{csv,md}           rules/numbers.smk
    logs/, benchmarks/, timings.{csv,md}                          rules/timings.smk

The templates (upper-case attributes) keep Snakemake's ``{wildcard}`` fields, so a rule uses
them as its outputs as they are; the methods fill them in. Who reads them: rules/common.smk
hands every name of `rule_names` to the rules files; a kind's ``collect_inputs`` gets the
object itself (`oracle.experiments`), its one way to any path of the run; CI's rehearsal and
the audit ask it where a run's files are. The experiments, worlds and classifiers it spells
paths for come from `oracle.workflow.plan`, resolved once, when first needed.

Light (the Snakefile imports it at DAG-build time): standard library only.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import oracle
from oracle.experiments import kind_module
from oracle.workflow import plan

#: The checkout this code runs from: the folder holding the ``oracle`` package (the Snakefile,
#: config.schema.yaml, presets/), whatever module asks.
REPO_ROOT = Path(oracle.__file__).resolve().parents[1]
#: Where runs live, relative to the working directory of the workflow.
RESULTS = "results"
#: In a run folder: every number of the run, and the run's effective config.
NUMBERS_FILE = "numbers.json"
CONFIG_FILE = "config.yaml"


def run_relative(path: str | os.PathLike) -> str | None:
    """The posix path of `path` below its ``results/<run>/`` folder (None when it lies in none).

    The last ``results`` component of the path counts, so a results tree copied or moved as a
    whole keeps the same run-relative paths.
    """
    parts = Path(os.path.abspath(path)).parts
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] == RESULTS:
            return "/".join(parts[i + 2:])
    return None


def run_dir(config: Mapping) -> str:
    """``results/<run>``: the folder of every artifact of the run `config` names."""
    return f"{RESULTS}/{config['run']}"


def world_file(run: str, config: Mapping) -> str:
    """The frozen model the oracle stage writes into run folder `run`: ``oracle/flow.pt`` for a
    flow, ``oracle/gaussian_world.pt`` for a Gaussian world (both load with
    `oracle.worlds.world_from_checkpoint`)."""
    name = "gaussian_world.pt" if plan.world_kind(config) == "gaussian" else "flow.pt"
    return f"{run}/oracle/{name}"


def one_of(names: Iterable[str]) -> str:
    """A regular expression matching exactly one of `names` (a wildcard constraint; no name:
    a pattern that matches nothing). Longest first, so a name that extends another wins."""
    names = sorted(set(names), key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


class RunPaths:
    """Every path of the run of `config` (a validated config with its defaults filled in;
    `oracle.workflow.plan.config`). Only the templates are made up front: the plan (worlds,
    experiments, classifiers) is resolved on first use, so asking for an artifact's files
    needs no more of the config than its ``run`` and its experiments' kinds."""

    def __init__(self, config: Mapping) -> None:
        self.config = config
        run = self.RUN = run_dir(config)
        self.DATA_TRAIN = f"{run}/data/train.h5"
        self.DATA_TEST = f"{run}/data/test.h5"
        self.ORACLE = world_file(run, config)
        self.ORACLE_LOG = f"{run}/oracle/train_log.jsonl"
        self.SHARD = f"{run}/samples/{{world}}/shard-{{shard}}.h5"
        self.SAMPLES = f"{run}/samples/{{world}}/all.h5"
        self.CONSTANTS = f"{run}/samples/{{world}}/constants.json"
        self.NOISY_SAMPLES = f"{run}/samples/{{world}}/noise{{sigma}}/test.h5"
        self.NOISY_CONSTANTS = f"{run}/samples/{{world}}/noise{{sigma}}/constants.json"
        self.DIVERGENCE = f"{run}/samples/{{world}}/kl_from_{{reference}}.json"
        self.SPLITS = f"{run}/splits/{{world}}.h5"
        self.CLASSIFIER = f"{run}/classifiers/{{world}}/{{arch}}/{{condition}}/seed{{seed}}"
        self.MODEL = f"{self.CLASSIFIER}/model.pt"
        self.HISTORY = f"{self.CLASSIFIER}/history.json"
        self.PREDICTIONS = f"{self.CLASSIFIER}/predictions/{{evalset}}.h5"
        self.METRICS = f"{self.CLASSIFIER}/metrics/{{evalset}}.json"
        self.EXPERIMENT_DIR = f"{run}/{{kind}}/{{experiment}}"
        self.EXPERIMENT_DATA = f"{self.EXPERIMENT_DIR}/data/{{data}}.csv"
        self.TABLE = f"{self.EXPERIMENT_DIR}/tables/{{artifact}}"
        self.FIGURE = f"{self.EXPERIMENT_DIR}/figures/{{artifact}}"
        self.WORLD_NUMBERS = f"{run}/numbers/world.{{world}}.json"
        self.EXPERIMENT_NUMBERS = f"{run}/numbers/{{experiment}}.json"
        self.NUMBERS_PART = f"{run}/numbers/{{part}}.json"
        self.NUMBERS_JSON = f"{run}/{NUMBERS_FILE}"
        self.NUMBERS_TEX = f"{run}/numbers.tex"
        self.CLAIMS_CSV = f"{run}/claims.csv"
        self.CLAIMS_MD = f"{run}/claims.md"
        self.CLAIMS_FIGURE = f"{run}/claims"  # .pdf, .png and .caption.rst: the claims as a forest plot
        self.VALIDATION_DIR = f"{run}/validation"
        self.VALIDATION_METRICS = f"{self.VALIDATION_DIR}/metrics.json"
        self.VALIDATION_TABLE = f"{self.VALIDATION_DIR}/tables/{{artifact}}"
        self.VALIDATION_FIGURE = f"{self.VALIDATION_DIR}/figures/{{artifact}}"
        self.VALIDATION_NUMBERS = f"{run}/numbers/validation.json"
        self.ACTIVE_RUN = f"{run}/active/{{experiment}}/runs/{{arch}}/{{strategy}}/seed{{seed}}"
        self.ACTIVE_ROUNDS = f"{self.ACTIVE_RUN}/rounds.json"
        # round 0 of every strategy of an (arch, seed): one model, one file (rules/active.smk)
        self.ACTIVE_ROUND_ZERO = f"{run}/active/{{experiment}}/runs/{{arch}}/round0/seed{{seed}}/round0.pt"
        self.EFFECTIVE_CONFIG = f"{run}/{CONFIG_FILE}"
        self.LOGS = f"{run}/logs"
        self.BENCHMARKS = f"{run}/benchmarks"
        self.TIMINGS_CSV = f"{run}/timings.csv"
        self.TIMINGS_MD = f"{run}/timings.md"
        self.REPORT_HTML = f"{run}/report.html"  # the run's report, made last (rules/report.smk)
        self.PAPER_PDF = f"{run}/paper.pdf"  # the reproduced paper as one PDF (`snakemake paper`; rules/report.smk)
        self.PAPER_TEX = f"{run}/paper.tex"

    # ------------------------------------------------------------------------- the plan
    @functools.cached_property
    def worlds(self) -> dict[str, dict]:
        """Every world by name (`oracle.workflow.plan.world_specs`)."""
        return plan.world_specs(self.config)

    @functools.cached_property
    def experiments(self) -> dict[str, dict]:
        """Every experiment by name, resolved by its kind (`oracle.workflow.plan.experiment_specs`)."""
        return plan.experiment_specs(self.config)

    @functools.cached_property
    def runs(self) -> list[dict]:
        """Every trained classifier {experiment, arch, cell, seed} (`oracle.workflow.plan.classifier_runs`)."""
        return plan.classifier_runs(self.config, specs=self.experiments)

    @functools.cached_property
    def models(self) -> dict[str, dict]:
        """Every model the run trains, once, by its id (`oracle.workflow.plan.classifier_models`)."""
        return plan.classifier_models(self.config, specs=self.experiments)

    @functools.cached_property
    def split_worlds(self) -> dict[str, dict]:
        """The worlds with a splits file and what it holds (`oracle.workflow.plan.split_worlds`)."""
        return plan.split_worlds(self.config)

    # ------------------------------------------------------------------------- worlds
    def world_samples(self, world: str) -> str:
        """samples/<world>/all.h5 of one world."""
        return self.SAMPLES.format(world=world)

    def world_shards(self, world: str) -> list[str]:
        """samples/<world>/shard-XXXX.h5 of one world: the files its all.h5 (a virtual dataset)
        reads through. A job that reads all.h5's rows lists them too, so that the audit's rebuild
        in a scratch folder, which places a job's inputs only, has them."""
        return [self.SHARD.format(world=world, shard=s) for s in plan.shard_ids(self.worlds[world]["n_shards"])]

    def world_splits(self, world: str) -> str:
        """splits/<world>.h5 of one world."""
        return self.SPLITS.format(world=world)

    def world_constants(self, worlds: Iterable[str]) -> list[str]:
        """constants.json of each of `worlds`."""
        return [self.CONSTANTS.format(world=w) for w in worlds]

    def noisy_constants(self, world: str, sigmas: Iterable[float]) -> list[str]:
        """noise<sigma>/constants.json of `world`'s noisy test sets."""
        return [self.NOISY_CONSTANTS.format(world=world, sigma=plan.sigma_text(s)) for s in sigmas]

    def divergences(self, worlds: Iterable[str], reference: str) -> list[str]:
        """kl_from_<reference>.json of each of `worlds`."""
        return [self.DIVERGENCE.format(world=w, reference=reference) for w in worlds]

    def evalset_inputs(self, wildcards: Any) -> dict[str, str]:
        """The samples and splits an evaluation set (``wildcards.evalset``) is read from: a
        world's merged samples, or the noisy copy of its test set; the world's splits either way."""
        world, sigma = plan.parse_evalset(wildcards.evalset, self.worlds)
        samples = (self.world_samples(world) if sigma is None
                   else self.NOISY_SAMPLES.format(world=world, sigma=plan.sigma_text(sigma)))
        return {"samples": samples, "splits": self.world_splits(world)}

    # ------------------------------------------------------------------------- classifiers
    def classifier_dir(self, run: Mapping) -> str:
        """classifiers/<world>/<arch>/<condition>/seed<s>: the model an experiment's run {experiment,
        arch, cell, seed} trains or borrows (`oracle.workflow.plan.model_of`)."""
        return self.CLASSIFIER.format(**plan.model_of(run, self.experiments))

    def model_training(self, wildcards: Any) -> dict:
        """The training spec of the model of a classifier job's wildcards (world, arch, condition,
        seed): what its first run's experiment trains it on (`oracle.workflow.plan.training_spec`;
        equal for every run of the model, by its condition), with a training curve where any of
        its runs' experiments reads one."""
        key = plan.classifier_id({k: getattr(wildcards, k) for k in ("world", "arch", "condition", "seed")})
        if key not in self.models:
            raise KeyError(f"classifiers/{key}: no experiment of the config trains this model")
        specs = [plan.training_spec(self.config, r["experiment"], r["cell"], self.experiments)
                 for r in self.models[key]["runs"]]
        return {**specs[0], "curve_size": max(s["curve_size"] for s in specs)}

    def experiment_runs(self, name: str) -> list[dict]:
        """The classifiers experiment `name` trains."""
        return [r for r in self.runs if r["experiment"] == name]

    def prediction_runs(self, name: str) -> list[dict]:
        """The classifiers whose predictions experiment `name` reads (`oracle.workflow.plan.runs_read_by`)."""
        return plan.runs_read_by(self.experiments[name], self.experiment_runs(name))

    def _run_files(self, name: str, template: str) -> list[str]:
        """`template` (METRICS, PREDICTIONS) of every model experiment `name` reads, on each of its
        sets, once each (two runs of one model name one file)."""
        spec = self.experiments[name]
        files = [template.format(**plan.model_of(r, self.experiments), evalset=e) for r in self.prediction_runs(name)
                 for e in plan.run_evaluation_sets(spec, r)]
        return list(dict.fromkeys(files))

    def experiment_metrics(self, name: str) -> list[str]:
        """metrics/<evalset>.json of every classifier experiment `name` reads, on each of its sets."""
        return self._run_files(name, self.METRICS)

    def experiment_predictions(self, name: str) -> list[str]:
        """predictions/<evalset>.h5 of every classifier experiment `name` reads, on each of its sets."""
        return self._run_files(name, self.PREDICTIONS)

    def experiment_histories(self, name: str) -> list[str]:
        """history.json of every classifier experiment `name` trains."""
        return list(dict.fromkeys(self.HISTORY.format(**plan.model_of(r, self.experiments))
                                  for r in self.experiment_runs(name)))

    def active_rounds(self, name: str, runs: Iterable[Mapping]) -> list[str]:
        """rounds.json of each run {arch, strategy, seed} of `active` experiment `name`."""
        return [self.ACTIVE_ROUNDS.format(experiment=name, **r) for r in runs]

    # ------------------------------------------------------------------------- experiments
    def collect_inputs(self, name: str) -> dict[str, list[str]]:
        """{input name: files} of experiment `name`'s collect job: its kind's ``collect_inputs``,
        given this object."""
        spec = self.experiments[name]
        return kind_module(spec["kind"]).collect_inputs(name, spec, self)

    def _kind(self, name: str) -> str:
        return self.config["experiments"][name]["kind"]

    def experiment_data(self, name: str) -> dict[str, str]:
        """{data name: data/<data>.csv} of experiment `name`."""
        kind = self._kind(name)
        return {d: self.EXPERIMENT_DATA.format(kind=kind, experiment=name, data=d) for d in kind_module(kind).DATA}

    def _artifact(self, owner: str, name: str):
        if owner == "validation":
            from oracle.validation.artifacts import ARTIFACTS

            return ARTIFACTS[name]
        return kind_module(self._kind(owner)).ARTIFACTS[name]

    def artifact_stem(self, owner: str, name: str) -> str:
        """The path without suffix of artifact `name` of experiment `owner`, or of ``validation``."""
        art = self._artifact(owner, name)
        if owner == "validation":
            return f"{self.VALIDATION_DIR}/{art.folder}/{name}"
        return (self.TABLE if art.type == "table" else self.FIGURE).format(kind=self._kind(owner), experiment=owner,
                                                                            artifact=name)

    def artifact_files(self, owner: str, name: str) -> list[str]:
        """Every file of an artifact (csv/md/tex/caption or pdf/png/caption)."""
        return [f"{self.artifact_stem(owner, name)}.{s}" for s in self._artifact(owner, name).suffixes]

    def experiment_artifacts(self, name: str) -> list[str]:
        """Every table and figure file of experiment `name`."""
        return [f for a in kind_module(self._kind(name)).ARTIFACTS for f in self.artifact_files(name, a)]

    def paper_files(self) -> dict[str, list[str]]:
        """{paper id: every file of its artifact} of the config's ``paper:`` map (``fig2:
        scaling/scaling_panels``)."""
        return {pid: self.artifact_files(*target.split("/", 1)) for pid, target in (self.config.get("paper") or {}).items()}

    def paper_stems(self) -> dict[str, str]:
        """{paper id: its artifact's path without suffix} (numbers.tex names each file)."""
        return {pid: self.artifact_stem(*target.split("/", 1)) for pid, target in (self.config.get("paper") or {}).items()}

    def numbers_parts(self) -> dict[str, str]:
        """{numbers.json prefix: part file}: every experiment, every world, and the validation."""
        parts = {name: self.NUMBERS_PART.format(part=name) for name in self.experiments}
        parts.update({f"world.{w}": self.NUMBERS_PART.format(part=f"world.{w}") for w in self.worlds})
        if self.config["validation"]["enabled"]:
            parts["validation"] = self.NUMBERS_PART.format(part="validation")
        return parts

    def report_contents(self) -> dict[str, Any]:
        """What the run's report shows besides the claims and timings (`oracle.report.html_report.
        report_items`): every experiment's tables and figures in config order, the validation's when
        it runs, the paper's labels of each artifact ("Figure 2"), in the paper map's order, and each
        world with its constants.json and the experiments that use it (`plan.world_questions`)."""
        from oracle.report.paper import paper_label
        from oracle.validation.artifacts import ARTIFACTS

        def arts(owner: str, artifacts: Mapping) -> list[dict]:
            return [{"name": a, "type": art.type, "stem": self.artifact_stem(owner, a)} for a, art in artifacts.items()]

        labels: dict[str, list[str]] = {}
        for pid, target in (self.config.get("paper") or {}).items():
            labels.setdefault(target, []).append(paper_label(pid))
        return {"experiments": [{"name": name, "kind": spec["kind"],
                                 "artifacts": arts(name, kind_module(spec["kind"]).ARTIFACTS)}
                                for name, spec in self.experiments.items()],
                "validation": arts("validation", ARTIFACTS) if self.config["validation"]["enabled"] else [],
                "paper_labels": labels,
                "worlds": [{"name": w, "constants": self.CONSTANTS.format(world=w), "experiments": users}
                           for w, users in plan.world_questions(self.config).items()]}

    # ------------------------------------------------------------------------- targets
    def sample_targets(self) -> list[str]:
        """What the ``samples`` target builds: every world's constants (and so its samples)."""
        return self.world_constants(self.worlds)

    def classifier_targets(self) -> list[str]:
        """What the ``classifiers`` target builds: the metrics every experiment reads."""
        return list(dict.fromkeys(f for name in self.experiments for f in self.experiment_metrics(name)))

    def experiment_targets(self) -> list[str]:
        """What the ``experiments`` target builds: every experiment's data, tables and figures."""
        return [f for name in self.experiments
                for f in [*self.experiment_data(name).values(), *self.experiment_artifacts(name)]]

    def validation_targets(self) -> list[str]:
        """What the ``validation`` target builds: its metrics and every table and figure."""
        from oracle.validation.artifacts import ARTIFACTS

        return [self.VALIDATION_METRICS] + [f for a in ARTIFACTS for f in self.artifact_files("validation", a)]

    def run_targets(self) -> list[str]:
        """Everything a run makes before its timing table (rule ``all`` adds the table)."""
        return [*self.sample_targets(), *self.experiment_targets(), self.NUMBERS_JSON, self.NUMBERS_TEX,
                self.CLAIMS_CSV, self.CLAIMS_MD,
                *(self.validation_targets() if self.config["validation"]["enabled"] else []), self.EFFECTIVE_CONFIG]

    # ------------------------------------------------------------------------- for the rules
    def rule_names(self) -> dict[str, Any]:
        """The names rules/common.smk gives the rules files: every template (upper case), the
        plan (``WORLDS``, ``EXPERIMENTS``, ``RUNS``, ``SPLIT_WORLDS``), the target lists and
        every path method."""
        names: dict[str, Any] = {k: v for k, v in vars(self).items() if k.isupper()}
        names.update(WORLDS=self.worlds, EXPERIMENTS=self.experiments, RUNS=self.runs, SPLIT_WORLDS=self.split_worlds,
                     SAMPLE_TARGETS=self.sample_targets(), CLASSIFIER_TARGETS=self.classifier_targets(),
                     EXPERIMENT_TARGETS=self.experiment_targets(), VALIDATION_TARGETS=self.validation_targets(),
                     RUN_TARGETS=self.run_targets(), PAPER_TARGETS=self.paper_files())
        for name in ("world_samples", "world_shards", "world_splits", "world_constants", "noisy_constants", "divergences",
                     "evalset_inputs", "classifier_dir", "model_training", "experiment_metrics",
                     "experiment_predictions", "experiment_histories", "active_rounds", "collect_inputs",
                     "experiment_data", "artifact_stem", "artifact_files", "experiment_artifacts", "numbers_parts",
                     "report_contents"):
            names[name] = getattr(self, name)
        return names
