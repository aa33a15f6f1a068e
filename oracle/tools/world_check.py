"""Whether two or more runs measured the same worlds (`python -m oracle.tools.compare`).

A world is its frozen flow (or Gaussian world) file plus the parameters that define it: the
class prior pi, the label temperature T and the base temperature tau (DESIGN rule 1). Two runs
measure the same world when the oracle file is byte-identical (its sha256, as the file's
provenance record states it) and those parameters are equal. Anything else changes the world:
another seed, other data or another training schedule retrains the flow, and then every world
constant (``world.<world>.*`` in numbers.json) differs between worlds; a z from the spreads
each run states does not hold that difference, so it is no reproduction check.

The sample sizes and seeds of a world (n_total, test_size, its seed) are not part of it: two
runs drawing other samples from one world estimate the same constants, which z then judges.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

#: The world parameters that define a world besides its oracle file (`world_specs`' keys).
WORLD_PARAMETERS = ("prior", "label_temperature", "base_temperature")
#: numbers.json keys of a world's constants: ``world.<world>.<quantity>``.
CONSTANTS_PREFIX = "world."
#: `compare_worlds`' status of a world.
STATUSES = ("differs", "unknown", "only some runs", "same")


def world_identity(run: str | os.PathLike, config: Mapping) -> dict:
    """What makes a run's worlds what they are: ``checkpoint`` (the oracle file, relative to the
    run folder; None when the config does not say or the file is absent), ``sha256`` (its
    hash by its provenance record, else its bytes; None without a file) and ``worlds`` ({world:
    {prior, label_temperature, base_temperature}}; {} when the config has no complete worlds
    section, e.g. a run without its config.yaml)."""
    from oracle.errors import ConfigError
    from oracle.workflow.plan.paths import world_file
    from oracle.workflow.provenance.input_identity import recorded_sha256
    from oracle.world_specs import world_specs

    run = Path(run)
    try:
        checkpoint = Path(world_file(run.as_posix(), config)).relative_to(run).as_posix()
    except (KeyError, TypeError, AttributeError, ConfigError):
        checkpoint = None
    try:
        worlds = {name: {k: spec.get(k) for k in WORLD_PARAMETERS} for name, spec in world_specs(config).items()}
    except (KeyError, TypeError, AttributeError, ConfigError):
        worlds = {}
    sha = recorded_sha256(run / checkpoint) if checkpoint and (run / checkpoint).is_file() else None
    return {"checkpoint": checkpoint, "sha256": sha, "worlds": worlds}


def _differences(specs: list[dict]) -> list[str]:
    """"tau 0.7 / 1.0" for each world parameter whose value differs between the runs' specs."""
    return [f"{k} {' / '.join(str(s.get(k)) for s in specs)}" for k in WORLD_PARAMETERS
            if any(s.get(k) != specs[0].get(k) for s in specs[1:])]


def compare_worlds(identities: Mapping[str, Mapping]) -> pd.DataFrame:
    """Each world of any run (`identities`: {run: `world_identity`}), one row: world, status
    (`STATUSES`: ``differs`` when the oracle files' hashes or the world parameters differ,
    ``unknown`` when a run records no oracle file, ``only some runs`` when a run lacks the world,
    else ``same``) and why (in words, naming the hashes' first 12 hex digits or the
    parameters); worlds in the first run's order."""
    names = list(dict.fromkeys(w for ident in identities.values() for w in ident["worlds"]))
    shas = [ident["sha256"] for ident in identities.values()]
    files = {ident["checkpoint"] for ident in identities.values() if ident["checkpoint"]}
    # a Gaussian world's file is no flow: name it
    what = "flow checkpoint" if files <= {"oracle/flow.pt"} else f"oracle file ({', '.join(sorted(files))})"
    rows = []
    for world in names:
        present = [ident for ident in identities.values() if world in ident["worlds"]]
        if len(present) < len(identities):
            lacking = [run for run, ident in identities.items() if world not in ident["worlds"]]
            rows.append({"world": world, "status": "only some runs", "why": f"not in {', '.join(lacking)}"})
            continue
        why = _differences([ident["worlds"][world] for ident in present])
        if None not in shas and len(set(shas)) > 1:
            why.insert(0, f"{what} differs (sha256 {' / '.join(s[:12] for s in shas)})")
        if why:
            rows.append({"world": world, "status": "differs", "why": "; ".join(why)})
        elif None in shas:
            lacking = [run for run, ident in identities.items() if ident["sha256"] is None]
            rows.append({"world": world, "status": "unknown",
                         "why": f"no oracle file recorded in {', '.join(lacking)}: cannot tell whether the flow is "
                                "the same"})
        else:
            rows.append({"world": world, "status": "same",
                         "why": f"identical {what} (sha256 {shas[0][:12]}), the same {', '.join(WORLD_PARAMETERS)}"})
    return pd.DataFrame(rows, columns=["world", "status", "why"])


def _grouped(frame: pd.DataFrame) -> str:
    """"base, tau0.7: why; tau1.5: why" - worlds with one reason named together."""
    groups: dict[str, list[str]] = {}
    for r in frame.itertuples():
        groups.setdefault(r.why, []).append(r.world)
    return "; ".join(f"{', '.join(worlds)}: {why}" for why, worlds in groups.items())


def worlds_text(frame: pd.DataFrame) -> str:
    """The world check in one line: a WARNING naming each differing world and why, else that
    the worlds are the same (and why), else what could not be told; "" with no world at all."""
    if frame.empty:
        return ""
    differ = frame[frame["status"] == "differs"]
    if len(differ):
        return ("WARNING: the runs' worlds differ: " + _grouped(differ) + " - differences in world numbers are "
                "between worlds, not a reproduction check.")
    unknown = frame[frame["status"] == "unknown"]
    if len(unknown):
        return "World check: " + _grouped(unknown) + "."
    same = frame[frame["status"] == "same"]
    text = (f"Same worlds: {len(same)} world(s) ({', '.join(same['world'])}) with "
            f"{same['why'].iloc[0]}." if len(same) else "")
    if len(only := frame[frame["status"] == "only some runs"]):
        text += (" " if text else "") + "Not compared: " + _grouped(only) + "."
    return text


def differing_worlds(frame: pd.DataFrame) -> set[str]:
    """The worlds of a `compare_worlds` frame whose status is ``differs``."""
    return set(frame.loc[frame["status"] == "differs", "world"])


def constants_world(key: str, worlds: set[str] | list[str]) -> str | None:
    """The world whose constant a numbers.json key is (``world.<world>.<quantity>``; world names
    may hold dots, so the longest matching name wins), None for any other key."""
    if not key.startswith(CONSTANTS_PREFIX):
        return None
    hits = [w for w in worlds if key.startswith(f"{CONSTANTS_PREFIX}{w}.")]
    return max(hits, key=len) if hits else None
