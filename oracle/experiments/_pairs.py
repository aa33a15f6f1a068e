"""The ``pairs`` data of the kinds whose claims compare two classifiers on the same test rows
(scaling: KL at one N minus at the next; shift: one configuration's accuracy minus another's;
labels: soft minus hard): per (arch, seed) and pair of cells, the difference of the two
classifiers' per-row values, its mean over the test rows and its SE paired per row
(`oracle.measures.paired`).

A kind's numbers combine a pair's seeds with `oracle.report.numbers.over_seeds_and_rows` over
the columns ``diff`` / ``diff_se``: the mean over seeds, with the seeds' spread and the rows'
part (the mean of the seeds' paired SEs) beside it. Reporting half only (numpy, pandas).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from oracle.classifiers.identity import run_identities
from oracle.errors import DataError
from oracle.io.predictions import read_predictions
from oracle.io.sample_rows import read_rows
from oracle.measures.paired import ROW_VALUES, paired_difference, row_values
from oracle.posterior import posterior_rows

#: Columns of a pairs frame: the classifiers' arch and seed, the per-row value compared
#: (`ROW_VALUES`), the two cells (``diff`` = value of cell ``a`` - value of cell ``b``), the
#: mean difference over the test rows, its SE paired per row and the number of rows.
COLUMNS = ("arch", "seed", "value", "a", "b", "diff", "diff_se", "n_rows")

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
    rows = []
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
    return pd.DataFrame(rows, columns=list(COLUMNS))


def pair_rows(pairs: pd.DataFrame, value: str, a: str, b: str, arch: str | None = None) -> pd.DataFrame:
    """The rows of `pairs` of ``value`` for cells a - b (one per arch and seed; only `arch`'s
    when given); a pair stored as b - a is turned round (``diff`` negated, the SE unchanged).
    Empty when the frame holds neither order."""
    sel = pairs[pairs["value"] == value]
    if arch is not None:
        sel = sel[sel["arch"] == arch]
    fwd = sel[(sel["a"] == a) & (sel["b"] == b)]
    back = sel[(sel["a"] == b) & (sel["b"] == a)]
    back = back.assign(a=a, b=b, diff=-back["diff"])
    both = pd.concat([f for f in (fwd, back) if len(f)], ignore_index=True) if len(fwd) or len(back) else fwd
    return both.sort_values(["arch", "seed"], kind="stable").reset_index(drop=True)
