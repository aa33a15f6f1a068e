"""Which runs of an experiment a classifier's files stand for.

A model is trained once (`oracle.workflow.plan.model_of`: its world, arch, condition and seed
name it), and every experiment that asks for it reads the same files; the experiment's spec
says which of its runs {experiment, arch, cell, seed} each model stands for (its
``classifiers``, `oracle.workflow.plan.classifier_views`), and the readers of metrics,
histories and predictions name their rows so.

Light: standard library only (the reporting halves' table and figure jobs import it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from oracle.errors import DataError

#: The run of an experiment a classifier stands for (one model may stand for runs of several).
RUN_KEYS = ("experiment", "arch", "cell", "seed")


def run_identities(blob: Mapping[str, Any], views: Mapping[str, Sequence[Mapping]] | None,
                   path: str | os.PathLike) -> list[dict]:
    """The runs {experiment, arch, cell, seed} that a classifier's file (metrics, history, or a
    prediction file's attrs) stands for in one experiment: with `views` (the experiment's spec's
    ``classifiers``, {model id: runs}; `oracle.workflow.plan.classifier_views`) those of the
    file's ``classifier``, else the file's own fields (``experiment`` optional). DataError naming
    `path` when the file's model is not one the experiment reads, or a field is missing."""
    if views is None:
        missing = [k for k in RUN_KEYS[1:] if k not in blob]
        if missing:
            raise DataError(f"{path}: lacks its classifier's key(s) {missing}, and no experiment's classifiers "
                            "name its runs; rerun its job")
        return [{k: blob.get(k) for k in RUN_KEYS}]
    runs = views.get(str(blob.get("classifier")))
    if not runs:
        raise DataError(f"{path}: classifier {blob.get('classifier')!r} is none of the models the experiment reads "
                        f"({', '.join(sorted(views)) or 'none'})")
    return [{k: r[k] for k in RUN_KEYS} for r in runs]
