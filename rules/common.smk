# The one place where paths, wildcard constraints and target lists are spelled. Included first
# by the Snakefile; every stage and experiment file uses these names.
#
#   results/<run>/data/{train,test}.h5                          rules/data.smk
#   results/<run>/oracle/flow.pt (gaussian_world.pt)            rules/oracle.smk
#   results/<run>/validation/...                                rules/validation.smk
#   results/<run>/samples/<world>/{shard-XXXX,all}.h5, constants.json   rules/samples.smk
#   results/<run>/samples/<world>/noise<sigma>/{test.h5,constants.json}  (a noisy test set)
#   results/<run>/samples/<world>/kl_from_<reference>.json       (exact KL vs Monte Carlo)
#   results/<run>/splits/<world>.h5                             rules/splits.smk
#   results/<run>/classifiers/<experiment>/<arch>/<cell>/seed<s>/...   rules/classifiers.smk
#   results/<run>/<kind>/<experiment>/data/*.csv                rules/experiments.smk
#   results/<run>/active/<experiment>/runs/<arch>/<strategy>/seed<s>/rounds.json   rules/active.smk
#   results/<run>/<kind>/<experiment>/{tables,figures}/...      rules/experiments.smk
#   results/<run>/numbers/*.json, numbers.{json,tex}            rules/numbers.smk (and the
#                                                               experiment and validation files)

import re

from oracle.experiments import CollectPaths, kind_module, kinds
from oracle.report.captions import CAPTION_SUFFIX
from oracle.workflow import config as oc
from oracle.workflow import plan
from oracle.workflow import resources as res

RUN = f"results/{config['run']}"
WORLDS = plan.world_specs(config)
EXPERIMENTS = plan.experiment_specs(config)
RUNS = plan.classifier_runs(config)
SPLIT_WORLDS = plan.split_worlds(config)
PAPER = config.get("paper") or {}
# conda: of the rules in rules/*.smk (relative to those files)
ENV = "../envs/oracle.yaml"


def _one_of(names):
    """A wildcard constraint matching exactly these names (no name matches: an empty list)."""
    names = sorted(set(names), key=len, reverse=True)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


wildcard_constraints:
    world=_one_of(WORLDS),
    experiment=_one_of(EXPERIMENTS),
    kind=_one_of(e["kind"] for e in EXPERIMENTS.values()),
    arch=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    cell=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    # a world's test set, or a noisy copy of it (<world>-noise<sigma>, plan.noisy_set_name)
    evalset=f"(?:{_one_of(WORLDS)})(?:{plan.NOISE_TAG}\\d[\\d.e+-]*)?",
    sigma=r"\d[\d.e+-]*",
    reference=_one_of(WORLDS),
    shard=r"\d{4}",
    seed=r"\d+",
    artifact=r"[a-z0-9_]+",
    data=r"[a-z0-9_]+",


# ----------------------------------------------------------------------------- paths
DATA_TRAIN = f"{RUN}/data/train.h5"
DATA_TEST = f"{RUN}/data/test.h5"
ORACLE = plan.world_file(RUN, config)
ORACLE_LOG = f"{RUN}/oracle/train_log.jsonl"
SHARD = f"{RUN}/samples/{{world}}/shard-{{shard}}.h5"
SAMPLES = f"{RUN}/samples/{{world}}/all.h5"
CONSTANTS = f"{RUN}/samples/{{world}}/constants.json"
NOISY_SAMPLES = f"{RUN}/samples/{{world}}/noise{{sigma}}/test.h5"
NOISY_CONSTANTS = f"{RUN}/samples/{{world}}/noise{{sigma}}/constants.json"
DIVERGENCE = f"{RUN}/samples/{{world}}/kl_from_{{reference}}.json"
SPLITS = f"{RUN}/splits/{{world}}.h5"
CLASSIFIER = f"{RUN}/classifiers/{{experiment}}/{{arch}}/{{cell}}/seed{{seed}}"
MODEL = f"{CLASSIFIER}/model.pt"
HISTORY = f"{CLASSIFIER}/history.json"
PREDICTIONS = f"{CLASSIFIER}/predictions/{{evalset}}.h5"
METRICS = f"{CLASSIFIER}/metrics/{{evalset}}.json"
EXPERIMENT_DIR = f"{RUN}/{{kind}}/{{experiment}}"
EXPERIMENT_DATA = f"{EXPERIMENT_DIR}/data/{{data}}.csv"
TABLE = f"{EXPERIMENT_DIR}/tables/{{artifact}}"
FIGURE = f"{EXPERIMENT_DIR}/figures/{{artifact}}"
WORLD_NUMBERS = f"{RUN}/numbers/world.{{world}}.json"
EXPERIMENT_NUMBERS = f"{RUN}/numbers/{{experiment}}.json"
NUMBERS_PART = f"{RUN}/numbers/{{part}}.json"
NUMBERS_JSON = f"{RUN}/numbers.json"
NUMBERS_TEX = f"{RUN}/numbers.tex"
CLAIMS_CSV = f"{RUN}/claims.csv"
CLAIMS_MD = f"{RUN}/claims.md"
VALIDATION_DIR = f"{RUN}/validation"
VALIDATION_METRICS = f"{VALIDATION_DIR}/metrics.json"
VALIDATION_TABLE = f"{VALIDATION_DIR}/tables/{{artifact}}"
VALIDATION_FIGURE = f"{VALIDATION_DIR}/figures/{{artifact}}"
VALIDATION_NUMBERS = f"{RUN}/numbers/validation.json"
ACTIVE_RUN = f"{RUN}/active/{{experiment}}/runs/{{arch}}/{{strategy}}/seed{{seed}}"
ACTIVE_ROUNDS = f"{ACTIVE_RUN}/rounds.json"
LOGS = f"{RUN}/logs"
BENCHMARKS = f"{RUN}/benchmarks"
TIMINGS_CSV = f"{RUN}/timings.csv"
TIMINGS_MD = f"{RUN}/timings.md"


def world_samples(world):
    """samples/<world>/all.h5 of one world."""
    return SAMPLES.format(world=world)


def world_splits(world):
    """splits/<world>.h5 of one world."""
    return SPLITS.format(world=world)


def classifier_dir(run):
    """classifiers/<experiment>/<arch>/<cell>/seed<s> of one run {experiment, arch, cell, seed}."""
    return CLASSIFIER.format(**run)


def experiment_runs(name):
    """The classifier runs of experiment `name`."""
    return [r for r in RUNS if r["experiment"] == name]


def prediction_runs(name):
    """The classifiers whose predictions experiment `name` reads: its own, or those it borrows
    from another experiment (spec borrowed_runs, kind estimators)."""
    return EXPERIMENTS[name].get("borrowed_runs") or experiment_runs(name)


def experiment_metrics(name):
    """metrics/<evalset>.json of every classifier experiment `name` reads, on every evaluation set."""
    return [METRICS.format(**r, evalset=e) for r in prediction_runs(name)
            for e in plan.run_evaluation_sets(EXPERIMENTS[name], r)]


def experiment_predictions(name):
    """predictions/<evalset>.h5 of every classifier experiment `name` reads, on every evaluation set."""
    return [PREDICTIONS.format(**r, evalset=e) for r in prediction_runs(name)
            for e in plan.run_evaluation_sets(EXPERIMENTS[name], r)]


def evalset_inputs(wildcards):
    """The samples and splits an evaluation set is read from: a world's merged samples, or the
    noisy copy of its test set; the world's splits either way."""
    world, sigma = plan.parse_evalset(wildcards.evalset, WORLDS)
    samples = world_samples(world) if sigma is None else NOISY_SAMPLES.format(world=world, sigma=plan.sigma_text(sigma))
    return {"samples": samples, "splits": world_splits(world)}


def noisy_constants(world, sigmas):
    """noise<sigma>/constants.json of `world`'s noisy test sets."""
    return [NOISY_CONSTANTS.format(world=world, sigma=plan.sigma_text(s)) for s in sigmas]


def divergences(worlds, reference):
    """kl_from_<reference>.json of each of `worlds`."""
    return [DIVERGENCE.format(world=w, reference=reference) for w in worlds]


def experiment_histories(name):
    """history.json of every classifier of experiment `name`."""
    return [HISTORY.format(**r) for r in experiment_runs(name)]


def world_constants(worlds):
    """constants.json of each of `worlds`."""
    return [CONSTANTS.format(world=w) for w in worlds]


def active_rounds(name, runs):
    """rounds.json of each run {arch, strategy, seed} of `active` experiment `name`."""
    return [ACTIVE_ROUNDS.format(experiment=name, **r) for r in runs]


#: What a kind's collect_inputs builds its collect job's inputs from (oracle.experiments.CollectPaths).
COLLECT_PATHS = CollectPaths(metrics=experiment_metrics, predictions=experiment_predictions,
                             histories=experiment_histories, divergences=divergences,
                             noisy_constants=noisy_constants, constants=world_constants, active_rounds=active_rounds)


def collect_inputs(name):
    """{input name: files} of experiment `name`'s collect job (its kind's collect_inputs)."""
    spec = EXPERIMENTS[name]
    return kind_module(spec["kind"]).collect_inputs(name, spec, COLLECT_PATHS)


def experiment_data(name):
    """data/<data>.csv of experiment `name` ({data name: path})."""
    spec = EXPERIMENTS[name]
    return {d: EXPERIMENT_DATA.format(kind=spec["kind"], experiment=name, data=d)
            for d in kind_module(spec["kind"]).DATA}


def artifact_stem(owner, name):
    """The path without suffix of artifact `name` of an experiment or of `validation`."""
    if owner == "validation":
        from oracle.validation.artifacts import ARTIFACTS as VALIDATION_ARTIFACTS

        art = VALIDATION_ARTIFACTS[name]
        return f"{VALIDATION_DIR}/{art.folder}/{name}"
    art = kind_module(EXPERIMENTS[owner]["kind"]).ARTIFACTS[name]
    return (TABLE if art.type == "table" else FIGURE).format(kind=EXPERIMENTS[owner]["kind"], experiment=owner,
                                                              artifact=name)


def artifact_files(owner, name):
    """Every file of an artifact (csv/md/tex or pdf/png)."""
    if owner == "validation":
        from oracle.validation.artifacts import ARTIFACTS as VALIDATION_ARTIFACTS

        art = VALIDATION_ARTIFACTS[name]
    else:
        art = kind_module(EXPERIMENTS[owner]["kind"]).ARTIFACTS[name]
    return [f"{artifact_stem(owner, name)}.{s}" for s in art.suffixes]


def experiment_artifacts(name):
    """Every table and figure file of experiment `name`."""
    return [f for a in kind_module(EXPERIMENTS[name]["kind"]).ARTIFACTS for f in artifact_files(name, a)]


def numbers_parts():
    """{numbers.json prefix: part file}: every experiment, every world, and the validation."""
    parts = {name: NUMBERS_PART.format(part=name) for name in EXPERIMENTS}
    parts.update({f"world.{w}": NUMBERS_PART.format(part=f"world.{w}") for w in WORLDS})
    if config["validation"]["enabled"]:
        parts["validation"] = NUMBERS_PART.format(part="validation")
    return parts


# ----------------------------------------------------------------------------- rule helpers
# (functions live here: Snakemake's linter wants rules files to hold rules only)


def report_category(owner):
    """The `snakemake --report` category of an artifact: its paper ids ("Figure 2", "Table 1")
    when the config's `paper:` names it, else its kind ("scaling", "validation"). `owner` is
    "validation", or None for an experiment's artifact (its {experiment} wildcard)."""
    from oracle.report.paper import paper_ids, paper_label

    def category(wildcards):
        name = wildcards.experiment if owner is None else owner
        ids = paper_ids(PAPER, name, wildcards.artifact)
        if ids:
            return ", ".join(paper_label(p) for p in ids)
        return wildcards.kind if owner is None else owner

    return category


def report_subcategory(owner):
    """The report subcategory: the experiment (or "validation") and the artifact's name."""
    return lambda wildcards: f"{wildcards.experiment if owner is None else owner}/{wildcards.artifact}"


def table_outputs(stem, owner=None):
    """<stem>.csv and <stem>.md (both shown in `snakemake --report`, caption
    report/artifact.rst), .tex and the caption file .caption.rst (last; report/artifact.rst
    includes it): the order scripts rely on. `owner`: see report_category."""
    # (a line may not start with `report(`: Snakemake parses that as the report keyword)
    csv, md = (report(f"{stem}.{s}", caption="../report/artifact.rst", category=report_category(owner),
                      subcategory=report_subcategory(owner)) for s in ("csv", "md"))
    return [csv, md, f"{stem}.tex", f"{stem}.{CAPTION_SUFFIX}"]


def figure_outputs(stem, owner=None):
    """<stem>.pdf, <stem>.png (shown in the report) and the caption file .caption.rst (last).
    `owner`: see report_category."""
    return [f"{stem}.pdf", report(f"{stem}.png", caption="../report/artifact.rst", category=report_category(owner),
                                  subcategory=report_subcategory(owner)), f"{stem}.{CAPTION_SUFFIX}"]


def artifact_caption(wildcards):
    """An experiment artifact's caption from its kind module, with the paper ids that name it."""
    from oracle.report.paper import caption_with_paper_ids, paper_ids

    art = kind_module(wildcards.kind).ARTIFACTS[wildcards.artifact]
    return caption_with_paper_ids(art.caption, paper_ids(PAPER, wildcards.experiment, wildcards.artifact))


def validation_caption(wildcards):
    """A validation artifact's caption, with the paper ids that name it."""
    from oracle.report.paper import caption_with_paper_ids, paper_ids
    from oracle.validation.artifacts import ARTIFACTS as VALIDATION_ARTIFACTS

    art = VALIDATION_ARTIFACTS[wildcards.artifact]
    return caption_with_paper_ids(art.caption, paper_ids(PAPER, "validation", wildcards.artifact))


N_MAX = plan.largest_training_size(config)


def training(wildcards):
    """The training spec of a classifier job (world, n, labels, hyperparameters)."""
    return plan.training_spec(config, wildcards.experiment, wildcards.cell, EXPERIMENTS)


def classifier_group(wildcards):
    """The Snakemake group of a classifier job: bundled on a cluster unless its N is large."""
    return res.classifier_group(config, training(wildcards)["n"])


def classifier_runtime(wildcards):
    """Minutes a training job asks for (grows with N under runtime_scales_with_n)."""
    return res.classifier_runtime(config, training(wildcards)["n"], N_MAX)


def active_runtime(wildcards):
    """Minutes an active-learning run asks for: one classifier job's time per round, each at
    that round's labelled-set size (resources.classifiers.runtime_scales_with_n)."""
    labels = EXPERIMENTS[wildcards.experiment]["labels_per_round"]
    return sum(res.classifier_runtime(config, n, N_MAX) for n in labels)


# ----------------------------------------------------------------------------- targets
# What `snakemake` (rule all) builds; the stage files define the rules that make them.
EXPERIMENT_TARGETS = [f for name in EXPERIMENTS for f in [*experiment_data(name).values(), *experiment_artifacts(name)]]
SAMPLE_TARGETS = [CONSTANTS.format(world=w) for w in WORLDS]
CLASSIFIER_TARGETS = [f for name in EXPERIMENTS for f in experiment_metrics(name)]
PAPER_TARGETS = {pid: artifact_files(*target.split("/", 1)) for pid, target in PAPER.items()}


def paper_target_input(pid, files):
    """The input of the alias rule of paper id `pid` (its artifact's files). `snakemake --force
    fig2` forces only the named target's own job, and that job (an alias) makes nothing. So
    when the alias is a forced target, its files are forced as well (Snakemake 9 keeps the set of
    forced files on the DAG it is building), so the README's command redraws that one
    artifact and nothing else (tests/test_readme_commands.py checks it)."""

    def inputs(wildcards):
        settings, dag = workflow.dag_settings, getattr(workflow, "_dag", None)
        if settings is not None and settings.forcetargets and pid in settings.targets and dag is not None:
            dag.forcefiles.update(files)
        return files

    return inputs
