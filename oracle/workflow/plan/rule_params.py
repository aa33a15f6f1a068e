"""What the rules compute from a job's wildcards besides its paths: the training spec of a
classifier job, its group and time limit, and the caption and report category of an
artifact. `RuleParams(config, paths)`; rules/common.smk hands every name of `rule_names` to
the rules files (the paths themselves are `oracle.workflow.plan.paths.RunPaths`).

Each helper takes Snakemake's ``wildcards`` object (read by attribute: ``wildcards.experiment``)
and returns plain values; none needs anything else of Snakemake.

Light (the Snakefile imports it at DAG-build time): standard library only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from oracle.experiments import kind_module
from oracle.report.paper import caption_with_paper_ids, paper_ids, paper_label
from oracle.workflow import plan
from oracle.workflow.plan import resources as res
from oracle.workflow.plan.paths import RunPaths


class RuleParams:
    """The wildcard helpers of the run of `config` (validated, defaults filled in), whose plan
    `paths` has resolved."""

    def __init__(self, config: Mapping, paths: RunPaths) -> None:
        self.config = config
        self.paths = paths
        self.paper: Mapping[str, str] = config.get("paper") or {}

    # ------------------------------------------------------------------------- classifier jobs
    def training(self, wildcards: Any) -> dict:
        """The training spec of a classifier job's model (world, n, labels, hyperparameters, curve
        settings; `RunPaths.model_training`)."""
        return self.paths.model_training(wildcards)

    @functools.cached_property
    def n_max(self) -> int:
        """The largest training-set size of the run (`oracle.workflow.plan.largest_training_size`)."""
        return plan.largest_training_size(self.config)

    def pretrained_input(self, wildcards: Any) -> list[str]:
        """The pretrained weights file of the job's architecture, when it names one that exists:
        an input like the samples, so its sha256 goes into the model's record and a replaced
        file retrains. Absent, the job's script names the missing file (and the run's start
        check refuses first: `oracle.workflow.plan.needed_files`)."""
        from oracle.workflow.plan.config import existing

        pretrained = plan.arch_spec(self.config, wildcards.arch)["pretrained"]
        return existing([pretrained]) if isinstance(pretrained, str) else []

    def classifier_group(self, wildcards: Any) -> str:
        """The Snakemake group of a classifier job: bundled on a cluster unless its N is large."""
        return res.classifier_group(self.config, self.training(wildcards)["n"])

    def classifier_runtime(self, wildcards: Any) -> int:
        """Minutes a training job asks for (grows with N under runtime_scales_with_n)."""
        return res.classifier_runtime(self.config, self.training(wildcards)["n"], self.n_max)

    def active_runtime(self, wildcards: Any) -> int:
        """Minutes an active-learning run asks for: one classifier job's time per round after round
        0 (`active_round_zero_runtime`), each at that round's labelled-set size
        (resources.classifiers.runtime_scales_with_n); one round's time when it has none."""
        labels = self.paths.experiments[wildcards.experiment]["labels_per_round"]
        runtimes = [res.classifier_runtime(self.config, n, self.n_max) for n in labels]
        return sum(runtimes[1:]) or runtimes[0]

    def active_round_zero_runtime(self, wildcards: Any) -> int:
        """Minutes an active-learning round 0 asks for: one classifier job's time at its labelled-set size."""
        n = self.paths.experiments[wildcards.experiment]["labels_per_round"][0]
        return res.classifier_runtime(self.config, n, self.n_max)

    # ------------------------------------------------------------------------- artifacts
    def artifact_caption(self, wildcards: Any) -> str:
        """An experiment artifact's caption from its kind, with the paper ids that name it."""
        art = kind_module(wildcards.kind).ARTIFACTS[wildcards.artifact]
        return caption_with_paper_ids(art.caption, paper_ids(self.paper, wildcards.experiment, wildcards.artifact))

    def validation_caption(self, wildcards: Any) -> str:
        """A validation artifact's caption, with the paper ids that name it."""
        from oracle.validation.artifacts import ARTIFACTS

        art = ARTIFACTS[wildcards.artifact]
        return caption_with_paper_ids(art.caption, paper_ids(self.paper, "validation", wildcards.artifact))

    def report_category(self, owner: str | None) -> Callable[[Any], str]:
        """The `snakemake --report` category of an artifact: its paper ids ("Figure 2, Table 1")
        when the config's `paper:` names it, else its kind ("scaling", "validation"). `owner` is
        "validation", or None for an experiment's artifact (its {experiment} wildcard)."""

        def category(wildcards: Any) -> str:
            name = wildcards.experiment if owner is None else owner
            ids = paper_ids(self.paper, name, wildcards.artifact)
            if ids:
                return ", ".join(paper_label(p) for p in ids)
            return wildcards.kind if owner is None else owner

        return category

    @staticmethod
    def report_subcategory(owner: str | None) -> Callable[[Any], str]:
        """The report subcategory: the experiment (or "validation") and the artifact's name."""
        return lambda wildcards: f"{wildcards.experiment if owner is None else owner}/{wildcards.artifact}"

    # ------------------------------------------------------------------------- for the rules
    def rule_names(self) -> dict[str, Any]:
        """The names rules/common.smk gives the rules files."""
        return {name: getattr(self, name) for name in (
            "training", "pretrained_input", "classifier_group", "classifier_runtime", "active_runtime",
            "active_round_zero_runtime", "artifact_caption",
            "validation_caption", "report_category", "report_subcategory")}
