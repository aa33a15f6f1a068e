"""The audit report as text: what `python -m oracle.tools.audit` prints (the chain from a
number or an artifact back to the raw data, each step flagged or ok)."""

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
    """The report as an indented, human-readable tree."""
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
