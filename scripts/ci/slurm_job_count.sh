#!/usr/bin/env bash
# How many SLURM jobs `snakemake --profile slurm` submits for a config, from a dry run
# (no SLURM needed): every job minus the local rules (the cheap analysis rules among them,
# unless the config's resources.analysis.local is false), with the classifier jobs bundled
# into group jobs by the profile's group-components.
#
#   scripts/ci/slurm_job_count.sh [CONFIG.yaml] [EXTRA SNAKEMAKE ARGS...]
#   scripts/ci/slurm_job_count.sh presets/imagenet64.yaml --group-components classifiers=1
#   DRY_RUN_OUTPUT=dry.txt scripts/ci/slurm_job_count.sh presets/imagenet64.yaml   # parse a saved dry run
#
# DRY_RUN_OUTPUT: a file holding the output of `snakemake --profile slurm --dry-run` of the same
# config and arguments (the default target, or it with paper ids that it already holds), parsed
# instead of running the dry run again.
#
# Prints one line: jobs, local jobs (of which analysis jobs), training and prediction jobs, group
# jobs, SLURM submissions, and the time limit of a full classifier group (members run one after
# another). With resources.analysis.local false, the analysis jobs are submitted one each too.
set -euo pipefail
cd "$(dirname "$0")/../.."
SNAKEMAKE=${SNAKEMAKE:-.venv/bin/snakemake}

config=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then config=$1; shift; fi
workdir=$(mktemp -d)
trap 'rm -rf "$workdir"' EXIT
if [ -n "${DRY_RUN_OUTPUT:-}" ]; then
    # the output of this very dry run, made elsewhere (the test session makes it for its DAG tests)
    verbose=$(cat "$DRY_RUN_OUTPUT")
else
    # a preset's user-supplied `pretrained:` files must exist for its config check: random stand-ins
    if [ -n "$config" ]; then "${PYTHON:-.venv/bin/python}" scripts/ci/place_pretrained.py "$config" "$workdir"; fi
    verbose=$("$SNAKEMAKE" --cores all --profile slurm --dry-run --directory "$workdir" \
        ${config:+--configfile "$config"} "$@" 2>&1) || { echo "$verbose" | tail -20 >&2; exit 1; }
fi

# Local rules: oracle.workflow.plan.resources.local_rules (the aggregate targets, and the cheap
# analysis rules unless the config sets resources.analysis.local to false), as the Snakefile declares them.
rules_of() { "${PYTHON:-.venv/bin/python}" -c 'import sys, yaml
from oracle.experiments import PACKAGES
from oracle.workflow.plan import resources as res
cfg = yaml.safe_load(open(sys.argv[1]))
print("\n".join(res.local_rules(cfg, PACKAGES) if sys.argv[2] == "local" else res.local_analysis_rules(cfg, PACKAGES)))' "${config:-config.yaml}" "$1"; }
mapfile -t local_rules < <(rules_of local)
mapfile -t analysis_rules < <(rules_of analysis)
total=$(awk '/^total[[:space:]]/{print $2; exit}' <<<"$verbose")
# (from Snakemake's first "job count" table only: the dry run's plan below it has lines of its own)
count_rule() { awk -v r="$1" '/^job[[:space:]]+count/{f=1; next} f && /^total[[:space:]]/{exit} f && $1==r && $2 ~ /^[0-9]+$/ {n=$2; exit} END {print n+0}' <<<"$verbose"; }
n_analysis=0
for r in "${analysis_rules[@]}"; do n_analysis=$(( n_analysis + $(count_rule "$r") )); done
n_local=0
for r in "${local_rules[@]}"; do n_local=$(( n_local + $(count_rule "$r") )); done
# a classifier is its training job and its prediction jobs, grouped together
n_clf=$(count_rule train_classifier)
n_pred=$(count_rule predict_classifier)
n_bundles=$(grep -c "Group job classifiers " <<<"$verbose" || true)
n_alone=$(grep -c "Group job classifiers_large " <<<"$verbose" || true)
submissions=$(( total - n_local - n_clf - n_pred + n_bundles + n_alone ))
k=$(grep -oE "classifiers=[0-9]+" <<<"$*" | tail -n1 | cut -d= -f2 || true)
[ -n "$k" ] || k=$(sed -n 's/^[[:space:]]*-[[:space:]]*classifiers=\([0-9]*\).*/\1/p' slurm/config.yaml | head -n1)
# Members of a bundle run one after another: the worst case is the K longest bundled
# classifiers, each its training job plus its prediction jobs.
worst=$("${PYTHON:-.venv/bin/python}" - "${config:-config.yaml}" "$k" <<'PY'
import sys, yaml
from oracle.workflow import plan
from oracle.workflow.plan import resources as res
cfg, k = yaml.safe_load(open(sys.argv[1])), int(sys.argv[2])
n_max = plan.largest_training_size(cfg)
minutes = []
for run in plan.classifier_runs(cfg):
    n = plan.training_spec(cfg, run["experiment"], run["cell"])["n"]
    if res.classifier_group(cfg, n) == res.CLASSIFIER_GROUP:
        predictions = len(plan.evaluation_sets(cfg, run["experiment"]))
        minutes.append(res.classifier_runtime(cfg, n, n_max) + predictions * res.prediction_runtime(cfg))
print(sum(sorted(minutes, reverse=True)[:k]))
PY
)
echo "${config:-config.yaml}: jobs=$total local=$n_local analysis_local=$n_analysis classifier=$n_clf prediction=$n_pred bundles=$n_bundles (K=$k) unbundled=$n_alone sbatch_submissions=$submissions worst_bundle_time_limit=${worst}min ($(( worst / 60 ))h)"
