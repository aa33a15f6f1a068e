# What every stage and experiment file uses, included first by the Snakefile: the run's paths
# and the helpers its rules call with their wildcards, from the library, and the wildcard
# constraints. Where each artifact lives and which rules file makes it:
# oracle/workflow/plan/paths.py (RunPaths); the wildcard helpers: oracle/workflow/plan/rule_params.py.
# What stays here needs Snakemake itself: the report() marks of tables and figures. The
# start-of-run check is oracle/workflow/start_check.py (Snakemake's internals: oracle/workflow/engine.py).


from oracle.experiments import kind_module, kinds
from oracle.report.captions import CAPTION_SUFFIX
from oracle.workflow.plan import config as oc
from oracle.workflow import plan
from oracle.workflow.plan import resources as res
from oracle.workflow.plan.paths import RunPaths, one_of
from oracle.workflow.plan.rule_params import RuleParams

PATHS = RunPaths(config)
PARAMS = RuleParams(config, PATHS)
# Every path template (RUN, SAMPLES, MODEL, LOGS, ...: results/<run>/... with {wildcards}), the
# plan (WORLDS, EXPERIMENTS, RUNS, SPLIT_WORLDS), the target lists (EXPERIMENT_TARGETS, ...), the
# path helpers (world_samples, collect_inputs, artifact_files, ...) and the wildcard helpers
# (training, classifier_runtime, artifact_caption, ...): RunPaths.rule_names, RuleParams.rule_names.
globals().update(PATHS.rule_names(), **PARAMS.rule_names())
PAPER = config.get("paper") or {}
# conda: of the rules in rules/*.smk (relative to those files)
ENV = "../envs/oracle.yaml"


wildcard_constraints:
    world=one_of(WORLDS),
    experiment=one_of(EXPERIMENTS),
    kind=one_of(e["kind"] for e in EXPERIMENTS.values()),
    arch=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    cell=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    # a model's training condition (plan.model_condition): N<n>-<labels>-<8 hex digits>
    condition=r"N\d+-[a-z]+-[0-9a-f]{8}",
    # a world's test set, or a noisy copy of it (<world>-noise<sigma>, plan.noisy_set_name)
    evalset=f"(?:{one_of(WORLDS)})(?:{plan.NOISE_TAG}\\d[\\d.e+-]*)?",
    sigma=r"\d[\d.e+-]*",
    reference=one_of(WORLDS),
    shard=r"\d{4}",
    seed=r"\d+",
    artifact=r"[a-z0-9_]+",
    data=r"[a-z0-9_]+",


# ----------------------------------------------------------------------------- rule helpers
# (functions live here: Snakemake's linter wants rules files to hold rules only)


def table_outputs(stem, owner=None):
    """<stem>.csv and <stem>.md (both shown in `snakemake --report`, caption
    report/artifact.rst), .tex, .column.tex (one column wide), .note.tex (the finding) and the
    caption file .caption.rst (last; report/artifact.rst includes it): the order scripts rely on
    (oracle.report.tables.TABLE_FILES). `owner`: see RuleParams.report_category."""
    # (a line may not start with `report(`: Snakemake parses that as the report keyword)
    csv, md = (report(f"{stem}.{s}", caption="../report/artifact.rst", category=report_category(owner),
                      subcategory=report_subcategory(owner)) for s in ("csv", "md"))
    return [csv, md, f"{stem}.tex", f"{stem}.column.tex", f"{stem}.note.tex", f"{stem}.{CAPTION_SUFFIX}"]


def figure_outputs(stem, owner=None):
    """<stem>.pdf, <stem>.png (shown in the report) and the caption file .caption.rst (last).
    `owner`: see RuleParams.report_category."""
    return [f"{stem}.pdf", report(f"{stem}.png", caption="../report/artifact.rst", category=report_category(owner),
                                  subcategory=report_subcategory(owner)), f"{stem}.{CAPTION_SUFFIX}"]
