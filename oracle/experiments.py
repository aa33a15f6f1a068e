"""The glue logic of the workflow's scripts, kept here so it is importable and tested.

Scripts in ``scripts/`` read their inputs and parameters from Snakemake and call these
functions; nothing here knows of Snakemake. Groups:

* running a job: :func:`script_job` (log redirection, threads, one-line errors),
  :func:`record_outputs` (provenance of every artifact);
* reading oracle samples: :func:`read_rows`, :func:`posterior_rows`;
* flows: :func:`checkpoint_num_classes`, :func:`check_checkpoint_classes`;
* classifiers: :func:`training_targets`, :func:`write_predictions`, :func:`read_predictions`;
* analysis: :func:`world_constants`, :func:`collect_metrics`, :func:`scaling_fits`,
  :func:`select_runs` (for ``oracle.reporting``'s tables and figures), :func:`build_numbers`,
  :func:`numbers_tex`.

Units: nats unless a name says bits; accuracies and errors as fractions in [0, 1] in data
frames and numbers.json (tables show percent).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oracle.errors import ConfigError, DataError, OracleError, WorldError

# --------------------------------------------------------------------------- running a job


@contextlib.contextmanager
def script_job(log_path: str | os.PathLike | None, threads: int | None = None) -> Iterator[float]:
    """Run the body of a workflow script: yields the start time (``time.time()``).

    * stdout and stderr (tqdm bars, warnings, tracebacks) go to ``log_path``;
    * torch, when the script imported it, uses ``threads`` intra-op threads (deterministic
      on CPU for a fixed count);
    * an :class:`OracleError` (bad input) ends the process with exit status 1 and its one-line
      message on the original stderr, where Snakemake shows it, as well as in the log; other
      exceptions keep their traceback (in the log) since they are bugs.
    """
    started = time.time()
    orig_out, orig_err = sys.stdout, sys.stderr
    fh = open(log_path, "w", buffering=1) if log_path else None  # noqa: SIM115
    try:
        if fh is not None:
            sys.stdout = sys.stderr = fh
        torch = sys.modules.get("torch")
        if threads and torch is not None:  # only scripts that use torch pay for importing it
            torch.set_num_threads(max(1, int(threads)))
        try:
            yield started
        except OracleError as exc:
            msg = f"{type(exc).__name__}: {exc}"
            print(msg, file=sys.stderr)
            if fh is not None:
                print(msg, file=orig_err)
            raise SystemExit(1) from None
    finally:
        sys.stdout, sys.stderr = orig_out, orig_err
        if fh is not None:
            fh.close()


def record_outputs(artifacts: Iterable[str | os.PathLike], *, rule: str, wildcards: Any = None,
                   config: Mapping | None = None, inputs: Any = (), seed: int | None = None,
                   started: float | None = None, extra: Mapping | None = None) -> list[Path]:
    """``oracle.provenance.write_record`` for each artifact of one job (same inputs and config)."""
    from oracle.provenance import write_record

    return [
        write_record(a, rule=rule, wildcards=dict(wildcards.items()) if hasattr(wildcards, "items") else wildcards,
                     config=config, inputs=inputs, seed=seed, started=started, extra=extra)
        for a in artifacts
    ]


def slurm_head_node() -> str:
    """The first host of this SLURM allocation (rendezvous of a multi-node torchrun)."""
    import subprocess

    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise ConfigError("resources.oracle.nodes > 1 needs a SLURM allocation (SLURM_JOB_NODELIST is unset); "
                          "run with --profile slurm")
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                           check=True).stdout.split()
    if not hosts:
        raise ConfigError(f"scontrol lists no hosts for SLURM_JOB_NODELIST={nodelist!r}")
    return hosts[0]


# --------------------------------------------------------------------------- oracle samples


def read_rows(samples_path: str | os.PathLike, indices: np.ndarray | None,
              fields: Sequence[str] = ("x", "source_class", "loglik")) -> dict[str, Any]:
    """Rows ``indices`` (in the given order) of a sample file (a shard or the merged all.h5).

    Returns ``{field: array}`` for each of ``fields`` plus ``"attrs"`` (prior, label_temperature,
    base_temperature, num_classes, event_shape, ...). ``indices=None`` reads every row.
    Reads in sorted order (HDF5 fancy indexing needs it) and restores the requested order.
    """
    from oracle.shards import _attrs_dict, open_samples

    with open_samples(samples_path) as f:
        attrs = _attrs_dict(f)
        n = f["index"].shape[0]
        out: dict[str, Any] = {"attrs": attrs}
        if indices is None:
            for name in fields:
                out[name] = f[name][()]
            return out
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= n)):
            raise DataError(f"{samples_path}: row indices outside [0, {n})")
        order = np.argsort(idx, kind="stable")
        sorted_idx = idx[order]
        uniq, inverse = np.unique(sorted_idx, return_inverse=True)
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        for name in fields:
            block = f[name][uniq] if uniq.size else f[name][:0]
            out[name] = block[inverse][back]
    return out


def posterior_rows(loglik: np.ndarray, attrs: Mapping) -> np.ndarray:
    """``log p(y|x)`` [n, K] float64 from stored ``log p(x|k)`` and the file's prior and label
    temperature (DESIGN rule 1: the world the samples were drawn from)."""
    from oracle.posterior import log_posterior

    prior = np.asarray(attrs["prior"], dtype=np.float64)
    return log_posterior(loglik, prior=prior, temperature=float(attrs["label_temperature"])).numpy()


# --------------------------------------------------------------------------- flows


def checkpoint_num_classes(path: str | os.PathLike, fmt: str) -> int:
    """The class count K of a flow checkpoint, without building the model.

    ``native``: the spec stored by ``oracle.flows.save_flow``. ``public_tarflow``: the first
    axis of ``blocks.0.class_embed`` ([K, 1, C]); 0 for an unconditional checkpoint.
    """
    import torch

    p = Path(path)
    if not p.is_file():
        raise DataError(f"flow checkpoint {p} does not exist (config key oracle.checkpoint)")
    try:
        blob = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"flow checkpoint {p} is unreadable: {type(exc).__name__}: {exc}") from None
    if fmt == "native":
        if not isinstance(blob, dict) or "spec" not in blob:
            raise DataError(f"flow checkpoint {p} is not an oracle flow file; set oracle.checkpoint_format: public_tarflow for a public TarFlow state dict")
        return int(blob["spec"].get("num_classes", 0))
    if fmt == "public_tarflow":
        sd = blob
        for key in ("model", "state_dict", "ema"):
            if isinstance(sd, dict) and isinstance(sd.get(key), dict):
                sd = sd[key]
                break
        if not isinstance(sd, dict):
            raise DataError(f"public TarFlow checkpoint {p} does not hold a state dict")
        for key, value in sd.items():
            if re.fullmatch(r"(module\.|_orig_mod\.)?blocks\.0\.class_embed", key):
                return int(value.shape[0])
        return 0
    raise ConfigError(f"config key 'oracle.checkpoint_format': {fmt!r} is not native or public_tarflow")


def check_checkpoint_classes(path: str | os.PathLike, fmt: str, data_path: str | os.PathLike,
                             data_classes: Sequence[str]) -> None:
    """Raise WorldError when the checkpoint's class count differs from the data's."""
    k = checkpoint_num_classes(path, fmt)
    if k != len(data_classes):
        shown = ", ".join(list(data_classes)[:5]) + (", ..." if len(data_classes) > 5 else "")
        raise WorldError(
            f"flow checkpoint {path} has {k} classes but the data {data_path} have {len(data_classes)} "
            f"({shown}); use a checkpoint trained on these classes or data.classes to select them"
        )


# --------------------------------------------------------------------------- classifiers


def training_targets(labels: str, hard_label: str, source_class: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """Training targets of a classifier experiment.

    labels="hard": int64 [n], ``source_class`` (hard_label="source") or ``argmax_k p(k|x)``
    (hard_label="posterior_argmax"); labels="soft": float32 [n, K], the exact posterior.
    """
    if labels == "soft":
        p = np.exp(log_p)
        return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    if labels != "hard":
        raise ConfigError(f"classifiers.experiments: labels={labels!r}; expected hard or soft")
    if hard_label == "source":
        return np.asarray(source_class, dtype=np.int64)
    if hard_label == "posterior_argmax":
        return np.asarray(log_p, dtype=np.float64).argmax(axis=1).astype(np.int64)
    raise ConfigError(f"classifiers.experiments: hard_label={hard_label!r}; expected source or posterior_argmax")


def write_predictions(path: str | os.PathLike, log_q: np.ndarray, index: np.ndarray,
                      source_class: np.ndarray, attrs: Mapping | None = None) -> None:
    """``predictions.h5``: ``log_q`` float64 [n, K] (natural log), ``index`` int64 [n] (rows of
    samples/all.h5, the test set), ``source_class`` int64 [n]; attributes as JSON text."""
    import h5py

    from oracle.provenance import atomic_output

    log_q = np.asarray(log_q, dtype=np.float64)
    index = np.asarray(index, dtype=np.int64)
    if log_q.ndim != 2 or log_q.shape[0] != index.shape[0]:
        raise DataError(f"{path}: log_q {log_q.shape} and index {index.shape} disagree")
    with atomic_output(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("log_q", data=log_q)
            f.create_dataset("index", data=index)
            f.create_dataset("source_class", data=np.asarray(source_class, dtype=np.int64))
            for key, value in (attrs or {}).items():
                f.attrs[key] = json.dumps(value, sort_keys=True, default=str)
            f.attrs["complete"] = True


def read_predictions(path: str | os.PathLike) -> dict[str, Any]:
    """Inverse of :func:`write_predictions`."""
    import h5py

    p = Path(path)
    if not p.is_file():
        raise DataError(f"predictions file {p} does not exist")
    with h5py.File(p, "r") as f:
        if not f.attrs.get("complete", False):
            raise DataError(f"{p} is incomplete: rerun its classifier job")
        out = {name: f[name][()] for name in ("log_q", "index", "source_class")}
        out["attrs"] = {k: json.loads(v) for k, v in f.attrs.items() if k != "complete"}
    return out


# --------------------------------------------------------------------------- analysis


def world_constants(log_p: np.ndarray, prior: np.ndarray) -> dict[str, Any]:
    """The oracle world's exact constants, Monte Carlo over the rows of ``log_p`` [n, K]:

    ``aleatoric`` E[H(p(y|x))] (nats), ``bayes_accuracy`` E[max p], ``bayes_error``
    E[1 - max p], ``mutual_information_bits`` H(Y) - E[H(Y|x)] with ``normalized`` I/H(Y):
    each ``{"mean", "se"}`` (MI: ``{"bits", "se", "normalized", "h_y_bits"}``), plus ``n``, ``K``.
    """
    from oracle.decomposition import bayes_accuracy, bayes_error, entropy, mean_se, mutual_information_bits

    return {
        "n": int(log_p.shape[0]),
        "num_classes": int(log_p.shape[1]),
        "aleatoric": mean_se(entropy(log_p)),
        "bayes_accuracy": bayes_accuracy(log_p),
        "bayes_error": bayes_error(log_p),
        "mutual_information": mutual_information_bits(log_p, prior),
    }


ID_COLUMNS = ("experiment", "arch", "N", "seed", "labels", "hard_label")


def collect_metrics(paths: Iterable[str | os.PathLike]) -> "pd.DataFrame":  # noqa: F821
    """One row per classifier ``metrics.json``: the job's identity (``ID_COLUMNS``), its path
    (``source``) and ``oracle.classifiers.metrics_row`` of its ``metrics`` (``x`` and ``x_se``)."""
    import pandas as pd

    from oracle.classifiers import metrics_row

    rows = []
    for p in paths:
        try:
            blob = json.loads(Path(p).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read classifier metrics {p}: {exc}") from None
        missing = [k for k in (*ID_COLUMNS, "metrics") if k not in blob]
        if missing:
            raise DataError(f"{p}: lacks key(s) {missing}; rerun its classifier job")
        row = {k: blob[k] for k in ID_COLUMNS}
        row.update(metrics_row(blob["metrics"]))
        row["epochs"] = blob.get("epochs")
        row["train_seconds"] = blob.get("train_seconds")
        row["source"] = Path(p).as_posix()
        rows.append(row)
    if not rows:
        raise DataError("collect_metrics: no metrics files")
    df = pd.DataFrame(rows)
    return df.sort_values(["experiment", "arch", "N", "seed"], kind="stable").reset_index(drop=True)


def scaling_fits(df: "pd.DataFrame", value: str = "epistemic") -> "pd.DataFrame":  # noqa: F821
    """Power laws ``value ~ c N^-alpha`` per architecture (oracle.scaling), one long table:

    ``kind="seed"``: one fit per (arch, seed); ``kind="arch"``: alpha = mean ± std over those
    (the paper's "alpha ± std over seeds"); ``kind="curve"``: one fit to the seed-mean curve
    (the dashed lines of Figures 2b and 5). A curve with fewer than two N, or a non-positive
    value, has NaN fields and a ``note``.
    """
    import pandas as pd

    from oracle.scaling import fit_each_seed, fit_per_seed, fit_seed_mean

    out = []
    for arch, sub in df.groupby("arch", sort=True):
        ok = sub["N"].nunique() >= 2 and bool((sub[value] > 0).all())
        if not ok:
            note = "fewer than two N" if sub["N"].nunique() < 2 else f"{value} <= 0 at some N"
            out.append({"kind": "arch", "arch": arch, "note": note})
            continue
        for _, r in fit_each_seed(sub, value_col=value).iterrows():
            out.append({"kind": "seed", **r.to_dict()})
        for _, r in fit_per_seed(sub, value_col=value).iterrows():
            out.append({"kind": "arch", **r.to_dict()})
        for _, r in fit_seed_mean(sub, value_col=value).iterrows():
            out.append({"kind": "curve", **r.to_dict()})
    fits = pd.DataFrame(out)
    fits.insert(1, "value", value)
    if "note" not in fits:
        fits["note"] = ""
    fits["note"] = fits["note"].fillna("")
    return fits


def _labels(archs: Sequence[Mapping]) -> dict[str, str]:
    return {a["name"]: a.get("label", a["name"]) for a in archs}


def select_runs(df: "pd.DataFrame", archs: Sequence[Mapping], sizes: Sequence[int] | None = None) -> "pd.DataFrame":  # noqa: F821
    """The rows of ``df`` for the given architectures (``{"name", "label", ...}``, in config
    order) and sizes (None = all), with ``arch`` replaced by the display label, ready for
    ``oracle.reporting``'s tables and figures. Raises DataError when nothing is left and
    ConfigError when two architectures share a label (their runs would be pooled)."""
    names = _labels(archs)
    labels = list(names.values())
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise ConfigError(f"classifiers.archs: label {dup[0]!r} is used by more than one architecture")
    sub = df[df["arch"].isin(list(names))]
    if sizes:
        sub = sub[sub["N"].isin([int(n) for n in sizes])]
    if sub.empty:
        raise DataError(f"no classifier results for archs {list(names)} and N in {sizes or 'any'}")
    sub = sub.copy()
    sub["arch"] = sub["arch"].map(names)
    return sub.reset_index(drop=True)


def _entry(value: Any, unit: str, artifact: str, description: str, **spread: Any) -> dict:
    out = {"value": value, "unit": unit, "artifact": artifact, "description": description}
    for k, v in spread.items():
        out[k] = None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
    return out


def build_numbers(world: Mapping, world_path: str, df: "pd.DataFrame", metrics_path: str,  # noqa: F821
                  fits: "pd.DataFrame", fits_path: str, archs: Sequence[Mapping],  # noqa: F821
                  size: int | None = None) -> dict[str, dict]:
    """The paper's in-text numbers, each ``{"value", "unit", "se"|"std"|..., "artifact",
    "description"}``; ``artifact`` is the path of the file the value was read from.

    World constants come from all oracle samples (``world["all"]``); classifier numbers from
    the main experiment at N = ``size`` (default the largest N) and the power-law fits.
    """
    w = world["all"]
    n_all = w["n"]
    out: dict[str, dict] = {
        "aleatoric_floor": _entry(w["aleatoric"]["mean"], "nats", world_path,
                                  f"E_x[H(p(y|x))] over {n_all} oracle samples", se=w["aleatoric"]["se"]),
        "bayes_error": _entry(w["bayes_error"]["mean"], "fraction", world_path,
                              f"E_x[1 - max_y p(y|x)] over {n_all} oracle samples", se=w["bayes_error"]["se"]),
        "bayes_accuracy": _entry(w["bayes_accuracy"]["mean"], "fraction", world_path,
                                 f"E_x[max_y p(y|x)] over {n_all} oracle samples", se=w["bayes_accuracy"]["se"]),
        "mutual_information": _entry(w["mutual_information"]["bits"], "bits", world_path,
                                     "I(X;Y) = H(Y) - E_x[H(p(y|x))]", se=w["mutual_information"]["se"]),
        "normalized_mutual_information": _entry(w["mutual_information"]["normalized"], "fraction", world_path,
                                                "I(X;Y) / H(Y)", se=w["mutual_information"]["se"] / w["mutual_information"]["h_y_bits"]),
        "num_classes": _entry(w["num_classes"], "classes", world_path, "K, classes of the oracle world"),
        "n_samples": _entry(n_all, "samples", world_path, "oracle samples drawn"),
        "test_size": _entry(world["test"]["n"], "samples", world_path, "fixed oracle test set"),
    }
    names = _labels(archs)
    n_max = int(size if size is not None else df["N"].max())
    per_arch = fits[fits["kind"] == "arch"].set_index("arch") if len(fits) else None
    for arch in [a["name"] for a in archs]:
        sub = df[df["arch"] == arch]
        if sub.empty:
            continue
        if per_arch is not None and arch in per_arch.index and "alpha" in per_arch.columns and np.isfinite(per_arch.loc[arch, "alpha"]):
            r = per_arch.loc[arch]
            out[f"alpha.{arch}"] = _entry(float(r["alpha"]), "1", fits_path,
                                          f"{names[arch]}: epistemic KL ∝ N^-alpha, mean over {int(r['n_seeds'])} seeds",
                                          std=float(r["alpha_std"]), se=float(r["alpha_se"]))
        top = sub[sub["N"] == n_max]
        if len(top):
            out[f"accuracy.{arch}"] = _entry(float(top["acc_source"].mean()), "fraction", metrics_path,
                                             f"{names[arch]}: test accuracy at N={n_max}, mean over {len(top)} seeds",
                                             std=float(top["acc_source"].std()) if len(top) > 1 else None)
            out[f"epistemic.{arch}"] = _entry(float(top["epistemic"].mean()), "nats", metrics_path,
                                              f"{names[arch]}: epistemic KL at N={n_max}, mean over {len(top)} seeds",
                                              std=float(top["epistemic"].std()) if len(top) > 1 else None)
            out[f"ece.{arch}"] = _entry(float(top["ece"].mean()), "fraction", metrics_path,
                                        f"{names[arch]}: ECE against source labels at N={n_max}, mean over seeds",
                                        std=float(top["ece"].std()) if len(top) > 1 else None)
        lo, hi = sub["N"].min(), sub["N"].max()
        e_lo, e_hi = sub[sub["N"] == lo]["epistemic"].mean(), sub[sub["N"] == hi]["epistemic"].mean()
        if lo != hi and e_hi > 0:
            out[f"epistemic_reduction.{arch}"] = _entry(float(e_lo / e_hi), "ratio", metrics_path,
                                                        f"{names[arch]}: epistemic KL at N={lo} over N={hi} (seed means)")
    return out


def _tex_name(key: str) -> str:
    words = re.split(r"[^A-Za-z0-9]+", key)
    digits = {"0": "zero", "1": "one", "2": "two", "3": "three", "4": "four", "5": "five",
              "6": "six", "7": "seven", "8": "eight", "9": "nine"}
    out = ""
    for w in words:
        w = "".join(digits.get(ch, ch) for ch in w)
        out += w[:1].upper() + w[1:]
    return "num" + out


def numbers_tex(numbers: Mapping[str, Mapping]) -> str:
    r"""LaTeX macros ``\newcommand{\numAleatoricFloor}{0.0123}`` (4 significant digits), one
    per number, so a manuscript cites numbers.json without copying them by hand."""
    lines = ["% generated from numbers.json by the workflow; do not edit"]
    for key in sorted(numbers):
        v = numbers[key]["value"]
        text = f"{v:.4g}" if isinstance(v, float) else str(v)
        lines.append(f"\\newcommand{{\\{_tex_name(key)}}}{{{text}}}")
    return "\n".join(lines) + "\n"
