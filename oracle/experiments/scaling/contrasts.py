"""The scaling kind's contrasts between two architectures, paired as the classifiers are: the same
seed trains every architecture on the same rows of the pool, and every classifier is scored on
the same test rows, so a difference or ratio of two architectures is taken per seed (and per
row), not from two independent means (reporting half: numpy, pandas)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from oracle.report.numbers import SEEDS_AND_ROWS, entry, mean_spread


def contrast_numbers(contrasts: pd.DataFrame | None, fits: pd.DataFrame, runs: pd.DataFrame,
                     labels: Mapping[str, str], contrasts_path: str, fits_path: str, runs_path: str = "runs.csv"
                     ) -> dict[str, dict]:
    """For every two architectures a, b (both orders; `contrasts` None: data made before them,
    or by hand, which have only the second):

    * ``log_kl_ratio_max_n.<a>.<b>``: ln(KL_a / KL_b) at the largest N, where it is both's
      largest, paired per seed and test row (`contrasts`,
      `oracle.experiments._pairs.log_ratio_contrasts`; two-way SE, Satterthwaite df);
    * ``alpha_diff.<a>.<b>``: alpha_a - alpha_b of the epistemic KL's power law, per seed (the
      ``kind="seed"`` rows of `fits`), mean ± std over the seeds both have;
    * ``log_kl_drop_low_diff.<a>.<b>``: the same for ln KL(N_min) / KL(N_mid), the low-data half
      of the N grid (`low_data_drops`), where both have the same N_min and N_mid.
    """
    out: dict[str, dict] = {}
    top = runs.groupby("arch")["N"].max().to_dict()
    for _, c in (contrasts[contrasts["value"] == "epistemic"] if contrasts is not None else pd.DataFrame()).iterrows():
        if not top.get(c["a"]) == top.get(c["b"]) == int(c["N"]):
            continue
        s, r = int(c["n_seeds"]), int(c["n_rows"])
        spread = {"se": float(c["se"]), "df": float(c["df"]) if pd.notna(c["df"]) else None,
                  "se_over": SEEDS_AND_ROWS, "n_seeds": s, "n_rows": r,
                  "se_seeds_part": float(np.sqrt(c["var_seeds"] / s)),
                  "se_rows_part": float(np.sqrt(c["var_rows"] / r)),
                  "se_interaction_part": float(np.sqrt(c["var_interaction"] / (s * r))),
                  "var_seeds": float(c["var_seeds"]), "var_rows": float(c["var_rows"]),
                  "var_interaction": float(c["var_interaction"]), "rows_bound": False}
        for a, b, sign in ((c["a"], c["b"], 1.0), (c["b"], c["a"], -1.0)):
            out[f"log_kl_ratio_max_n.{a}.{b}"] = entry(sign * float(c["log_ratio"]), "1", contrasts_path, (
                f"ln(epistemic KL of {labels.get(a, a)} / that of {labels.get(b, b)}) at N={int(c['N'])}, the means over "
                f"their {s} common seeds and the shared test rows, paired per seed and row (two-way SE of the delta "
                "method's per-row values)"), **spread)
    seed_fits = fits[(fits["kind"] == "seed") & (fits["value"] == "epistemic")] if "kind" in fits else fits.iloc[:0]
    alpha = seed_fits.pivot_table(index="seed", columns="arch", values="alpha") if len(seed_fits) else pd.DataFrame()
    out.update(_per_seed_diffs(alpha, "alpha_diff", "exponent of the epistemic KL", labels, fits_path))
    drops, grid = low_data_drops(runs)
    same = {a: grid[a] for a in drops}
    for key in {g for g in same.values()}:
        table = pd.DataFrame({a: d for a, d in drops.items() if same[a] == key})
        out.update(_per_seed_diffs(table, "log_kl_drop_low_diff", f"ln KL(N={key[0]}) / KL(N={key[1]})", labels,
                                   runs_path))
    return out


def low_data_drops(runs: pd.DataFrame) -> tuple[dict[str, pd.Series], dict[str, tuple[int, int]]]:
    """Per arch, ln KL(N_min) / KL(N_mid) per seed (N_mid the middle size of its grid: the
    low-data half, as scaling's ``log_kl_drop_low``) and its (N_min, N_mid); archs with one size,
    or a KL <= 0, are left out."""
    drops, grid = {}, {}
    for arch, sub in runs.groupby("arch", sort=True):
        sizes = sorted(int(n) for n in sub["N"].unique())
        mid = sizes[(len(sizes) - 1) // 2]
        if mid == sizes[0]:
            continue
        low = sub[sub["N"].isin([sizes[0], mid])].pivot_table(index="seed", columns="N", values="epistemic").dropna()
        if len(low) and bool((low > 0).all().all()):
            drops[arch], grid[arch] = np.log(low[sizes[0]] / low[mid]), (sizes[0], mid)
    return drops, grid


def _per_seed_diffs(table: pd.DataFrame, name: str, what: str, labels: Mapping[str, str], path: str) -> dict[str, dict]:
    """``<name>.<a>.<b>`` (both orders) for every two columns (archs) of `table` (index: seed):
    the per-seed difference, mean ± std over the seeds both have (>= 2)."""
    out: dict[str, dict] = {}
    archs = sorted(table.columns)
    for i, a in enumerate(archs):
        for b in archs[i + 1:]:
            d = (table[a] - table[b]).dropna().to_numpy(float)
            if d.size < 2:
                continue
            for x, y, v in ((a, b, d), (b, a, -d)):
                out[f"{name}.{x}.{y}"] = entry(float(v.mean()), "1", path, (
                    f"{what} of {labels.get(x, x)} minus that of {labels.get(y, y)}, per seed (the same seed trains "
                    f"both on the same rows), mean ± std over {d.size} seeds"), **mean_spread(float(v.std(ddof=1)),
                                                                                        int(d.size)))
    return out
