"""The audit report as text: what `python -m oracle.tools.audit` prints. By default `summary`,
one screen: the number, the files it is read from, the rows it is computed from, their inputs,
the checkpoint and the raw data, one line each, the problems and the verdict; with ``--full``
`render`, the chain from a number or an artifact back to the raw data, each step flagged or ok."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from oracle.workflow.plan.config_paths import config_leaves

#: Characters of a sha256 or commit shown.
SHORT = 12


def code_str(code: Mapping | None) -> str:
    """A record's code version in one phrase: short commit and clean/dirty state."""
    if not code:
        return "unknown"
    commit = str(code.get("commit", "unknown"))
    short = commit[:SHORT] if commit != "unknown" else commit
    dirty = code.get("dirty")
    state = "dirty" if dirty else ("clean" if dirty is False else "?")
    if dirty and code.get("diff_sha256"):
        state += f" diff {code['diff_sha256'][:8]}"
    return f"{short} ({state})"


def _fmt(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else repr(v)


def number_text(num: Mapping[str, Any]) -> str:
    """A numbers.json entry as "0.0121 nats (se 0.0004 over samples; std 0.002 over 5 seeds)":
    the value rounded to its se (else its std; `oracle.report.numbers.round_to_spread`), each
    spread to its own 1-2 significant digits; full precision is in numbers.json and ``--json``."""
    from oracle.report.numbers import round_to_spread

    value = num.get("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        val = f"{value}"
    else:
        ref = num.get("se") if num.get("se") is not None else num.get("std")
        val = round_to_spread(float(value), None if ref is None else float(ref))[0]
        if isinstance(value, int) and ref is None:
            val = str(value)
    if num.get("unit") and num["unit"] != "1":  # "1": dimensionless
        val += f" {num['unit']}"
    spread = []
    std_over = num.get("std_over") or (f"{num['n_seeds']} seeds" if num.get("n_seeds") else None)
    for k, over in (("se", num.get("se_over")), ("std", std_over)):
        if num.get(k) is not None and isinstance(value, (int, float)):
            text = round_to_spread(float(value), float(num[k]))[1]
            spread.append(f"{k} {text}" + (f" over {over}" if over else ""))
    if num.get("ci95") is not None:
        spread.append(f"ci95 {num['ci95']}")
    return val + (f" ({'; '.join(spread)})" if spread else "")


def render(report: Mapping[str, Any]) -> str:
    """The report as an indented, human-readable tree: every artifact of the chain with its
    record (``--full``; `summary` is the default)."""
    lines: list[str] = []
    num = report.get("number")
    if num:
        val = number_text(num)
        lines.append(f"number {num['key']!r} = {val}   (from {num['numbers_file']})")
        if num.get("description"):
            lines.append(f"  {num['description']}")
    lines.append(f"current config: {report.get('config_source') or 'none (config not compared)'}")
    lines.append(f"current code:   {code_str(report.get('code_now'))}")
    lines.append("")

    def node_lines(node: Mapping, depth: int) -> None:
        pad = "    " * depth
        if "ref" in node:
            lines.append(f"{pad}{node['artifact']}  (audited above)")
            return
        status = "FLAGGED" if node["flags"] else "ok"
        if node.get("raw"):
            what = ("missing" if not node["exists"] else "no provenance record" if node.get("unrecorded_output")
                    else "raw input (no provenance record)")
            h = f"  sha256 {node['sha256'][:SHORT]}" if node.get("sha256") else ""
            lines.append(f"{pad}{node['artifact']}  {what}{h}  {status}")
        else:
            lines.append(f"{pad}{node['artifact']}  [rule {node.get('rule')}]  {status}")
            sub = pad + "  | "
            h = node.get("sha256")
            lines.append(f"{sub}sha256   {str(node.get('recorded_sha256'))[:SHORT]} recorded"
                         + (f", {h[:SHORT]} now" if h else ""))
            lines.append(f"{sub}code     {code_str(node.get('code'))}")
            extras = []
            if node.get("seed") is not None:
                extras.append(f"seed {node['seed']}")
            if node.get("wildcards"):
                extras.append("wildcards " + " ".join(f"{k}={v}" for k, v in node["wildcards"].items()))
            if node.get("created_utc"):
                extras.append(f"made {node['created_utc']}")
            if extras:
                lines.append(f"{sub}{'   '.join(extras)}")
            # the params its job ran with (what differs now is among the flags below)
            for i, (k, v) in enumerate(config_leaves(node.get("params") or {})):
                lines.append(f"{sub}{'params   ' if i == 0 else '         '}{k} = {_fmt(v)}")
            for i, inp in enumerate(node["inputs"]):
                h = str(inp["recorded_sha256"])[:SHORT]
                lines.append(f"{sub}{'inputs   ' if i == 0 else '         '}{inp['path']}  {h}  {inp['status']}")
            for msg in node["flags"]:
                lines.append(f"{sub}FLAG: {msg}")
            for msg in node["warnings"]:
                lines.append(f"{sub}warning: {msg}")
        for inp in node.get("inputs", []):
            if "node" in inp:
                node_lines(inp["node"], depth + 1)

    depth = 0
    for node in report.get("number_chain") or []:
        node_lines(node, depth)
        depth += 1
    node_lines(report["tree"], depth)
    lines.append("")
    raw, ckpt = report.get("raw_inputs") or [], report.get("oracle_checkpoints") or []
    lines.append("chain ends at raw data: " + (", ".join(raw) if raw else "none reached"))
    lines.append("oracle checkpoint:      " + (", ".join(ckpt) if ckpt else "none reached"))
    lines.append(f"{report['artifacts']} artifacts audited: {len(report['flags'])} flagged, "
                 f"{len(report['warnings'])} warnings")
    for f in report["flags"]:
        lines.append(f"FLAG     {f['artifact']}: {f['message']}")
    for w in report["warnings"]:
        lines.append(f"warning  {w['artifact']}: {w['message']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the summary
#: At most this many problem lines (FLAG) and warning lines in the summary; the rest are counted.
SUMMARY_FLAGS = 15
SUMMARY_WARNINGS = 5
#: At most this many lines of one artifact's own problems (or warnings) in the summary.
SUMMARY_PER_FILE = 2


def _depths(tree: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, Mapping]]:
    """({artifact: its fewest steps from the tree's root}, {artifact: its node}): an artifact
    reached twice is a node where first met and a reference elsewhere; its level is the nearest."""
    depth: dict[str, int] = {}
    nodes: dict[str, Mapping] = {}
    todo: list[tuple[Mapping, int]] = [(tree, 0)]
    while todo:  # breadth first: the first depth seen is the smallest
        nxt: list[tuple[Mapping, int]] = []
        for node, d in todo:
            depth.setdefault(node["artifact"], d)
            if "ref" in node:
                continue
            nodes[node["artifact"]] = node
            nxt += [(inp["node"], d + 1) for inp in node.get("inputs", []) if "node" in inp]
        todo = nxt
    return depth, nodes


def _csv_rows(path: str) -> int | None:
    """Data rows of a CSV file (its header not counted); None for another file or an unreadable one."""
    import csv

    if not path.endswith(".csv"):
        return None
    try:
        with open(path, newline="") as f:
            return max(sum(1 for _ in csv.reader(f)) - 1, 0)
    except (OSError, csv.Error, UnicodeDecodeError):
        return None


def _kind(node: Mapping, raw: set[str]) -> str:
    """What made an artifact: its rule, or for one without a record "raw" (raw data: one of
    `raw`, the report's ``raw_inputs``), "missing" or "no record"."""
    if not node.get("raw"):
        return f"rule {node.get('rule')}"
    return "missing" if not node["exists"] else "raw" if node["artifact"] in raw else "no record"


def _level(label: str, nodes: list[Mapping], raw: set[str], none: str = "none") -> str:
    """One line for the artifacts of one level of the chain: the artifact itself when it is
    one (with its rows when it is a CSV file), else how many of each kind; then whether each
    passed ("all verified") or how many were flagged."""
    if not nodes:
        return f"{label:<13}{none}"
    flagged = sum(1 for n in nodes if n["flags"])
    if len(nodes) == 1:
        n = nodes[0]
        rows = _csv_rows(n.get("path", "")) if n["exists"] else None
        what = [_kind(n, raw)] + ([f"{rows} rows"] if rows is not None else []) + \
            ([f"sha256 {n['sha256'][:SHORT]}"] if n.get("raw") and n.get("sha256") else [])
        return f"{label:<13}{n['artifact']}  [{', '.join(what)}]  {'FLAGGED' if flagged else 'ok'}"
    kinds: dict[str, int] = {}
    for n in nodes:
        kind = _kind(n, raw).removeprefix("rule ")
        kinds[kind] = kinds.get(kind, 0) + 1
    counts = ", ".join(f"{c} {k}" for k, c in sorted(kinds.items(), key=lambda kc: (-kc[1], kc[0])))
    return f"{label:<13}{len(nodes)} files ({counts}): " + (f"{flagged} FLAGGED" if flagged else "all verified")


def _first(items: list[dict], limit: int, word: str, tag: str) -> list[str]:
    """`items` ({"artifact", "message"}, in the order to show) as at most `limit` lines and one
    counting the rest. A message already shown for another artifact is counted on its line
    ("and 7 more artifacts": a changed setting or code touches every file made with it), and an
    artifact shows at most `SUMMARY_PER_FILE` of its own (the rest counted on its last line), so
    that one file's many differing params do not hide the other files."""
    lines: list[list] = []  # [artifact, message, other artifacts with the message, more of the artifact's]
    by_message: dict[str, list] = {}
    by_artifact: dict[str, list[list]] = {}
    for it in items:
        art, msg = it["artifact"], str(it["message"]).replace("\n", " ")
        if msg in by_message:
            by_message[msg][2] += 1
        elif len(by_artifact.get(art, [])) >= SUMMARY_PER_FILE:
            by_artifact[art][-1][3] += 1
        else:
            lines.append(by_message.setdefault(msg, [art, msg, 0, 0]))
            by_artifact.setdefault(art, []).append(lines[-1])

    def text(art: str, msg: str, others: int, more: int) -> str:
        notes = ([f"and {others} more artifact{'s' * (others > 1)}"] if others else []) + \
            ([f"and {more} more {word} of this file"] if more else [])
        return f"{tag}{art}: {msg}" + (f"  ({'; '.join(notes)})" if notes else "")

    out = [text(*line) for line in lines[:limit]]
    if len(lines) > limit:
        rest = sum(1 + others + more for *_, others, more in lines[limit:])
        out.append(f"... and {rest} more {word} (--full lists every one)")
    return out


def summary(report: Mapping[str, Any]) -> str:
    """The report on one screen (at most 40 lines): the number and its value, the files it is
    read from, the artifact (rows) it is computed from, that artifact's inputs, everything
    further up, the oracle checkpoint and the raw data, one line each with counts; then the
    problems nearest the target first and the warnings (`_first`: a few lines each and a count
    of the rest), and the verdict.
    `render` gives the whole chain (``--full``)."""
    lines: list[str] = []
    num = report.get("number")
    if num:
        lines.append(f"number {num['key']!r} = {number_text(num)}")
        if num.get("description"):
            lines.append(f"  {' '.join(str(num['description']).split())}")
    lines.append(f"current config: {report.get('config_source') or 'none (config not compared)'}")
    lines.append(f"current code:   {code_str(report.get('code_now'))}")
    lines.append("")
    depth, nodes = _depths(report["tree"])
    raw, ckpt = set(report.get("raw_inputs") or []), set(report.get("oracle_checkpoints") or [])
    chain = list(report.get("number_chain") or [])
    if chain:
        flagged = [n["artifact"] for n in chain if n["flags"]]
        lines.append(f"{'read from':<13}" + " <- ".join(n["artifact"] for n in chain) + "  "
                     + (f"FLAGGED: {', '.join(flagged)}" if flagged else "ok"))
    ends = ckpt | raw
    lines.append(_level("rows" if num else "artifact", [nodes[a] for a, d in depth.items() if d == 0 and a in nodes],
                        raw))
    lines.append(_level("inputs", [nodes[a] for a, d in depth.items() if d == 1 and a in nodes and a not in ends],
                        raw, "none with a record of their own"))
    lines.append(_level("upstream", [nodes[a] for a, d in depth.items() if d > 1 and a in nodes and a not in ends],
                        raw))
    lines.append(_level("checkpoint", [nodes[a] for a in depth if a in ckpt and a in nodes], raw, "none reached"))
    lines.append(_level("raw data", [nodes[a] for a in depth if a in raw and a in nodes and a not in ckpt], raw,
                        "none reached"))
    lines.append("")
    # nearest the target first (the number's own files, then the chain level by level): what
    # the first screen shows is what the number rests on most directly
    order = {n["artifact"]: -1 for n in chain}
    flags = sorted(report["flags"], key=lambda f: order.get(f["artifact"], depth.get(f["artifact"], -1)))
    lines += _first(flags, SUMMARY_FLAGS, "problems", "FLAG     ") if flags else ["problems: none"]
    lines += _first(list(report["warnings"]), SUMMARY_WARNINGS, "warnings", "warning  ")
    verdict = "OK" if not report["flags"] else "PROBLEMS"
    lines.append(f"verdict: {verdict}: {report['artifacts']} artifacts audited: {len(report['flags'])} flagged, "
                 f"{len(report['warnings'])} warnings (--full prints the whole chain, artifact by artifact)")
    return "\n".join(lines)
