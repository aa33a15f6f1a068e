"""Config paths: the dotted-name syntax every rule uses to declare what its artifacts depend on
(``params: config_keys``), reading values at such keys, projecting a config onto them, and the
canonical hash of a (sub)config.

Syntax: dotted names; ``[name]`` quotes a name holding dots (``classifiers.archs[vit.b16]``);
``[field=value]`` selects a list element (``x.items[name=a]``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from oracle.errors import ConfigError
from oracle.io.atomic import to_jsonable as _jsonable


def quoted(*parts: str) -> str:
    """A config key from its parts: ``quoted("classifiers", "archs", "vit.b16")`` ->
    ``classifiers.archs[vit.b16]``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if "." in p else (f".{p}" if out else p)
    return out


def canonical_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, no whitespace, UTF-8) used for config hashes."""
    return json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def config_hash(cfg: Any) -> str:
    """sha256 hex digest of the canonical JSON of `cfg`."""
    return hashlib.sha256(canonical_json(cfg).encode("utf-8")).hexdigest()


_MISSING = object()

# One part of a config key: a name (".name" or "[name]", the bracket form for names with dots),
# or a list selector "[field=value]" picking the list element whose `field` equals `value`
# ("classifiers.experiments[name=scaling]"). The bracket text has no "]".
_KEY_PART = re.compile(r"\.?([^.\[\]]+)|\[([^\]=]+)=([^\]]*)\]|\[([^\]]+)\]")


def parse_config_key(key: str) -> list[str | tuple[str, str]]:
    """`_parse_config_key` as a new list (parsed once per key: the start-of-run check compares
    thousands of records)."""
    return list(_parse_config_key(key))


@functools.lru_cache(maxsize=4096)
def _parse_config_key(key: str) -> tuple[str | tuple[str, str], ...]:
    """Split a config key into parts: a str per mapping key, ``(field, value)`` per list selector.

    ``"oracle.flow.channels"`` -> ["oracle", "flow", "channels"];
    ``"classifiers.archs[resnet.a1]"`` -> ["classifiers", "archs", "resnet.a1"];
    ``"classifiers.experiments[name=scaling].labels"`` -> ["classifiers", "experiments",
    ("name", "scaling"), "labels"]. Raises ConfigError for an empty or malformed key.
    """
    if not isinstance(key, str) or not key or key.startswith("."):
        raise ConfigError(f"config key {key!r}: expected dotted names like 'oracle.flow.channels'")
    parts: list[str | tuple[str, str]] = []
    pos = 0
    while pos < len(key):
        m = _KEY_PART.match(key, pos)
        if m is None or m.end() == pos or (pos == 0 and m.group(0).startswith(".")):
            raise ConfigError(f"config key {key!r}: cannot parse it at position {pos} "
                              "(expected name, .name, [name] or [field=value])")
        if m.group(1) is not None:
            parts.append(m.group(1))
        elif m.group(2) is not None:
            parts.append((m.group(2), m.group(3)))
        else:
            parts.append(m.group(4))
        pos = m.end()
    return tuple(parts)


def _selector_text(part: tuple[str, str]) -> str:
    return f"[{part[0]}={part[1]}]"


def get_config_value(cfg: Mapping, key: str, default: Any = _MISSING) -> Any:
    """Value at `key` in nested mapping `cfg` (syntax: `parse_config_key`).

    A list selector ``[field=value]`` matches a list element (a mapping whose `field`, as
    text, equals `value`) or, in a recorded subset (`config_subset`), the literal key
    ``"[field=value]"``. Without `default` a missing key raises ConfigError.
    """
    node: Any = cfg
    for part in parse_config_key(key):
        found = _MISSING
        if isinstance(part, str):
            if isinstance(node, Mapping) and part in node:
                found = node[part]
        elif isinstance(node, Mapping) and _selector_text(part) in node:
            found = node[_selector_text(part)]
        elif isinstance(node, (list, tuple)):
            hits = [e for e in node if isinstance(e, Mapping) and part[0] in e and str(e[part[0]]) == part[1]]
            if len(hits) > 1:
                raise ConfigError(f"config key {key!r}: {len(hits)} list elements have {part[0]}={part[1]!r}")
            if hits:
                found = hits[0]
        if found is _MISSING:
            if default is _MISSING:
                shown = part if isinstance(part, str) else _selector_text(part)
                raise ConfigError(f"config key {key!r} not found (missing {shown!r})")
            return default
        node = found
    return node


def config_subset(cfg: Mapping, keys: Iterable[str]) -> dict:
    """Projection of `cfg` onto `keys`, keeping the nesting: ["a.b", "c"] -> {"a": {"b":..}, "c":..}.

    A list selector becomes the literal key ``"[field=value]"``, so `get_config_value` finds it
    again in the subset. Raises ConfigError for a missing key or two keys that overlap as a
    value and a path below it.
    """
    out: dict = {}
    for key in dict.fromkeys(keys):  # a key listed twice is recorded once
        value = get_config_value(cfg, key)
        parts = [p if isinstance(p, str) else _selector_text(p) for p in parse_config_key(key)]
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"config keys overlap: {key!r} lies below another recorded key")
        if parts[-1] in node:
            raise ConfigError(f"config keys overlap: {key!r} lies above another recorded key")
        node[parts[-1]] = _jsonable(value)
    return out


def config_leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of a nested mapping as (dotted key, value)."""
    if isinstance(node, Mapping) and node:
        out = []
        for k, v in node.items():
            out.extend(config_leaves(v, f"{prefix}{k}."))
        return out
    return [(prefix[:-1], node)] if prefix else []


_ABSENT = object()  # a key the current config lacks (not _MISSING: that means "raise")


def compare_config(record: Mapping, current: Mapping, keys: Iterable[str] | None = None) -> list[dict]:
    """[{"key", "recorded" (or "<missing>"), "current" (or "<missing>"), "ok"}], one per key.

    keys: the keys to compare: those the artifact's rule declares now
          (`oracle.workflow.plan.rule_config_keys`), so a key dropped from the record's own
          list still counts; a declared key the record holds no value for differs. None: the
          record's own ``config_keys`` (or every leaf of its ``config`` for records without).
    """
    subset = record.get("config") or {}
    if keys is None:
        keys = record.get("config_keys")
        pairs = ([(k, get_config_value(subset, k, None)) for k in keys] if keys is not None else config_leaves(subset))
    else:
        pairs = [(k, get_config_value(subset, k, _ABSENT)) for k in dict.fromkeys(keys)]
    out = []
    for key, recorded in pairs:
        now = get_config_value(current, key, _ABSENT)
        ok = now is not _ABSENT and recorded is not _ABSENT and _plain(now) == recorded
        out.append({"key": key, "recorded": "<missing>" if recorded is _ABSENT else recorded,
                    "current": "<missing>" if now is _ABSENT else _plain(now), "ok": ok})
    return out


def _plain(v: Any) -> Any:
    return _jsonable(v)
