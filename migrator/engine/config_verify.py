"""Verifying a config edit: re-parse the edited text and accept it only when exactly the intended
values changed (plain data for JSON/TOML; for YAML, the node graph with tags, anchors and aliases)."""

from __future__ import annotations

import bisect
from typing import Any

import yaml

from migrator.engine.config_checker import ConfigHit
from migrator.engine.config_reader import ConfigParseError, ParsedConfig, parse_config


def verify(before: ParsedConfig, after_text: str, hits: list[ConfigHit]) -> str | None:
    """None when re-parsing `after_text` shows exactly the intended changes, else why not."""
    try:
        after = parse_config(after_text, before.fmt)
    except ConfigParseError as exc:
        return f"the edited file would not parse ({exc})"
    if before.fmt == "yaml":
        return _verify_yaml(before, after, hits)
    expected = [_clone(d) for d in before.docs]
    for h in hits:
        expected = _apply_at(expected, h)
    if expected != after.docs:
        return "re-reading the edited file shows other changes than the intended ones"
    return None


def _clone(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_clone(v) for v in obj]
    return obj


def _apply_at(docs: list[Any], hit: ConfigHit) -> list[Any]:
    """The plain data with one edit applied where the hit points (a value, or a mapping key)."""
    container: Any = docs
    key: Any = hit.path[0]
    for part in hit.path[1:]:
        container, key = container[key], part
    if hit.is_key:
        items = list(container.items())
        container.clear()
        for k, v in items:
            container[k.replace(hit.old, hit.replacement) if k == key else k] = v
    elif hit.old == container[key]:
        container[key] = hit.replacement
    else:
        container[key] = container[key].replace(hit.old, hit.replacement, 1)
    return docs


def _yaml_signature(roots: list[Any], text: str, changes: dict[int, list[tuple[str, str]]] | None = None) -> list[tuple]:
    """Every node once, in document order: kind, tag, value (scalars), alias references by ordinal.
    `changes` maps a scalar's start offset to (old, new) substrings applied to its value."""
    order: dict[int, int] = {}
    sig: list[tuple] = []

    def visit(node: yaml.Node | None) -> None:
        if node is None:
            sig.append(("empty",))
            return
        if id(node) in order:
            sig.append(("ref", order[id(node)]))
            return
        order[id(node)] = len(order)
        if isinstance(node, yaml.ScalarNode):
            value = node.value
            if changes and node.start_mark.index in changes:
                for old, new in changes[node.start_mark.index]:
                    value = value.replace(old, new, 1) if old != value else new
            sig.append(("s", node.tag, value))
        elif isinstance(node, yaml.MappingNode):
            sig.append(("m", node.tag, len(node.value)))
            for k, v in node.value:
                visit(k)
                visit(v)
        else:
            sig.append(("q", node.tag, len(node.value)))
            for item in node.value:
                visit(item)

    for root in roots:
        sig.append(("doc",))
        visit(root)
    return sig


def _verify_yaml(before: ParsedConfig, after: ParsedConfig, hits: list[ConfigHit]) -> str | None:
    by_scalar: dict[int, list[tuple[str, str]]] = {}
    spans = sorted({(e.scalar.start, e.scalar.end) for e in before.entries if e.scalar.start >= 0})
    starts = [start for start, _ in spans]
    for h in hits:
        i = bisect.bisect_right(starts, h.start) - 1
        if i < 0 or not (spans[i][0] <= h.start and h.end <= spans[i][1]):
            return "no parsed value at the edited position"
        assert h.replacement is not None, "only exact rewrites are verified"
        by_scalar.setdefault(spans[i][0], []).append((h.old, h.replacement))
    expected = _yaml_signature(before.yaml_roots, before.text, by_scalar)
    if expected != _yaml_signature(after.yaml_roots, after.text):
        return "re-reading the edited YAML shows other changes than the intended ones"
    return None
