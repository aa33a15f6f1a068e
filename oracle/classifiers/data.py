"""The rows a classifier trains and is scored on, read from a world's samples and splits.

A training set is the seed's first N rows of the world's training pool
(`oracle.io.splits.training_indices`) with targets from `oracle.classifiers.targets`, or, when
its spec asks for a training-time shift (``class_prior``, ``noise_std``), the rows and images
of `oracle.classifiers.shifted`; an evaluation set is the world's fixed test set with the
world's labels and exact posteriors (or a file derived from it, such as a noisy test set of
`oracle.noisy_test_sets`, which holds exactly those rows).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from oracle.classifiers.stream import SampleRows
from oracle.classifiers.targets import training_targets
from oracle.errors import DataError
from oracle.io.sample_rows import read_rows
from oracle.posterior import posterior_rows
from oracle.io.splits import read_splits_h5, training_indices, validation_indices


@dataclass(frozen=True)
class TrainingSet:
    """x float32 [n, C, H, W] (in memory, or a `SampleRows` reading them from the file); targets int64 [n] (hard) or float32 [n, K] (soft); rows: indices
    into the sample file; num_classes K; attrs: the sample file's attributes; shift: what a
    training-time shift realised (class counts, resampled classes, noise std; {} without)."""

    x: np.ndarray | SampleRows
    targets: np.ndarray
    soft: bool
    rows: np.ndarray
    num_classes: int
    attrs: dict
    shift: dict = field(default_factory=dict)

    def images(self) -> torch.Tensor | SampleRows:
        """``x`` as `train_classifier` takes it."""
        return self.x if isinstance(self.x, SampleRows) else torch.from_numpy(self.x)


@dataclass(frozen=True)
class EvaluationSet:
    """The test rows of a world: x float32 [n, ...], labels int64 [n] (y ~ p_T(y|x)),
    log_p float64 [n, K] (log p_T(y|x)), rows: indices into the sample file."""

    x: np.ndarray
    labels: np.ndarray
    log_p: np.ndarray
    rows: np.ndarray


#: A training set whose images take at most this many bytes is read into memory even when
#: streaming is asked for (``stream="auto"``): the embedded default's largest (2,000 digits, 1 MiB)
#: trains 1.15x faster from memory (docs/benchmarks.md), bit-identically; the paper's (45,000
#: ImageNet-64 rows, 2.2 GB) stream.
IN_MEMORY_MAX_BYTES = 256 * 2**20


def training_set(samples: str | os.PathLike, splits: str | os.PathLike, spec: Mapping, seed: int,
                 stream: bool | str = False) -> TrainingSet:
    """The training set of a training spec (`oracle.experiments._training.training_spec`) and seed.

    Optional spec keys (training-time shift, paper appendix F): ``class_prior`` (K floats:
    class counts ~ Multinomial(n, pi) from the seed's permutation of the pool, with replacement
    when a class runs short) and ``noise_std`` (sigma > 0: x' = clip(x + eps, -1, 1) on the
    selected rows). Targets stay those of the selected rows (DESIGN rule 8).

    stream: ``x`` is a `SampleRows` that reads the images batch by batch (memory flat in N;
    labels and log-likelihoods, [n] and [n, K], are still read whole); ``"auto"``: only when
    the images exceed `IN_MEMORY_MAX_BYTES` (either way the training is bit-identical). A set
    with noise (``noise_std`` > 0) is always read into memory: its noise is one draw over the
    whole [n, ...] array, which a batch reader could only reproduce by drawing it all.
    """
    from oracle.classifiers.shifted import shifted_rows
    from oracle.noisy_test_sets import add_clipped_noise, noise_seed

    splits_data = read_splits_h5(splits)
    prior = spec.get("class_prior")
    shift: dict = {}
    if prior is None:
        rows = training_indices(splits_data, seed, spec["n"])
    else:
        order = training_indices(splits_data, seed, len(splits_data["order"][int(seed)]))
        pool = read_rows(samples, order, fields=("label",))
        if len(prior) != int(pool["attrs"]["num_classes"]):
            raise DataError(f"class_prior has {len(prior)} entries but {samples} has "
                            f"{int(pool['attrs']['num_classes'])} classes")
        rows, shift = shifted_rows(order, pool["label"], spec["n"], prior, seed)
    sigma = float(spec.get("noise_std") or 0.0)
    if stream == "auto":
        stream = _image_bytes(samples, len(rows)) > IN_MEMORY_MAX_BYTES
    elif not isinstance(stream, bool):
        raise DataError(f"stream={stream!r}: expected True, False or 'auto'")
    streamed = stream and sigma == 0
    data = read_rows(samples, rows, fields=("source_class", "label", "loglik") + (() if streamed else ("x",)))
    if streamed:
        data["x"] = SampleRows(samples, rows)
    attrs = data["attrs"]
    if sigma > 0:
        rng = np.random.default_rng(noise_seed(seed, sigma, stream="train"))
        data["x"] = add_clipped_noise(data["x"], sigma, rng)
        shift = {**shift, "noise_std": sigma}
    log_p = posterior_rows(data["loglik"], attrs)
    targets = training_targets(spec["labels"], spec["hard_label"], data["label"], log_p,
                               source_class=data["source_class"], label_temperature=float(attrs["label_temperature"]))
    return TrainingSet(data["x"], targets, spec["labels"] == "soft", rows, int(attrs["num_classes"]), attrs, shift)


def validation_set(samples: str | os.PathLike, splits: str | os.PathLike, seed: int, size: int, labels: str,
                   hard_label: str | None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The validation rows the stopping rule watches (`oracle.classifiers.stopping`): images
    float32 [size, ...] and the targets a classifier of `labels`/`hard_label` trains on (as
    `training_set`) of the last `size` rows of seed `seed`'s pool order
    (`oracle.io.splits.validation_indices`), which no training set of the seed holds; None for
    size 0."""
    if int(size) == 0:
        return None
    rows = np.sort(validation_indices(read_splits_h5(splits), seed, int(size)))
    data = read_rows(samples, rows, fields=("x", "source_class", "label", "loglik"))
    attrs = data["attrs"]
    targets = training_targets(labels, hard_label, data["label"], posterior_rows(data["loglik"], attrs),
                               source_class=data["source_class"], label_temperature=float(attrs["label_temperature"]))
    return torch.from_numpy(data["x"]), torch.from_numpy(targets)


def _image_bytes(samples: str | os.PathLike, n: int) -> int:
    """Bytes of `n` images of the sample file as float32."""
    from oracle.io.shards import open_samples

    with open_samples(samples) as f:
        return int(n) * int(np.prod(f["x"].shape[1:])) * 4


def evaluation_set(samples: str | os.PathLike, splits: str | os.PathLike, limit: int | None = None) -> EvaluationSet:
    """The world's test set (its first `limit` rows when given).

    A derived test set (attribute ``derived_test_set``, e.g. a noisy test set) holds exactly
    the world's test rows in the order of `splits`: its file rows are read in order, and
    ``rows`` are still the world's row indices, so its predictions pair with the clean ones.
    """
    rows = read_splits_h5(splits)["test"]
    attrs = read_rows(samples, np.arange(0), fields=())["attrs"]
    file_rows = rows
    if attrs.get("derived_test_set"):
        if int(attrs.get("n_test_rows", -1)) != len(rows):
            raise DataError(f"{samples} holds {attrs.get('n_test_rows')} test rows but {splits} has {len(rows)}: "
                            "rerun the job that derived it")
        file_rows = np.arange(len(rows))
    if limit is not None:
        rows, file_rows = rows[: int(limit)], file_rows[: int(limit)]
    data = read_rows(samples, file_rows, fields=("x", "label", "loglik"))
    return EvaluationSet(data["x"], data["label"], posterior_rows(data["loglik"], data["attrs"]), rows)


def curve_monitor(ev: EvaluationSet, device: torch.device, batch_size: int = 256) -> Callable[[torch.nn.Module], dict]:
    """A `train_classifier` monitor: accuracy against the labels and the exact epistemic KL
    E[KL(p || q)] (nats) of the model on `ev`, as ``curve_acc`` and ``curve_epistemic``."""
    from oracle.classifiers.predict import predict_log_probs
    from oracle.decomposition import decompose

    x = torch.from_numpy(ev.x)
    labels = torch.from_numpy(ev.labels)
    log_p = torch.from_numpy(ev.log_p)

    def measure(model: torch.nn.Module) -> dict:
        log_q = predict_log_probs(model, x, batch_size=batch_size, device=device)
        acc = float((log_q.argmax(dim=1) == labels).double().mean())
        return {"curve_acc": acc, "curve_epistemic": float(decompose(log_p, log_q)["epistemic"]["mean"])}

    return measure
