"""The ``pairs`` data of the kinds whose claims compare two classifiers on the same test rows
(scaling: KL at one N minus at the next; shift: one configuration's accuracy minus another's;
labels: soft minus hard): per (arch, seed) and pair of cells, the difference of the two
classifiers' per-row values, its mean over the test rows and its SE paired per row
(`oracle.measures.paired`).

A kind's numbers combine a pair's seeds with `over_seeds_and_rows` over
the columns ``diff`` / ``diff_se`` / ``diff_se_mean``: the mean over seeds with the two-way (seed
x test row) SE, for which each row also carries the SE over the test rows of the per-row
difference averaged over its group's seeds (per arch: ``diff_se_mean``; over every arch and
seed of the pair: ``diff_se_mean_all``; `pair_rows` keeps the one its selection is). Reporting
half only (numpy, pandas).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from oracle.classifiers.identity import run_identities
from oracle.errors import DataError
from oracle.io.predictions import read_predictions
from oracle.io.sample_rows import read_rows
from oracle.measures.paired import ROW_VALUES, paired_difference, row_values
from oracle.measures.two_way import TwoWay, two_way, two_way_from_summaries
from oracle.posterior import posterior_rows
from oracle.report.numbers import SEEDS_AND_ROWS, over_seeds

#: Columns of a pairs frame: the classifiers' arch and seed, the per-row value compared
#: (`ROW_VALUES`), the two cells (``diff`` = value of cell ``a`` - value of cell ``b``), the
#: mean difference over the test rows, its SE paired per row, the number of rows, and the SE
#: over the rows of the per-row difference averaged over the seeds of the arch
#: (``diff_se_mean``) and over every (arch, seed) of the pair (``diff_se_mean_all``).
COLUMNS = ("arch", "seed", "value", "a", "b", "diff", "diff_se", "n_rows", "diff_se_mean", "diff_se_mean_all")

#: One wanted pair: (arch, seed, cell a, cell b).
Pair = tuple[str, int, str, str]


def one_file(inputs: Mapping[str, Sequence[str]], name: str) -> str:
    """The one file of collect input `name` (the world's samples); DataError naming the input
    when it is missing or names several files."""
    files = list(inputs.get(name) or [])
    if len(files) != 1:
        raise DataError(f"collect input {name!r}: expected one file, got {len(files)}")
    return str(files[0])


#: A kind's own per-row values of a classifier: (its key (arch, cell, seed), log q [n, K], the
#: world's log p(y|x) [n, K], labels [n], the world file's attrs) -> {name: float [n]}.
RowExtra = Callable[[tuple[str, str, int], np.ndarray, np.ndarray, np.ndarray, Mapping], dict[str, np.ndarray]]


def read_row_values(predictions: Iterable[str | os.PathLike], samples: str | os.PathLike,
                    extra: RowExtra | None = None, views: Mapping[str, Sequence[Mapping]] | None = None
                    ) -> tuple[dict[tuple[str, str, int], dict[str, np.ndarray]], int]:
    """Per-row values (`oracle.measures.paired.row_values`, and those of `extra` beside them) of
    every classifier of `predictions` (``predictions/<evalset>.h5``, all on the same test rows of
    world file `samples`), keyed by (arch, cell, seed), and the number of test rows. The world's
    posterior at those rows comes from `samples` (its ``loglik``, prior and label temperature).
    DataError naming the file when two files hold different rows, a file's labels are not the
    world's, or a classifier appears twice. A file stands for the runs `oracle.classifiers.
    evaluate.run_identities` gives it with `views` (the experiment's ``classifiers``)."""
    out: dict[tuple[str, str, int], dict[str, np.ndarray]] = {}
    index = log_p = labels = attrs = None
    for path in predictions:
        pred = read_predictions(path)
        keys = [(str(r["arch"]), str(r["cell"]), int(r["seed"])) for r in run_identities(pred["attrs"], views, path)]
        for key in keys:
            if key in out:
                raise DataError(f"{path}: a second prediction file of classifier {key}")
        if index is None:
            index = pred["index"]
            world = read_rows(samples, index, fields=("label", "loglik"))
            attrs = world["attrs"]
            log_p, labels = posterior_rows(world["loglik"], attrs), world["label"]
        if not np.array_equal(pred["index"], index):
            raise DataError(f"{path}: its test rows are not those of the experiment's other predictions")
        if not np.array_equal(pred["label"], labels):
            raise DataError(f"{path}: its labels are not those of {samples} at the same rows")
        for key in keys:
            out[key] = row_values(pred["log_q"], log_p, labels)
            if extra is not None:
                out[key].update(extra(key, pred["log_q"], log_p, labels, attrs))
    if index is None:
        raise DataError("pairs: no predictions files")
    return out, int(len(index))


def pairs_frame(predictions: Sequence[str | os.PathLike], samples: str | os.PathLike, wanted: Iterable[Pair],
                values: Sequence[str] = ROW_VALUES, views: Mapping[str, Sequence[Mapping]] | None = None) -> pd.DataFrame:
    """One row (`COLUMNS`) per wanted pair (arch, seed, cell a, cell b) and value of `values`:
    the per-row difference a - b paired on the shared test rows (`read_row_values` with `views`).
    DataError naming the classifier when a wanted one has no predictions."""
    return pairs_of_rows(*read_row_values(predictions, samples, views=views), wanted, values)


def pairs_of_rows(per_row: Mapping[tuple[str, str, int], Mapping[str, np.ndarray]], n_rows: int,
                  wanted: Iterable[Pair], values: Sequence[str] = ROW_VALUES) -> pd.DataFrame:
    """`pairs_frame` of per-row values already read (`read_row_values`)."""
    bad = [v for v in values if v not in ROW_VALUES]
    if bad:
        raise DataError(f"pairs: no per-row value {bad[0]!r} (values: {', '.join(ROW_VALUES)})")
    rows, per_row_diff = [], []
    for arch, seed, a, b in wanted:
        ends = []
        for cell in (a, b):
            got = per_row.get((arch, cell, int(seed)))
            if got is None:
                raise DataError(f"pairs: no predictions of classifier {arch}/{cell}/seed{seed}")
            ends.append(got)
        for v in values:
            d = paired_difference(ends[0][v], ends[1][v])
            rows.append({"arch": arch, "seed": int(seed), "value": v, "a": a, "b": b, "diff": d["mean"],
                         "diff_se": d["se"], "n_rows": n_rows})
            per_row_diff.append(np.asarray(ends[0][v], np.float64) - np.asarray(ends[1][v], np.float64))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if len(frame):
        frame["diff_se_mean"] = _seed_mean_se(frame, per_row_diff, ["arch", "value", "a", "b"])
        frame["diff_se_mean_all"] = _seed_mean_se(frame, per_row_diff, ["value", "a", "b"])
    return frame


def with_seed_mean_se(runs: pd.DataFrame, per_row: Mapping[tuple[str, str, int], Mapping[str, np.ndarray]],
                      values: Sequence[str] = ROW_VALUES) -> pd.DataFrame:
    """`runs` (one row per classifier: columns arch, cell, seed) with a column ``<value>_se_mean``
    per value of `values`: the SE over the test rows of the per-row value averaged over the seeds
    of the row's (arch, cell) (`seed_mean_row_se`), what
    `over_seeds_and_rows` needs for the two-way SE of a cell's mean over
    seeds. DataError naming the classifier when `per_row` lacks one."""
    out = runs.copy()
    for v in values:
        out[f"{v}_se_mean"] = np.nan
    for (arch, cell), idx in out.groupby(["arch", "cell"], sort=False).groups.items():
        got = []
        for seed in sorted(set(out.loc[idx, "seed"])):  # a classifier on several evaluation sets counts once
            one = per_row.get((str(arch), str(cell), int(seed)))
            if one is None:
                raise DataError(f"pairs: no predictions of classifier {arch}/{cell}/seed{seed}")
            got.append(one)
        for v in values:
            out.loc[idx, f"{v}_se_mean"] = seed_mean_row_se([g[v] for g in got])
    return out


def seed_mean_row_se(values: Sequence[np.ndarray]) -> float:
    """The SE over test rows of the per-row values averaged over seeds: `values`, one float [n]
    per seed on the same rows -> ``std(mean over seeds, ddof=1) / sqrt(n)`` (what
    `oracle.measures.two_way.two_way_from_summaries` needs beside the seeds' own SEs)."""
    mean = np.mean(np.stack([np.asarray(v, np.float64) for v in values]), axis=0)
    return float(mean.std(ddof=1) / np.sqrt(mean.size)) if mean.size > 1 else float("nan")


def _seed_mean_se(frame: pd.DataFrame, per_row_diff: list[np.ndarray], by: list[str]) -> np.ndarray:
    """`seed_mean_row_se` of each group of `frame` (its rows grouped `by`), on each of its rows."""
    out = np.full(len(frame), np.nan)
    for _, idx in frame.groupby(by, sort=False).indices.items():
        out[idx] = seed_mean_row_se([per_row_diff[i] for i in idx])
    return out


def pair_rows(pairs: pd.DataFrame, value: str, a: str, b: str, arch: str | None = None) -> pd.DataFrame:
    """The rows of `pairs` of ``value`` for cells a - b (one per arch and seed; only `arch`'s
    when given); a pair stored as b - a is turned round (``diff`` negated, the SEs unchanged).
    ``diff_se_mean`` is that of the selection: the arch's own with `arch`, else the one over
    every arch (``diff_se_mean_all``; a frame written before either has neither, and
    `over_seeds_and_rows` falls back to its bound). Empty when the frame
    holds neither order."""
    sel = pairs[pairs["value"] == value]
    if arch is not None:
        sel = sel[sel["arch"] == arch]
    if "diff_se_mean_all" in sel:
        sel = sel.drop(columns="diff_se_mean") if arch is None else sel.drop(columns="diff_se_mean_all")
        sel = sel.rename(columns={"diff_se_mean_all": "diff_se_mean"})
    fwd = sel[(sel["a"] == a) & (sel["b"] == b)]
    back = sel[(sel["a"] == b) & (sel["b"] == a)]
    back = back.assign(a=a, b=b, diff=-back["diff"])
    both = pd.concat([f for f in (fwd, back) if len(f)], ignore_index=True) if len(fwd) or len(back) else fwd
    return both.sort_values(["arch", "seed"], kind="stable").reset_index(drop=True)


def over_seeds_and_rows(rows: pd.DataFrame, col: str, n_rows: int | None = None) -> dict[str, Any]:
    """Mean of `col` over the rows (one per seed, every seed scored on the same test rows) with
    the two-way (seed x test row) SE (`oracle.measures.two_way.two_way_from_summaries`), as
    `entry` keywords: ``value``, ``se``, ``df`` (Satterthwaite), ``std`` (over the seed means),
    ``se_over`` `oracle.report.numbers.SEEDS_AND_ROWS` and its ``TWO_WAY_FIELDS``. It reads column `col` (each seed's mean
    over the test rows), ``<col>_se`` (each seed's SE over them) and ``<col>_se_mean`` (the SE
    over the test rows of the per-row values averaged over these seeds, one value on every
    row: `seed_mean_row_se`); without the last its upper bound, the mean of the
    seeds' SEs, stands in and ``rows_bound`` is True. `n_rows`: the test rows (required for
    two seeds or more). One seed, or no ``<col>_se``: `oracle.report.numbers.over_seeds` (its test-set SE
    alone).
    DataError when ``<col>_se_mean`` differs between the rows (they are not one group)."""
    vals = rows[col].to_numpy(float)
    n = len(vals)
    if n < 2 or f"{col}_se" not in rows:
        return over_seeds(rows, col)
    if not n_rows or n_rows < 2:
        raise DataError(f"{col}: a spread over seeds and test rows needs the number of test rows, got {n_rows!r}")
    ses = rows[f"{col}_se"].to_numpy(float)
    bound = f"{col}_se_mean" not in rows
    if bound:
        mean_se = float(ses.mean())
    else:
        group = rows[f"{col}_se_mean"].to_numpy(float)
        if not np.allclose(group, group[0], rtol=1e-12, atol=0.0):
            raise DataError(f"{col}_se_mean: differs between the rows ({group.min():.6g} .. {group.max():.6g}); "
                            "the SE of the seed-mean rows holds for one group of seeds only")
        mean_se = float(group[0])
    return two_way_spread(two_way_from_summaries(vals, ses, mean_se, int(n_rows)), bound)


def two_way_spread(tw: TwoWay, rows_bound: bool = False) -> dict[str, Any]:
    """A `TwoWay` as `entry` keywords (`over_seeds_and_rows`'s fields): value, std over the seed
    means, se, Satterthwaite df, se_over `oracle.report.numbers.SEEDS_AND_ROWS`, the counts, the
    SE's parts, the variance components and ``rows_bound``."""
    return {"value": tw.mean, "std": tw.seed_std, "se": tw.se, "se_over": SEEDS_AND_ROWS, "df": tw.df,
            "n_seeds": tw.n_seeds, "n_rows": tw.n_rows, **tw.parts, "var_seeds": tw.var_seeds,
            "var_rows": tw.var_rows, "var_interaction": tw.var_interaction, "rows_bound": bool(rows_bound)}


#: Columns of a contrasts frame (`log_ratio_contrasts`): the per-row value, the size N and its
#: cells, the two archs, and `two_way_spread`'s fields of ln(mean of a / mean of b).
CONTRAST_COLUMNS = ("value", "N", "a", "b", "cell", "log_ratio", "se", "df", "n_seeds", "n_rows", "var_seeds",
                    "var_rows", "var_interaction")


def log_ratio_contrasts(per_row: Mapping[tuple[str, str, int], Mapping[str, np.ndarray]], runs: pd.DataFrame,
                        value: str = "epistemic") -> pd.DataFrame:
    """ln(A / B) for every two archs a, b (a before b in name order) trained at the same size N
    (`runs`: arch, cell, N, seed), A and B the means of `value` over their common seeds and the
    shared test rows, paired per seed (the same seed trains on the same rows) and per row: its SE
    is the two-way SE (`oracle.measures.two_way.two_way`) of the delta method's per-row values
    ``a[s, r] / A - b[s, r] / B``, whose grand mean is 0 and whose spread is that of ln(A / B) to
    first order. Pairs with fewer than two common seeds, or a mean <= 0, are left out."""
    rows = []
    for (n, cell), sub in runs.drop_duplicates(["arch", "cell", "seed"]).groupby(["N", "cell"], sort=True):
        archs = sorted(set(sub["arch"]))
        for i, a in enumerate(archs):
            for b in archs[i + 1:]:
                seeds = sorted(set(sub.loc[sub["arch"] == a, "seed"]) & set(sub.loc[sub["arch"] == b, "seed"]))
                if len(seeds) < 2:
                    continue
                xa = np.stack([per_row[(a, str(cell), int(s))][value] for s in seeds])
                xb = np.stack([per_row[(b, str(cell), int(s))][value] for s in seeds])
                ma, mb = float(xa.mean()), float(xb.mean())
                if ma <= 0 or mb <= 0:
                    continue
                tw = two_way(xa / ma - xb / mb)
                rows.append({"value": value, "N": int(n), "a": a, "b": b, "cell": str(cell),
                             "log_ratio": math.log(ma / mb), "se": tw.se, "df": tw.df, "n_seeds": tw.n_seeds,
                             "n_rows": tw.n_rows, "var_seeds": tw.var_seeds, "var_rows": tw.var_rows,
                             "var_interaction": tw.var_interaction})
    return pd.DataFrame(rows, columns=list(CONTRAST_COLUMNS))
