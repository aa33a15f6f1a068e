"""Config paths: the dotted-name syntax of a config key (as errors and the curve settings name
them), reading the value at such a key, and a nested mapping's leaves by dotted key.

Syntax: dotted names; ``[name]`` quotes a name holding dots (``classifiers.archs[vit.b16]``);
``[field=value]`` selects a list element (``x.items[name=a]``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from oracle.errors import ConfigError


def quoted(*parts: str) -> str:
    """A config key from its parts: ``quoted("classifiers", "archs", "vit.b16")`` ->
    ``classifiers.archs[vit.b16]``."""
    out = ""
    for p in parts:
        out += f"[{p}]" if "." in p else (f".{p}" if out else p)
    return out


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


def config_leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Every leaf of a nested mapping as (dotted key, value)."""
    if isinstance(node, Mapping) and node:
        out = []
        for k, v in node.items():
            out.extend(config_leaves(v, f"{prefix}{k}."))
        return out
    return [(prefix[:-1], node)] if prefix else []
