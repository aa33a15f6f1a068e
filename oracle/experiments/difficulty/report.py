"""Experiment kind ``difficulty``, its reporting half: its data frames, tables, figures and numbers
(the planning half and the kind's description: `oracle.experiments.difficulty`)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from oracle.errors import DataError
from oracle.report.figures import save_figure, style
from oracle.report.numbers import entry


def collect(spec: Mapping, inputs: Mapping[str, Sequence[str]]) -> dict[str, pd.DataFrame]:
    """``curve`` from the worlds' constants files (``inputs["constants"]``, in spec order)."""
    rows = []
    for path in inputs["constants"]:
        try:
            c = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"cannot read world constants {path}: {exc}") from None
        w, mi = c["all"], c["all"]["mutual_information"]
        closed = c.get("bayes_error_closed_form") or {}
        rows.append({
            "world": c["world"], "base_temperature": float(c["base_temperature"]),
            "label_temperature": float(c["label_temperature"]), "prior": json.dumps(c["prior"]), "n": int(w["n"]),
            "bayes_error": w["bayes_error"]["mean"], "bayes_error_se": w["bayes_error"]["se"],
            "aleatoric": w["aleatoric"]["mean"], "aleatoric_se": w["aleatoric"]["se"],
            "mutual_information_bits": mi["bits"], "mutual_information_se": mi["se"],
            "normalized_mutual_information": mi["normalized"],
            "bayes_error_closed_form": closed.get("value", math.nan), "closed_form_z": closed.get("z", math.nan),
            "closed_form_method": closed.get("method", ""), "source": Path(path).as_posix(),
        })
    order = {w: i for i, w in enumerate(spec["worlds"])}
    df = pd.DataFrame(rows)
    if set(df["world"]) != set(order):
        raise DataError(f"difficulty: constants of worlds {sorted(df['world'])}, expected {sorted(order)}")
    return {"curve": df.sort_values("world", key=lambda s: s.map(order)).reset_index(drop=True)}


def table(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping) -> pd.DataFrame:
    """``difficulty_vs_tau``: one row per world, sorted by tau."""
    if name != "difficulty_vs_tau":
        raise DataError(f"difficulty: no table named {name!r} (tables: difficulty_vs_tau)")
    c = data["curve"].sort_values("base_temperature", kind="stable")
    out = pd.DataFrame({
        "World": c["world"], "tau": c["base_temperature"], "Samples": c["n"].astype(int),
        "Bayes error (%)": 100 * c["bayes_error"], "SE (%)": 100 * c["bayes_error_se"],
        "Closed form (%)": 100 * c["bayes_error_closed_form"], "z": c["closed_form_z"],
        "Aleatoric (nats)": c["aleatoric"], "Aleatoric SE": c["aleatoric_se"],
        "I(X;Y) (bits)": c["mutual_information_bits"], "I SE": c["mutual_information_se"],
        "I/H(Y)": c["normalized_mutual_information"],
    })
    if not np.isfinite(out["Closed form (%)"].to_numpy(float)).any():
        out = out.drop(columns=["Closed form (%)", "z"])
    return out.reset_index(drop=True)


def figure(name: str, data: Mapping[str, pd.DataFrame], spec: Mapping, stem: str | os.PathLike) -> dict[str, Path]:
    """``difficulty_curve``: three panels against tau."""


    if name != "difficulty_curve":
        raise DataError(f"difficulty: no figure named {name!r} (figures: difficulty_curve)")
    c = data["curve"].sort_values("base_temperature", kind="stable")
    tau = c["base_temperature"].to_numpy(float)
    panels = (("bayes_error", "bayes_error_se", 100.0, "Bayes error (%)"),
              ("aleatoric", "aleatoric_se", 1.0, "aleatoric floor E[H(p(y|x))] (nats)"),
              ("mutual_information_bits", "mutual_information_se", 1.0, "I(X;Y) (bits)"))
    with style():
        fig = Figure(figsize=(10, 3.2))
        for ax, (col, se, scale, label) in zip(fig.subplots(1, 3), panels):
            ax.errorbar(tau, scale * c[col], yerr=scale * c[se].fillna(0.0), marker="o", ms=4, capsize=2, lw=1.2,
                        label="Monte Carlo ± SE")
            if col == "bayes_error" and np.isfinite(c["bayes_error_closed_form"].to_numpy(float)).any():
                ax.plot(tau, 100.0 * c["bayes_error_closed_form"], "s", mfc="none", color="k", ms=7,
                        label="closed form")
            ax.set(xlabel="base temperature τ", ylabel=label)
            ax.legend(loc="best")
        fig.tight_layout()
        return save_figure(fig, stem)


def numbers(data: Mapping[str, pd.DataFrame], spec: Mapping, data_paths: Mapping[str, str]) -> dict[str, dict]:
    """Per world: ``bayes_error.<world>``, ``aleatoric_floor.<world>``,
    ``mutual_information.<world>`` (± SE over its samples), ``base_temperature.<world>``, and
    ``bayes_error_closed_form.<world>`` with ``closed_form_z.<world>`` where a closed form
    exists; ``bayes_error_increases_with_tau`` (true when the estimates rise with tau)."""
    c, path = data["curve"], data_paths["curve"]
    out: dict[str, dict] = {}
    for _, r in c.iterrows():
        w, n = r["world"], int(r["n"])
        out[f"base_temperature.{w}"] = entry(float(r["base_temperature"]), "1", path, f"world {w}: base temperature tau")
        out[f"bayes_error.{w}"] = entry(float(r["bayes_error"]), "fraction", path,
                                        f"world {w} (tau={r['base_temperature']:g}): Bayes error E[1 - max p(y|x)] over "
                                        f"{n} samples", se=float(r["bayes_error_se"]), se_over="samples")
        out[f"aleatoric_floor.{w}"] = entry(float(r["aleatoric"]), "nats", path,
                                            f"world {w}: aleatoric floor E[H(p(y|x))] over {n} samples",
                                            se=float(r["aleatoric_se"]), se_over="samples")
        out[f"mutual_information.{w}"] = entry(float(r["mutual_information_bits"]), "bits", path,
                                               f"world {w}: I(X;Y) = H(Y) - E[H(p(y|x))]",
                                               se=float(r["mutual_information_se"]), se_over="samples")
        if np.isfinite(r["bayes_error_closed_form"]):
            out[f"bayes_error_closed_form.{w}"] = entry(float(r["bayes_error_closed_form"]), "fraction", path,
                                                        f"world {w}: Bayes error in closed form "
                                                        f"({r['closed_form_method']})")
            out[f"closed_form_z.{w}"] = entry(float(r["closed_form_z"]), "1", path,
                                              f"world {w}: (Monte Carlo - closed form) / SE of the Bayes error")
    by_tau = c.sort_values("base_temperature", kind="stable")["bayes_error"].to_numpy(float)
    out["bayes_error_increases_with_tau"] = entry(bool(np.all(np.diff(by_tau) > 0)), "bool", path,
                                                  "the Bayes error estimates rise strictly with tau (Theisen et al., "
                                                  "Prop. 2)")
    return out
