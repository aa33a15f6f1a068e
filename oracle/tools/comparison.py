"""Two runs compared number by number: what a user asks after a rerun on another machine, with
another seed or on a GPU. `python -m oracle.tools.compare RUN_A RUN_B` prints it.

Every key of numbers.json present in both runs gets its difference B - A and, where both runs
give the number a spread, a z = (B - A) / sqrt(s_A^2 + s_B^2), s the entry's standard error
(``se``: over seeds, test rows or Monte Carlo samples, as its ``se_over`` says; an entry with
only a ``std`` uses the std, larger than its SE: a conservative z). Each number gets a flag:

``moved``      |z| > z_max: B differs from A by more than the two runs' spreads allow;
``within``     |z| <= z_max and the values differ;
``changed``    no spread on either side and the values differ beyond a relative 1e-9 (a count,
               a setting, a number without an uncertainty);
``same``       equal to a relative 1e-9 (with or without a spread), or the same value that is
               no finite number (None, true) in both runs;
``undefined``  a value is missing (None: not finite) in one run or both, and they differ;
``only_a`` / ``only_b``  the key exists in one run only;
``between_worlds``  a constant of a world that differs between the runs (``world.<world>.*``,
               `oracle.tools.world_check`) whose value differs: the difference of two worlds,
               not a reproduction check (`mark_between_worlds`).

Under the null hypothesis that both runs estimate the same quantity with normal errors, about
2 * (1 - Phi(z_max)) of the numbers with a z move by chance alone (0.27% at z_max = 3);
`expected_by_chance` says how many that is. The spreads are those each run states: a number
whose run-to-run variation has a source its spread does not hold (a different flow, trained
from another seed, under every world constant) moves more often than that.

The claims of the two runs (claims.csv) are compared verdict by verdict (`compare_claims`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from oracle.errors import DataError

#: The flags, most severe first (the order of `compare_numbers`' rows and of the summary).
FLAGS = ("moved", "changed", "undefined", "only_a", "only_b", "between_worlds", "within", "same")
#: Flags that say the two runs agree on a number.
AGREE = ("within", "same")
#: Relative tolerance under which two values without a spread count as the same.
RTOL = 1e-9


def z_scores(a: np.ndarray, se_a: np.ndarray, b: np.ndarray, se_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B - A, z) elementwise: z = (B - A) / sqrt(se_A^2 + se_B^2), NaN where a value or
    either spread is NaN or both spreads are 0 (all arrays float [n])."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    se_a, se_b = np.asarray(se_a, np.float64), np.asarray(se_b, np.float64)
    diff = b - a
    scale = np.hypot(se_a, se_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(scale > 0, diff / scale, np.nan)
    return diff, z


def flags(a: np.ndarray, b: np.ndarray, z: np.ndarray, z_max: float = 3.0, rtol: float = RTOL) -> np.ndarray:
    """The flag (module docstring) of each number present in both runs: values `a`, `b` (NaN
    where undefined) and `z` (NaN where there is no spread) -> str [n]."""
    a, b, z = (np.asarray(v, np.float64) for v in (a, b, z))
    out = np.full(a.shape, "same", dtype=object)
    differ = ~np.isclose(a, b, rtol=rtol, atol=0.0)
    out[differ] = "changed"
    has_z = np.isfinite(z)
    out[has_z] = np.where(np.abs(z[has_z]) > z_max, "moved", "within")
    out[~differ] = "same"  # identical values: a z of 0 says less than that
    out[~(np.isfinite(a) & np.isfinite(b))] = "undefined"
    return out


def entry_spread(entry: Mapping) -> tuple[float, str]:
    """(the spread of a numbers.json entry used for z, what it is): its ``se`` ("se over
    <se_over>"), else its ``std`` ("std over <std_over or seeds>"), else (NaN, "")."""
    se, std = entry.get("se"), entry.get("std")
    if se is not None and math.isfinite(se):
        return float(se), f"se over {entry.get('se_over') or '?'}"
    if std is not None and math.isfinite(std):
        return float(std), f"std over {entry.get('std_over') or 'seeds'}"
    return math.nan, ""


def _value(entry) -> float:
    v = entry.get("value") if isinstance(entry, Mapping) else entry
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return math.nan
    return float(v)


def compare_numbers(a: Mapping[str, Mapping], b: Mapping[str, Mapping], z_max: float = 3.0) -> pd.DataFrame:
    """One row per key of either numbers.json: key, unit, a, b, diff (B - A), rel (diff / |A|),
    spread_a, spread_b (`entry_spread`), spread (what they are), z and flag; rows in the order
    of `FLAGS`, then by |z| (largest first), then by key."""
    keys = sorted(set(a) | set(b))
    va = np.array([_value(a[k]) if k in a else math.nan for k in keys])
    vb = np.array([_value(b[k]) if k in b else math.nan for k in keys])
    sa = [entry_spread(a[k]) if k in a and isinstance(a[k], Mapping) else (math.nan, "") for k in keys]
    sb = [entry_spread(b[k]) if k in b and isinstance(b[k], Mapping) else (math.nan, "") for k in keys]
    diff, z = z_scores(va, [s for s, _ in sa], vb, [s for s, _ in sb])
    flag = flags(va, vb, z, z_max)
    raw = [json.dumps((a[k] or {}).get("value") if isinstance(a[k], Mapping) else a[k], sort_keys=True)
           == json.dumps((b[k] or {}).get("value") if isinstance(b[k], Mapping) else b[k], sort_keys=True)
           if k in a and k in b else False for k in keys]
    flag[(flag == "undefined") & np.array(raw, dtype=bool)] = "same"  # e.g. true or None in both runs
    flag[[k not in b for k in keys]] = "only_a"
    flag[[k not in a for k in keys]] = "only_b"
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(va != 0, diff / np.abs(va), np.nan)
    unit = [(a.get(k) or b.get(k) or {}).get("unit", "") if isinstance(a.get(k) or b.get(k), Mapping) else ""
            for k in keys]
    spread = [" / ".join(dict.fromkeys(w for w in (x[1], y[1]) if w)) for x, y in zip(sa, sb)]
    df = pd.DataFrame({"key": keys, "unit": unit, "a": va, "b": vb, "diff": diff, "rel": rel,
                       "spread_a": [s for s, _ in sa], "spread_b": [s for s, _ in sb], "spread": spread, "z": z,
                       "flag": flag})
    df["_order"] = df["flag"].map({f: i for i, f in enumerate(FLAGS)})
    df["_absz"] = -np.abs(df["z"].fillna(0.0))
    return df.sort_values(["_order", "_absz", "key"], kind="stable").drop(columns=["_order", "_absz"]).reset_index(
        drop=True)


def mark_between_worlds(df: pd.DataFrame, worlds: set[str] | list[str], differ: set[str]) -> pd.DataFrame:
    """A `compare_numbers` frame with the rows of world constants (``world.<world>.*`` of one of
    `worlds`) whose world is in `differ` and whose values differ (moved, within or changed)
    flagged ``between_worlds`` instead, rows re-sorted in the order of `FLAGS`."""
    from oracle.tools.world_check import constants_world

    if not differ:
        return df
    hit = df["key"].map(lambda k: constants_world(k, worlds) in differ) & df["flag"].isin(["moved", "within",
                                                                                           "changed"])
    out = df.assign(flag=df["flag"].where(~hit, "between_worlds"))
    out["_order"] = out["flag"].map({f: i for i, f in enumerate(FLAGS)})
    return out.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)


def flag_counts(df: pd.DataFrame, claims: pd.DataFrame | None = None) -> str:
    """The summary of a `compare_numbers` frame: "12 numbers: 0 moved, ..., 12 same" (a
    ``between_worlds`` count only where there is one), and "nothing moved" when every number
    is within or the same and no verdict of `claims` (`compare_claims`) changed."""
    counts = df["flag"].value_counts()
    text = f"{len(df)} numbers: " + ", ".join(f"{counts.get(f, 0)} {f}" for f in FLAGS
                                             if f != "between_worlds" or counts.get(f, 0))
    if df["flag"].isin(AGREE).all() and (claims is None or not claims["changed"].any()):
        text += (f"; nothing moved: every number is within or the same"
                 + (" and every verdict is the same" if claims is not None else ""))
    return text


def expected_by_chance(n_with_z: int, z_max: float) -> float:
    """Numbers expected beyond |z| > z_max by chance among `n_with_z` (two-sided normal)."""
    return n_with_z * math.erfc(z_max / math.sqrt(2.0))


def compare_claims(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """The verdict of each finding (claims.csv frames, columns id and verdict) in both runs:
    id, verdict_a, verdict_b, changed (bool); a finding missing in one run has "" there."""
    va, vb = (dict(zip(f["id"].astype(str), f["verdict"].astype(str))) for f in (a, b))
    ids = list(dict.fromkeys([*va, *vb]))
    return pd.DataFrame({"id": ids, "verdict_a": [va.get(i, "") for i in ids],
                         "verdict_b": [vb.get(i, "") for i in ids],
                         "changed": [va.get(i, "") != vb.get(i, "") for i in ids]})


def read_run(run: str | os.PathLike) -> tuple[dict, pd.DataFrame | None]:
    """(numbers.json, claims.csv or None) of a run folder (results/<run>). DataError naming the
    file when numbers.json is missing or not a JSON object."""
    run = Path(run)
    path = run / "numbers.json"
    try:
        numbers = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the run's numbers ({exc}); is {run} a finished run folder "
                        "(results/<run>)?") from None
    if not isinstance(numbers, dict):
        raise DataError(f"{path}: expected a JSON object of numbers")
    claims = run / "claims.csv"
    return numbers, (pd.read_csv(claims) if claims.is_file() else None)


def _num(v: float) -> str:
    return "-" if not math.isfinite(v) else f"{v:.4g}"


def format_comparison(df: pd.DataFrame, claims: pd.DataFrame | None, names: tuple[str, str], z_max: float,
                      flagged_only: bool = False) -> str:
    """The comparison as text: a summary line per flag, the claims whose verdict changed, then
    one line per number (only the flagged ones with `flagged_only`)."""
    n_z = int((np.isfinite(df["z"]) & (df["flag"] != "between_worlds")).sum())
    lines = [f"A = {names[0]}", f"B = {names[1]}", flag_counts(df, claims),
             f"moved: |z| > {z_max:g}, z = (B - A) / sqrt(se_A^2 + se_B^2); of the {n_z} numbers with a spread, "
             f"{expected_by_chance(n_z, z_max):.1f} would move by chance alone if both runs measured the same "
             "thing with the errors they state."]
    if claims is not None:
        changed = claims[claims["changed"]]
        lines.append(f"claims: {len(changed)} of {len(claims)} verdicts changed"
                     + "".join(f"\n  {r.id}: {r.verdict_a or '-'} -> {r.verdict_b or '-'}" for r in changed.itertuples()))
    shown = df[~df["flag"].isin(AGREE)] if flagged_only else df
    header = ("flag", "key", "A", "B", "B - A", "z", "unit", "spread")
    rows = [header] + [(r.flag, r.key, _num(r.a), _num(r.b), _num(r.diff), _num(r.z), r.unit, r.spread)
                       for r in shown.itertuples()]
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header) - 1)]
    lines.append("")
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) if i in (0, 1, 6) else str(c).rjust(w) for i, (c, w) in
                               enumerate(zip(row, widths))) + f"  {row[-1]}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- runs, configs, many runs
#: Config sections that define the worlds a run measures (the data, the flow that is the oracle,
#: the worlds' constants): two runs that differ in one of them measure different quantities, so
#: a "moved" number says nothing about reproducibility.
WORLD_SECTIONS = ("data", "oracle", "worlds")


def flatten_config(config: Mapping, prefix: str = "") -> dict[str, object]:
    """A nested config as ``{"dotted.key": value}``; lists and scalars are values (a list of
    seeds is one setting)."""
    out: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_config(value, f"{name}."))
        else:
            out[name] = value
    return out


def config_differences(configs: Mapping[str, Mapping]) -> pd.DataFrame:
    """The config keys whose value differs between the runs (`configs`: {run name: effective
    config}): one row per dotted key, one column per run ("" where a run lacks the key), and
    ``world`` (True for a key under `WORLD_SECTIONS`); keys in order."""
    flat = {name: flatten_config(c) for name, c in configs.items()}
    keys = sorted(set().union(*flat.values())) if flat else []
    rows = []
    for k in keys:
        values = [flat[n].get(k, "") for n in flat]
        if any(json.dumps(v, sort_keys=True, default=str) != json.dumps(values[0], sort_keys=True, default=str)
               for v in values[1:]):
            rows.append({"key": k, **{n: "" if v == "" else json.dumps(v, default=str) if not isinstance(v, str) else v
                                      for n, v in zip(flat, values)},
                         "world": k.split(".")[0] in WORLD_SECTIONS})
    return pd.DataFrame(rows, columns=["key", *flat, "world"])


def world_warning(diff: pd.DataFrame) -> str:
    """One line warning that the runs measure different worlds (the world keys of a
    `config_differences` frame, the first five named), "" when they measure the same."""
    world = diff[diff["world"]]["key"].tolist() if len(diff) else []
    if not world:
        return ""
    return (f"WARNING: the runs are different worlds ({len(world)} of the {', '.join(WORLD_SECTIONS)} settings differ: "
            f"{', '.join(world[:5])}{' ...' if len(world) > 5 else ''}): their numbers measure different quantities, "
            "so 'moved' says nothing about reproducibility.")


#: Packages the runs table always names (with their recorded versions); any other recorded
#: package is named where its version differs between the runs.
SHOWN_PACKAGES = ("python", "torch", "numpy", "snakemake")


def packages_text(records: Mapping[str, Mapping | None]) -> dict[str, str]:
    """Per run, "torch 2.4.1, numpy 2.1.0, ...": the `SHOWN_PACKAGES` and every other package
    whose recorded version (a provenance record's ``packages``) differs between the runs; "?"
    for a run whose record lists no packages."""
    packages = {name: (rec or {}).get("packages") or {} for name, rec in records.items()}
    listed = [p for p in dict.fromkeys(p for pk in packages.values() for p in pk)]
    differ = [p for p in listed if len({str(pk.get(p)) for pk in packages.values()}) > 1]
    names = [p for p in SHOWN_PACKAGES if p in listed] + [p for p in differ if p not in SHOWN_PACKAGES]
    return {name: ", ".join(f"{p} {pk.get(p) or '-'}" for p in names) if pk else "?"
            for name, pk in packages.items()}


def _seconds(s: float) -> str:
    return "?" if not math.isfinite(s) else f"{s:,.0f} s" if s >= 100 else f"{s:.1f} s"


def comparison_warnings(diff: pd.DataFrame, worlds: pd.DataFrame | None = None) -> list[str]:
    """The warnings above a comparison: the world check's (`oracle.tools.world_check.worlds_text`
    of `worlds`, a `compare_worlds` frame) when the worlds differ, and the config's
    (`world_warning` of `diff`) unless the world check found every world the same by its
    content: then the world settings that differ did not change a world (its sample sizes, the
    training data of an imported flow)."""
    from oracle.tools.world_check import worlds_text

    checked = worlds is not None and len(worlds) > 0
    same = checked and bool((worlds["status"] == "same").all())
    out = [] if same else [w for w in (world_warning(diff),) if w]
    text = worlds_text(worlds) if checked else ""
    return out + ([text] if text.startswith("WARNING") else [])


def run_metadata(records: Mapping[str, Mapping | None], configs: Mapping[str, Mapping],
                 timings: Mapping[str, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """One row per run: run, commit (12 hex, "+dirty" with uncommitted changes), date (UTC),
    machine (host and device), seed, config sha256 (12 hex), wall time and job-seconds (from
    `timings`: {run: `oracle.report.timings.recorded_timing`}; "?" where unrecorded) and
    package versions (`packages_text`), from the provenance record of each run's numbers.json
    (`records`, None when it has none: "?") and its config."""
    rows = []
    packages = packages_text(records)
    for name, rec in records.items():
        rec = rec or {}
        code = rec.get("code") or {}
        commit = str(code.get("commit") or "?")[:12] + ("+dirty" if code.get("dirty") else "")
        machine = " ".join(str(v) for v in (rec.get("hostname"), f"({rec['device']})" if rec.get("device") else None)
                           if v) or "?"
        rows.append({"run": name, "commit": commit, "date": rec.get("created_utc") or "?", "machine": machine,
                     "seed": configs.get(name, {}).get("seed", "?"),
                     "config": str(rec.get("params_sha256") or rec.get("config_sha256") or "?")[:12],
                     "wall time": _seconds((timings or {}).get(name, {}).get("wall_s", math.nan)),
                     "job-seconds": _seconds((timings or {}).get(name, {}).get("job_s", math.nan)),
                     "packages": packages[name]})
    return pd.DataFrame(rows, columns=["run", "commit", "date", "machine", "seed", "config", "wall time",
                                       "job-seconds", "packages"])


def numbers_by_run(numbers: Mapping[str, Mapping[str, Mapping]]) -> pd.DataFrame:
    """A table of runs by number (`numbers`: {run name: numbers.json}): one row per key of any
    run, one column per run with "value ± spread" (`entry_spread`; "-" where the run lacks it
    or it is not a number), and the unit; keys in order."""
    keys = sorted(set().union(*[set(n) for n in numbers.values()])) if numbers else []
    rows = []
    for k in keys:
        row = {"key": k}
        for name, nums in numbers.items():
            e = nums.get(k)
            v = _value(e) if e is not None else math.nan
            s = entry_spread(e)[0] if isinstance(e, Mapping) else math.nan
            row[name] = _num(v) + (f" ± {s:.2g}" if math.isfinite(v) and math.isfinite(s) else "")
            if isinstance(e, Mapping) and e.get("unit") and "unit" not in row:
                row["unit"] = e["unit"]
        rows.append({**row, "unit": row.get("unit", "")})
    return pd.DataFrame(rows, columns=["key", *numbers, "unit"])


def claims_by_run(claims: Mapping[str, pd.DataFrame | None]) -> pd.DataFrame:
    """The verdict of each finding in each run (`claims`: {run name: claims.csv frame or None}),
    with the run's value ("this run" column, where there is one) beside it: one row per finding,
    per run a column "<run>" (verdict) and "<run> value"; ``same`` says whether every run with
    claims gave it one verdict."""
    present = {n: c for n, c in claims.items() if c is not None}
    ids = list(dict.fromkeys(i for c in present.values() for i in c["id"].astype(str)))
    rows = []
    for i in ids:
        row = {"id": i}
        for name, c in present.items():
            hit = c[c["id"].astype(str) == i]
            row[name] = str(hit["verdict"].iloc[0]) if len(hit) else ""
            row[f"{name} value"] = str(hit["this run"].iloc[0]) if len(hit) and "this run" in c else ""
        row["same"] = len({row[n] for n in present}) == 1
        rows.append(row)
    return pd.DataFrame(rows, columns=["id", *[c for n in present for c in (n, f"{n} value")], "same"])


def markdown_table(df: pd.DataFrame) -> str:
    """A frame as a Markdown pipe table (cells as text, pipes escaped)."""
    from tabulate import tabulate

    from oracle.report.tables import markdown_cell

    return tabulate([[markdown_cell(v) for v in r] for r in df.astype(str).itertuples(index=False)],
                    headers=[markdown_cell(c) for c in df.columns], tablefmt="pipe", disable_numparse=True) + "\n"


def format_runs_markdown(meta: pd.DataFrame, diff: pd.DataFrame, claims: pd.DataFrame | None,
                         numbers: pd.DataFrame, pair: pd.DataFrame | None = None, z_max: float = 3.0,
                         worlds: pd.DataFrame | None = None, verdicts: pd.DataFrame | None = None) -> str:
    """The comparison of two or more runs as Markdown: the warnings (`comparison_warnings`: of
    the config and of `worlds`, a `compare_worlds` frame), the runs' metadata, the world check
    per world, the config keys that differ, the claims side by side, then for two runs the
    numbers with B - A, z and flag (`pair`, a `compare_numbers` frame; its summary counts
    `verdicts`, a `compare_claims` frame) and for more a table of runs by number."""
    from oracle.tools.world_check import worlds_text

    parts = []
    for warning in comparison_warnings(diff, worlds):
        parts += [f"**{warning}**", ""]
    parts += ["## Runs", "", markdown_table(meta)]
    if worlds is not None and len(worlds):
        text = worlds_text(worlds)  # a warning stands above the runs already
        parts += ["## Worlds", "", *([] if text.startswith("WARNING") else [text, ""]), markdown_table(worlds)]
    parts += ["## Config differences", "",
              markdown_table(diff.drop(columns="world")) if len(diff) else "The effective configs are the same.\n"]
    if claims is not None and len(claims):
        parts += ["## Claims", "", markdown_table(claims)]
    parts += ["## Numbers", ""]
    if pair is not None:
        parts += [flag_counts(pair, verdicts) + f" (moved: |z| > {z_max:g}).", "",
                  markdown_table(pair.assign(**{c: pair[c].map(_num) for c in ("a", "b", "diff", "z")})[
                      ["flag", "key", "a", "b", "diff", "z", "unit", "spread"]])]
    else:
        parts += [markdown_table(numbers)]
    return "\n".join(parts)


def format_runs_html(meta: pd.DataFrame, diff: pd.DataFrame, claims: pd.DataFrame | None, numbers: pd.DataFrame,
                     pair: pd.DataFrame | None = None, z_max: float = 3.0, worlds: pd.DataFrame | None = None,
                     verdicts: pd.DataFrame | None = None) -> str:
    """The comparison as one self-contained HTML page (`format_runs_markdown`'s arguments): the
    warnings, the runs, the world check, the config keys that differ, the claims side by side
    (per run its verdict, in the verdict's colour, and its value; whether they agree), then for
    two runs the summary and the numbers that did not agree (flagged), for more every number."""
    import html

    from oracle.report.html_report import page_html, table_html
    from oracle.tools.world_check import worlds_text

    def table(df: pd.DataFrame, verdict_columns: tuple[int, ...] = ()) -> str:
        return table_html(list(df.columns), df.astype(str).values.tolist(), verdict_columns)

    def section(title: str, *parts: str) -> str:
        return f"<section><h2>{html.escape(title)}</h2>{''.join(parts)}</section>"

    def note(text: str) -> str:
        strong = text.startswith("WARNING")
        return f'<p class="note">{"<strong>" if strong else ""}{html.escape(text)}{"</strong>" if strong else ""}</p>'

    world_line = worlds_text(worlds) if worlds is not None else ""
    header = "".join(note(w) for w in comparison_warnings(diff, worlds)) + table(meta)
    body = []
    if worlds is not None and len(worlds):
        body.append(section("Worlds", "" if world_line.startswith("WARNING") else note(world_line), table(worlds)))
    body.append(section("Config differences", table(diff.drop(columns="world")) if len(diff)
                        else note("The effective configs are the same.")))
    if claims is not None and len(claims):
        side = claims.assign(same=claims["same"].map({True: "same", False: "verdict changed"}))
        runs = tuple(i for i, c in enumerate(side.columns) if c not in ("id", "same") and not c.endswith(" value"))
        body.append(section("Claims", table(side, runs)))
    if pair is not None:
        shown = pair[~pair["flag"].isin(AGREE)]
        body.append(section("Numbers", note(flag_counts(pair, verdicts) + f" (moved: |z| > {z_max:g})."),
                            table(shown.assign(**{c: shown[c].map(_num) for c in ("a", "b", "diff", "z")})[
                                ["flag", "key", "a", "b", "diff", "z", "unit", "spread"]]) if len(shown) else ""))
    else:
        body.append(section("Numbers", table(numbers)))
    return page_html(f"Runs compared: {', '.join(meta['run'])}", header, "\n".join(body))
