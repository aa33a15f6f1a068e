"""The glue logic of the workflow's scripts, kept here so it is importable and tested.

Scripts in ``scripts/`` read their inputs and parameters from Snakemake and call these
functions; nothing here knows of Snakemake. Groups:

* running a job: :func:`script_job` (log redirection, threads, one-line errors),
  :func:`record_job` (provenance of every artifact), the config keys rules declare
  (:func:`classifier_config_keys`, :func:`analysis_config_keys`, ...), :func:`raw_data_inputs`;
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


# --------------------------------------------------------------------------- provenance records
#
# One helper writes every record of a workflow job: `record_job`, fed by the `snakemake` object
# of the rule's script. What an artifact depends on in the config is declared once, by its rule
# (``params: config_keys=[...]``, see `oracle.workflow.provenance.parse_config_key` for the syntax),
# not by each script.

_SCRIPT_COPY = re.compile(r"^tmp[A-Za-z0-9_]+\.(.+\.py)$")  # Snakemake's copy: tmpXXXXXXXX.<name>.py


def job_config_keys(job: Any) -> list[str] | None:
    """The config keys the job's rule declares (``params: config_keys=[...]``), or None."""
    params = getattr(job, "params", None)
    keys = getattr(params, "config_keys", None) if params is not None else None
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(k, str) for k in keys):
        raise ConfigError(f"rule {getattr(job, 'rule', '?')!r}: params.config_keys must be a list of "
                          f"config keys, got {keys!r}")
    return list(keys)


def job_script(job: Any, argv0: str | None = None) -> Path | None:
    """The source file of the running Snakemake script (not its temporary copy), or None."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    m = _SCRIPT_COPY.match(name)
    scriptdir = getattr(job, "scriptdir", None)
    if m is None or not scriptdir:
        return None
    src = Path(scriptdir) / m.group(1)
    return src if src.is_file() else None


def _job_seed(job: Any) -> int | None:
    wc = getattr(job, "wildcards", None)
    for source in (wc, getattr(job, "params", None)):
        value = getattr(source, "seed", None) if source is not None else None
        if isinstance(value, (int, str)) and str(value).isdigit():
            return int(value)
    return None


def record_job(job: Any, started: float | None, *, outputs: Iterable[str | os.PathLike] | None = None,
               inputs: Any = None, extra_inputs: Iterable[str | os.PathLike] = (),
               config_keys: Sequence[str] | None = None, seed: int | None = None,
               extra: Mapping | None = None, device: str | None = None) -> list[Path]:
    """Write the provenance record of every output of one workflow job; returns the sidecars.

    job:          the ``snakemake`` object of a rule's script (rule, wildcards, input, output,
                  params, config); only attributes are read.
    started:      ``time.time()`` at the job's start (``script_job`` yields it).
    outputs:      the artifacts (default every ``job.output``).
    inputs:       the inputs to hash (default ``job.input``); `extra_inputs` are added (raw
                  data, a checkpoint outside the DAG).
    config_keys:  the config keys the artifacts depend on (default the rule's
                  ``params.config_keys``; ConfigError when neither names any).
    seed:         default the ``seed`` wildcard, else ``params.seed``.
    The record's ``code.files`` also covers the rule's script file.
    """
    from oracle.workflow.provenance import write_record

    keys = list(config_keys) if config_keys is not None else job_config_keys(job)
    if keys is None:
        raise ConfigError(f"rule {job.rule!r} declares no params.config_keys: list the config keys its "
                          "artifacts depend on (an empty list when none)")
    wildcards = dict(job.wildcards.items()) if hasattr(job.wildcards, "items") else dict(job.wildcards or {})
    script = job_script(job)
    ins = [job.input if inputs is None else inputs, list(extra_inputs)]
    finished = time.time()
    return [
        write_record(a, rule=job.rule, wildcards=wildcards, config=job.config, config_keys=keys,
                     inputs=ins, seed=_job_seed(job) if seed is None else seed, started=started,
                     finished=finished, extra=extra, device=device, code_extra=[script] if script else ())
        for a in (job.output if outputs is None else outputs)
    ]


# Config keys of the workflow's artifacts (used by the rule files' ``params: config_keys``).
def experiment_key(name: str) -> str:
    """The config key of classifier experiment `name`: ``classifiers.experiments[name=<name>]``."""
    return f"classifiers.experiments[name={name}]"


def arch_key(name: str) -> str:
    """The config key of architecture `name`: ``classifiers.archs[<name>]`` (names may hold dots)."""
    return f"classifiers.archs[{name}]"


def _experiment_entry(config: Mapping, name: str) -> Mapping:
    for e in config["classifiers"]["experiments"]:
        if e.get("name") == name:
            return e
    raise ConfigError(f"classifiers.experiments: no experiment named {name!r}")


def classifier_config_keys(config: Mapping, experiment: str, arch: str) -> list[str]:
    """What one classifier depends on: its experiment's labels, its architecture (but not its
    display label) and the training hyperparameters. Keys absent from the config are left
    out (an architecture without ``model`` uses its name)."""
    entry = _experiment_entry(config, experiment)
    ek, ak = experiment_key(experiment), arch_key(arch)
    keys = [f"{ek}.{k}" for k in ("labels", "hard_label") if k in entry]
    keys += [f"{ak}.{k}" for k in config["classifiers"]["archs"].get(arch) or {} if k != "label"]
    keys += [f"classifiers.{k}" for k in ("epochs", "min_steps", "batch_size", "lr", "weight_decay")
             if k in config["classifiers"]]
    return keys


def experiment_config_keys(config: Mapping, experiment: str) -> list[str]:
    """What decides the set of classifiers of an experiment: its entry and the defaults it
    takes from ``classifiers.archs`` / ``splits.sizes`` / ``splits.seeds`` when it lacks them."""
    entry = _experiment_entry(config, experiment)
    keys = [experiment_key(experiment)]
    if "archs" not in entry:
        keys.append("classifiers.archs")
    keys += [f"splits.{k}" for k in ("sizes", "seeds") if k not in entry]
    return keys


def analysis_config_keys(config: Mapping, experiment: str, extra: Iterable[str] = ()) -> list[str]:
    """What a table or figure of experiment `experiment` depends on: ``analysis.experiment``,
    the experiment (and its defaults), every architecture it shows (labels, order) and `extra`."""
    entry = _experiment_entry(config, experiment)
    keys = ["analysis.experiment", *experiment_config_keys(config, experiment)]
    if "classifiers.archs" not in keys:
        keys += [arch_key(a) for a in entry["archs"]]
    return list(dict.fromkeys([*keys, *extra]))


def raw_data_inputs(spec: Mapping) -> tuple[list[Path], dict[str, Any]]:
    """The raw files a ``data`` spec reads, to hash as the data artifacts' inputs, and their identity.

    Returns (paths, identity). Paths are the smallest set that holds the data the loader
    reads (the split folders of an image folder, the batch folder of CIFAR, ...), so that
    unrelated files under a shared root neither cost hashing time nor count as a change;
    paths that do not exist are skipped. ``digits`` is scikit-learn's bundled
    ``digits.csv.gz``; its identity names the scikit-learn version.
    """
    kind = spec.get("kind")
    identity: dict[str, Any] = {"kind": kind, "root": None if spec.get("root") is None else str(spec["root"])}
    if kind == "digits":
        import importlib.metadata
        import importlib.resources

        identity["source"] = "sklearn.datasets.load_digits"
        identity["scikit-learn"] = importlib.metadata.version("scikit-learn")
        bundled = Path(str(importlib.resources.files("sklearn.datasets") / "data" / "digits.csv.gz"))
        return ([bundled] if bundled.is_file() else []), identity
    if spec.get("root") is None:
        return [], identity
    root = Path(spec["root"])
    cands: list[Path]
    if kind == "image_folder":
        dirs = spec.get("split_dirs") or {}
        cands = [root / dirs["train"]] if "train" in dirs else [root / "train"]
        if "test" in dirs:
            cands.append(root / dirs["test"])
        else:
            cands.append(root / "test" if (root / "test").is_dir() else root / "val")
    elif kind in ("cifar10", "cifar100"):
        sub = root / ("cifar-10-batches-py" if kind == "cifar10" else "cifar-100-python")
        cands = [sub if sub.is_dir() else root]
    elif kind in ("mnist", "fashion_mnist"):
        sub = "MNIST" if kind == "mnist" else "FashionMNIST"
        cands = [next((c for c in (root / sub / "raw", root / "raw") if c.is_dir()), root)]
    elif kind == "svhn":
        cands = [root / "train_32x32.mat", root / "test_32x32.mat"]
    elif kind == "npz":
        cands = [root] if root.is_file() else [root / "train.npz", root / "test.npz"]
    elif kind == "imagenet_downsampled":
        cands = sorted(root.glob("train_data_batch_*.npz")) + [root / "val_data.npz"]
    else:
        cands = [root]
    return [p for p in dict.fromkeys(cands) if p.exists()], identity


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
    from oracle.io.shards import _attrs_dict, open_samples

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

    from oracle.io.atomic import atomic_output

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


#: |closed form - Monte Carlo| <= AGREE_SE * SE counts as agreement.
AGREE_SE = 3.0


def closed_form_comparison(world: Any, monte_carlo: Mapping[str, Any]) -> dict[str, Any] | None:
    """The world's closed-form Bayes error beside its Monte Carlo estimate.

    `monte_carlo` is a `world_constants` result (its ``bayes_error`` {mean, se} and ``n``).
    Returns {"value", "method", "monte_carlo": {mean, se, n}, "z", "agrees_within_3se"}, or
    None when the world has no closed form (`world.bayes_error()` raises WorldError, e.g. K != 2).
    """
    try:
        value = float(world.bayes_error())
    except WorldError as exc:
        print(f"no closed-form Bayes error: {exc}")
        return None
    mean, se = float(monte_carlo["bayes_error"]["mean"]), float(monte_carlo["bayes_error"]["se"])
    diff = mean - value
    return {
        "value": value,
        # T = 1: Phi-formula; T != 1: 1-D quadrature of E[1 - max p(y|x)] (GaussianWorld.bayes_error)
        "method": "closed_form" if world.label_temperature == 1.0 else "quadrature",
        "monte_carlo": {"mean": mean, "se": se, "n": int(monte_carlo["n"])},
        "z": diff / se if se > 0 else (0.0 if diff == 0 else float("inf")),
        "agrees_within_3se": bool(abs(diff) <= AGREE_SE * se),
    }


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
    """Power laws ``value ~ c N^-alpha`` per architecture (oracle.measures.power_laws), one long table:

    ``kind="seed"``: one fit per (arch, seed); ``kind="arch"``: alpha = mean ± std over those
    (the paper's "alpha ± std over seeds"); ``kind="curve"``: one fit to the seed-mean curve
    (the dashed lines of Figures 2b and 5). A curve with fewer than two N, or a non-positive
    value, has NaN fields and a ``note``.
    """
    import pandas as pd

    from oracle.measures.power_laws import fit_each_seed, fit_per_seed, fit_seed_mean

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


def _finite(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    if isinstance(v, (int, np.integer)):
        return int(v)
    return v


def _entry(value: Any, unit: str, artifact: str, description: str, **spread: Any) -> dict:
    """One number: value, unit, the artifact it was read from, what it is, and its spread
    (``se``: standard error of the value, ``se_over``: what it is over; ``std``; ``n_seeds``;
    ``ci95``: [lo, hi]). Non-finite spreads become None."""
    out = {"value": _finite(value), "unit": unit, "artifact": str(artifact), "description": description}
    for k, v in spread.items():
        out[k] = [_finite(x) for x in v] if isinstance(v, (list, tuple)) else _finite(v)
    return out


def _over_seeds(rows: "pd.DataFrame", col: str) -> dict[str, Any]:  # noqa: F821
    """Mean of `col` over seeds with its spread: std and se over seeds (>= 2 seeds), else the
    one run's Monte Carlo se over the test set (column ``<col>_se``)."""
    vals = rows[col].to_numpy(float)
    n = len(vals)
    if n >= 2:
        std = float(np.std(vals, ddof=1))
        return {"value": float(vals.mean()), "std": std, "se": std / math.sqrt(n), "se_over": "seeds", "n_seeds": n}
    se = float(rows[f"{col}_se"].iloc[0]) if f"{col}_se" in rows else None
    return {"value": float(vals[0]), "std": None, "se": se, "se_over": "test set" if se is not None else None,
            "n_seeds": n}


def build_numbers(world: Mapping, world_path: str, df: "pd.DataFrame", metrics_path: str,  # noqa: F821
                  fits: "pd.DataFrame", fits_path: str, archs: Sequence[Mapping],  # noqa: F821
                  size: int | None = None, *, table1: "pd.DataFrame | None" = None,  # noqa: F821
                  table1_path: str | None = None, validation: Mapping | None = None,
                  validation_path: str | None = None) -> dict[str, dict]:
    """The paper's in-text numbers, each ``{"value", "unit", "artifact", "description"}`` plus
    its spread (see `_entry`); ``artifact`` is the path of the file the value was read from.

    * world constants from all oracle samples (``world["all"]``, world.json): aleatoric floor
      (nats), Bayes error / accuracy (fractions), I(X;Y) (bits) and I(X;Y)/H(Y), each ± se;
      and the closed-form Bayes error of an analytic world when world.json has one;
    * per architecture of the main experiment (metrics.csv, fits.csv): alpha of
      KL ~ N^-alpha (mean ± std over seeds), accuracy / ECE at N = `size` (default the
      largest N), accuracy and epistemic KL at the smallest and largest N, the reduction
      factor KL(N_min) / KL(N_max);
    * from Table 1 (`table1`, table1.csv): the gap to the Bayes accuracy per architecture and
      its range over architectures, in percentage points, and the test-set Bayes accuracy;
    * from the validation metrics (`validation`, validation/metrics.json), when given: the
      Frechet distance under its correct name (``fid`` only in Inception features, else
      ``fd_<space>``), the IS (mean ± std over splits), coverage, memorization, per-class
      variance and texture ratio ranges, posterior stability KL, test BPD.
    """
    w = world["all"]
    n_all = w["n"]
    mi = w["mutual_information"]
    out: dict[str, dict] = {
        "aleatoric_floor": _entry(w["aleatoric"]["mean"], "nats", world_path,
                                  f"E_x[H(p(y|x))] over {n_all} oracle samples", se=w["aleatoric"]["se"],
                                  se_over="samples"),
        "bayes_error": _entry(w["bayes_error"]["mean"], "fraction", world_path,
                              f"E_x[1 - max_y p(y|x)] over {n_all} oracle samples", se=w["bayes_error"]["se"],
                              se_over="samples"),
        "bayes_accuracy": _entry(w["bayes_accuracy"]["mean"], "fraction", world_path,
                                 f"E_x[max_y p(y|x)] over {n_all} oracle samples", se=w["bayes_accuracy"]["se"],
                                 se_over="samples"),
        "mutual_information": _entry(mi["bits"], "bits", world_path, "I(X;Y) = H(Y) - E_x[H(p(y|x))]",
                                     se=mi["se"], se_over="samples"),
        "normalized_mutual_information": _entry(mi["normalized"], "fraction", world_path, "I(X;Y) / H(Y)",
                                                se=mi["se"] / mi["h_y_bits"], se_over="samples"),
        "num_classes": _entry(w["num_classes"], "classes", world_path, "K, classes of the oracle world"),
        "n_samples": _entry(n_all, "samples", world_path, "oracle samples drawn"),
        "test_size": _entry(world["test"]["n"], "samples", world_path, "fixed oracle test set"),
    }
    closed = world.get("bayes_error_closed_form")
    if isinstance(closed, Mapping) and closed.get("value") is not None:
        out["bayes_error_closed_form"] = _entry(
            closed["value"], "fraction", world_path,
            f"Bayes error of the analytic world by {closed.get('method', 'closed form')} (exact, no sampling); "
            f"the Monte Carlo estimate is bayes_error")
    names = _labels(archs)
    n_sel = int(size if size is not None else df["N"].max())
    if len(df):
        out["n_min"] = _entry(int(df["N"].min()), "samples", metrics_path, "smallest training-set size N")
        out["n_max"] = _entry(int(df["N"].max()), "samples", metrics_path, "largest training-set size N")
    per_arch = fits[fits["kind"] == "arch"].set_index("arch") if len(fits) and "kind" in fits else None
    for arch in [a["name"] for a in archs]:
        sub = df[df["arch"] == arch]
        if sub.empty:
            continue
        label = names[arch]
        if per_arch is not None and arch in per_arch.index and "alpha" in per_arch.columns \
                and np.isfinite(per_arch.loc[arch, "alpha"]):
            r = per_arch.loc[arch]
            n_seeds = int(r["n_seeds"]) if np.isfinite(r.get("n_seeds", np.nan)) else None
            out[f"alpha.{arch}"] = _entry(float(r["alpha"]), "1", fits_path,
                                          f"{label}: exponent of epistemic KL ~ N^-alpha, mean ± std over "
                                          f"{n_seeds} seeds", std=r.get("alpha_std"), se=r.get("alpha_se"),
                                          se_over="seeds", n_seeds=n_seeds)
        at = sub[sub["N"] == n_sel]
        if len(at):
            out[f"accuracy.{arch}"] = _entry(unit="fraction", artifact=metrics_path, description=(
                f"{label}: test accuracy (source labels) at N={n_sel}, mean over seeds"), **_over_seeds(at, "acc_source"))
            out[f"ece.{arch}"] = _entry(unit="fraction", artifact=metrics_path, description=(
                f"{label}: ECE against source labels at N={n_sel}, mean over seeds"), **_over_seeds(at, "ece"))
        lo, hi = int(sub["N"].min()), int(sub["N"].max())
        for tag, n in (("min_n", lo), ("max_n", hi)):
            rows = sub[sub["N"] == n]
            out[f"epistemic_{tag}.{arch}"] = _entry(unit="nats", artifact=metrics_path, description=(
                f"{label}: epistemic KL E[KL(p || q)] at N={n}, mean over seeds"), **_over_seeds(rows, "epistemic"))
            out[f"accuracy_{tag}.{arch}"] = _entry(unit="fraction", artifact=metrics_path, description=(
                f"{label}: test accuracy at N={n}, mean over seeds"), **_over_seeds(rows, "acc_source"))
        e_lo, e_hi = sub[sub["N"] == lo]["epistemic"].mean(), sub[sub["N"] == hi]["epistemic"].mean()
        if lo != hi and e_hi > 0:
            out[f"epistemic_reduction.{arch}"] = _entry(float(e_lo / e_hi), "ratio", metrics_path,
                                                        f"{label}: epistemic KL at N={lo} over N={hi} (seed means)")
    if table1 is not None:
        out.update(_table1_numbers(table1, str(table1_path), archs))
    if validation is not None:
        out.update(validation_numbers(validation, str(validation_path)))
    return out


def _table1_numbers(table1: "pd.DataFrame", path: str, archs: Sequence[Mapping]) -> dict[str, dict]:  # noqa: F821
    """Gap to the Bayes accuracy per architecture (percentage points), its range, the Bayes accuracy."""
    by_label = {v: k for k, v in _labels(archs).items()}
    missing = {"Architecture", "Gap (%)", "Bayes (%)", "N"} - set(table1.columns)
    if missing:
        raise DataError(f"{path}: Table 1 lacks column(s) {sorted(missing)}")
    out: dict[str, dict] = {}
    for _, row in table1.iterrows():
        name = by_label.get(row["Architecture"], row["Architecture"])
        out[f"table1_gap.{name}"] = _entry(float(row["Gap (%)"]), "percentage points", path,
                                           f"{row['Architecture']}: Bayes accuracy minus test accuracy at "
                                           f"N={int(row['N'])} (Table 1)")
    if len(table1):
        gaps = table1["Gap (%)"].astype(float)
        out["table1_gap_min"] = _entry(float(gaps.min()), "percentage points", path,
                                       "smallest gap to the Bayes accuracy over architectures (Table 1)")
        out["table1_gap_max"] = _entry(float(gaps.max()), "percentage points", path,
                                       "largest gap to the Bayes accuracy over architectures (Table 1)")
        out["table1_bayes_accuracy"] = _entry(float(table1["Bayes (%)"].astype(float).mean()), "percent", path,
                                              "Bayes-optimal accuracy E[max_y p(y|x)] on the oracle test set (Table 1)")
    return out


def validation_numbers(metrics: Mapping, path: str) -> dict[str, dict]:
    """The in-text validation numbers of validation/metrics.json (``oracle.validation.run.run_validation``).

    The Frechet distance is named by its feature space: ``validation.fid`` only for Inception
    features (with weights), ``validation.fd_<kind>`` otherwise; likewise ``validation.is`` vs
    ``validation.is_<kind>`` (an IS-like score of a domain classifier).
    """
    out: dict[str, dict] = {}
    for kind, block in metrics.get("feature_spaces", {}).items():
        inception = block.get("feature_kind", kind) == "inception"
        fd_key = "validation.fid" if inception else f"validation.fd_{kind}"
        out[fd_key] = _entry(block["frechet_samples_train"], "squared feature distance", path,
                             f"{block['frechet_name']}: oracle samples vs real train images, {block['feature_space']}")
        is_ = block.get("inception_score_samples") or {}
        if "mean" in is_:
            out["validation.is" if inception else f"validation.is_{kind}"] = _entry(
                is_["mean"], "1", path, f"{block['is_name']} of oracle samples, mean ± std over splits",
                std=is_.get("std"))
    prim = metrics.get("feature_spaces", {}).get(metrics.get("primary_space"), {})
    space = prim.get("feature_space", "?")
    cov = metrics.get("coverage") or {}
    if "paper_rule" in cov:
        out["validation.coverage"] = _entry(cov["paper_rule"]["coverage"], "fraction", path,
                                            f"manifold coverage, paper rule (adaptive 90% quantile threshold), {space}")
    if "naeem" in cov:
        out["validation.coverage_naeem"] = _entry(cov["naeem"]["coverage"], "fraction", path,
                                                  f"coverage of Naeem et al. (k=5), {space}")
    mem = metrics.get("memorization") or {}
    if "rate" in mem:
        out["validation.memorization_rate"] = _entry(mem["rate"], "fraction", path,
                                                     f"oracle samples with a train neighbour within "
                                                     f"{mem['threshold']:.4g} ({mem['threshold_source']}), {space}")
        out["validation.memorization_threshold"] = _entry(mem["threshold"], "feature distance", path,
                                                          f"memorization threshold ({mem['threshold_source']})")
        out["validation.nn_median"] = _entry(mem["median_nn"], "feature distance", path,
                                             f"median oracle-sample to train nearest-neighbour distance, {space}")
    for key, field, what in (("variance_ratio", "variance_ratio", "feature variance ratio (oracle / real)"),
                             ("distance_ratio", "pairwise_distance_ratio", "pairwise distance ratio (oracle / real)")):
        vals = [d[field] for d in (metrics.get("diversity") or {}).values() if d.get(field) == d.get(field)]
        if vals:
            out[f"validation.{key}_min"] = _entry(min(vals), "ratio", path, f"smallest per-class {what}, {space}")
            out[f"validation.{key}_max"] = _entry(max(vals), "ratio", path, f"largest per-class {what}, {space}")
    tex = ((metrics.get("texture") or {}).get("vs_noisy_real") or {}).values()
    vals = [d["texture_variance_ratio"] for d in tex if d.get("texture_variance_ratio") == d.get("texture_variance_ratio")]
    if vals:
        out["validation.texture_ratio_min"] = _entry(min(vals), "ratio", path, "smallest per-class texture variance ratio")
        out["validation.texture_ratio_max"] = _entry(max(vals), "ratio", path, "largest per-class texture variance ratio")
    if "posterior_stability" in metrics:
        ps = metrics["posterior_stability"]
        out["validation.stability_kl"] = _entry(ps["mean_kl"], "nats", path,
                                                f"E[KL(p(y|x) || p(y|x + eps))], eps ~ N(0, {ps['noise_std']}^2), "
                                                f"over {ps['n']} samples", se=ps.get("se"), se_over="samples")
    if "bpd" in metrics:
        b = metrics["bpd"]["test"]["marginal"]
        out["validation.bpd"] = _entry(b["pixel_scale"]["bpd"], "bits/dim", path,
                                       "test bits per dimension of the oracle flow at uint8 scale (marginal)",
                                       se=b["pixel_scale"]["se"], se_over="test images")
        out["validation.bpd_model_scale"] = _entry(b["model_scale"]["bpd"], "bits/dim", path,
                                                   "test bits per dimension on the flow's [-1, 1] scale (marginal)",
                                                   se=b["model_scale"]["se"], se_over="test images")
    sc = metrics.get("split_consistency") or {}
    if "oracle_ratio" in sc:
        out["validation.split_consistency_ratio"] = _entry(sc["oracle_ratio"], "ratio", path,
                                                           "FD(D''train, oracle) / FD(D''train, D'train)")
    return out


_DIGIT_WORDS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five",
                "6": "Six", "7": "Seven", "8": "Eight", "9": "Nine"}


def tex_macro_name(key: str, prefix: str = "num") -> str:
    """The LaTeX macro name of numbers.json key `key`: letters only (digits spelled out, other
    characters dropped as word breaks), CamelCase, with `prefix`: "alpha.resnet_18" ->
    ``numAlphaResnetOneEight``."""
    out = prefix
    for word in re.split(r"[^A-Za-z0-9]+", key):
        word = "".join(_DIGIT_WORDS.get(ch, ch) for ch in word)
        out += word[:1].upper() + word[1:]
    return out


def _tex_value(v: Any) -> str:
    if v is None:
        return "--"
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)).lower()
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.4g}" if math.isfinite(float(v)) else "--"
    raise DataError(f"numbers.tex: value {v!r} is not a number")


def numbers_tex(numbers: Mapping[str, Mapping]) -> str:
    r"""LaTeX macros ``\newcommand{\numAleatoricFloor}{0.0123}`` (4 significant digits), one
    per number, sorted by key, so a manuscript cites numbers.json without copying numbers by
    hand. Raises DataError when two keys map to the same macro name."""
    lines = ["% generated from numbers.json by the workflow; do not edit"]
    seen: dict[str, str] = {}
    for key in sorted(numbers):
        name = tex_macro_name(key)
        if name in seen:
            raise DataError(f"numbers.json keys {seen[name]!r} and {key!r} both map to the LaTeX macro "
                            f"\\{name}: rename one (e.g. the architecture in classifiers.archs)")
        seen[name] = key
        lines.append(f"\\newcommand{{\\{name}}}{{{_tex_value(numbers[key]['value'])}}}")
    return "\n".join(lines) + "\n"
