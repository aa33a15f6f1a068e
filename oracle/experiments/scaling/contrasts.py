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
                     labels: Mapping[str, str], contrasts_path: str, fits_path: str) -> dict[str, dict]:
    """For every two architectures a, b (both orders; `contrasts` None: data made before them,
    or by hand, which have only the second):

    * ``log_kl_ratio_max_n.<a>.<b>``: ln(KL_a / KL_b) at the largest N, where it is both's
      largest, paired per seed and test row (`contrasts`,
      `oracle.experiments._pairs.log_ratio_contrasts`; two-way SE, Satterthwaite df);
    * ``alpha_diff.<a>.<b>``: alpha_a - alpha_b of the epistemic KL's power law, per seed (the
      ``kind="seed"`` rows of `fits`), mean ± std over the seeds both have.
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
    archs = sorted(alpha.columns)
    for i, a in enumerate(archs):
        for b in archs[i + 1:]:
            d = (alpha[a] - alpha[b]).dropna().to_numpy(float)
            if d.size < 2:
                continue
            for x, y, v in ((a, b, d), (b, a, -d)):
                out[f"alpha_diff.{x}.{y}"] = entry(float(v.mean()), "1", fits_path, (
                    f"exponent of the epistemic KL of {labels.get(x, x)} minus that of {labels.get(y, y)}, per seed "
                    f"(the same seed trains both on the same rows), mean ± std over {d.size} seeds"),
                    **mean_spread(float(v.std(ddof=1)), int(d.size)))
    return out
