"""Configs read with positions: YAML (PyYAML's composer marks), JSON (a small positional scanner
over what `json` accepted) and TOML (`tomllib` for the data, `tomlkit` for where each value and key
is written). Every scalar and key keeps its character span, so a fix replaces exactly those
characters and the rest of the file (order, comments, quoting, layout) stays as it was.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from migrator.engine import toml_positions
from migrator.ground.jsonfile import depth_over, loads_bounded

if TYPE_CHECKING:  # yaml is imported where a YAML config is read: most scans read none
    import yaml


class ConfigParseError(ValueError):
    """The file does not parse as its format says; it is skipped, not reported."""


@dataclass(eq=False)
class Scalar:
    value: Any
    is_str: bool
    start: int  # character offsets of the scalar's source text; -1 when unknown (TOML keys)
    end: int
    ident: int  # YAML aliases share one Scalar


@dataclass(frozen=True)
class Entry:
    path: tuple  # keys and list indices from the document root (YAML: document index first)
    key: str | None  # nearest mapping key (a list item inherits its list's key)
    scalar: Scalar
    is_key: bool


@dataclass
class ParsedConfig:
    fmt: str
    text: str
    docs: list[Any]  # plain data, one per document
    entries: list[Entry] = field(default_factory=list)
    yaml_roots: list[Any] = field(default_factory=list)
    containers: dict[tuple, tuple[int, int]] = field(default_factory=dict)  # JSON: path -> span of {...} / [...]


def config_format(rel: str) -> str:
    lower = rel.lower()
    if lower.endswith(".json"):
        return "json"
    if lower.endswith(".toml"):
        return "toml"
    return "yaml"


def parse_config(text: str, fmt: str) -> ParsedConfig:
    if fmt == "json":
        return _parse_json(text)
    if fmt == "toml":
        return _parse_toml(text)
    return _parse_yaml(text)


def _yaml_value(node: yaml.ScalarNode) -> tuple[Any, bool]:
    tag = node.tag or ""
    if tag.endswith(":str"):
        return node.value, True
    if tag.endswith(":bool"):
        return node.value.lower() in ("true", "yes", "on", "y"), False
    if tag.endswith(":null"):
        return None, False
    return node.value, False


MAX_DEPTH = 200  # configs nest a handful of levels; the walks below recurse


def _check_yaml_size(roots: list[Any], text: str) -> None:
    """ConfigParseError when the documents, every alias expanded, hold more nodes than the text could
    spell out (an alias bomb: 633 bytes of nested aliases are 2^28 strings) or nest over MAX_DEPTH.
    Counted without recursion and stopped at the budget, so the check itself is bounded."""
    import yaml

    budget = max(100_000, len(text))
    count = 0
    todo = [(root, 1) for root in roots if root is not None]
    while todo:
        node, depth = todo.pop()
        count += 1
        if count > budget:
            raise ConfigParseError(f"its aliases expand to more than {budget} nodes (an alias bomb?)")
        if depth > MAX_DEPTH:
            raise ConfigParseError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode):
            todo.extend((part, depth + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((item, depth + 1) for item in node.value)


def _parse_yaml(text: str) -> ParsedConfig:
    import yaml

    # libyaml when PyYAML has it (twice as fast); its marks count characters like the pure loader's
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        roots = list(yaml.compose_all(text, Loader=loader))
        _check_yaml_size(roots, text)
        constructor = yaml.constructor.SafeConstructor()
        docs = [constructor.construct_document(root) if root is not None else None for root in roots]
    except yaml.YAMLError as exc:
        raise ConfigParseError(f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except (ValueError, RecursionError) as exc:
        raise ConfigParseError(f"invalid YAML: {exc}") from None
    parsed = ParsedConfig("yaml", text, docs, yaml_roots=roots)
    walker = _YamlEntries(parsed)
    for index, root in enumerate(roots):
        if root is not None:
            walker.walk(root, (index,), None, set())
    return parsed


class _YamlEntries:
    """Appends a YAML document's keys and scalars to `parsed.entries`, one Scalar per node."""

    def __init__(self, parsed: ParsedConfig) -> None:
        self.parsed = parsed
        self.scalars: dict[int, Scalar] = {}

    def scalar(self, node: yaml.ScalarNode) -> Scalar:
        got = self.scalars.get(id(node))
        if got is None:
            value, is_str = _yaml_value(node)
            got = self.scalars[id(node)] = Scalar(value, is_str, node.start_mark.index, node.end_mark.index, id(node))
        return got

    def walk(self, node: yaml.Node, path: tuple[Any, ...], key: str | None, active: set[int]) -> None:
        import yaml

        if id(node) in active:
            return  # a recursive alias
        if isinstance(node, yaml.ScalarNode):
            self.parsed.entries.append(Entry(path, key, self.scalar(node), False))
        elif isinstance(node, yaml.MappingNode):
            self.mapping(node, path, key, active | {id(node)})
        elif isinstance(node, yaml.SequenceNode):
            active = active | {id(node)}
            for i, item in enumerate(node.value):
                self.walk(item, path + (i,), key, active)

    def mapping(self, node: yaml.MappingNode, path: tuple[Any, ...], key: str | None, active: set[int]) -> None:
        import yaml

        for k, v in node.value:
            if k.tag == "tag:yaml.org,2002:merge":
                for base in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                    self.walk(base, path, key, active)  # merged keys act as keys of this mapping
                continue
            name = k.value if isinstance(k, yaml.ScalarNode) else None
            if isinstance(k, yaml.ScalarNode):
                self.parsed.entries.append(Entry(path + (name,), name, self.scalar(k), True))
            self.walk(v, path + (name,), name, active)


_JSON_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null|NaN|-?Infinity")
_JSON_WS = re.compile(r"[ \t\n\r]*")
# the decoder's own string scanner (returns the decoded string and the index past it); not in typeshed
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]


def _parse_json(text: str) -> ParsedConfig:
    try:
        data = loads_bounded(text)
    except ValueError as exc:  # invalid, nested over MAX_DEPTH, or a number of over 4 300 digits
        raise ConfigParseError(f"invalid JSON: {exc}") from None
    parsed = ParsedConfig("json", text, [data])
    _JsonEntries(parsed, text).value(0, (0,), None)
    return parsed


class _JsonEntries:
    """Appends a JSON text's keys and scalars to `parsed.entries` and each container's span to
    `parsed.containers`, reading the (already validated) text once more for positions."""

    def __init__(self, parsed: ParsedConfig, text: str) -> None:
        self.parsed = parsed
        self.text = text
        self.counter = iter(range(1 << 62))

    def ws(self, i: int) -> int:
        return _JSON_WS.match(self.text, i).end()  # type: ignore[union-attr]  # `[ ...]*` always matches

    def value(self, i: int, path: tuple[Any, ...], key: str | None) -> int:
        """Index past the value that starts at (or after whitespace from) `i`."""
        text = self.text
        i = self.ws(i)
        c = text[i]
        if c in "{[":
            start, i = i, self.ws(i + 1)
            if text[i] in "}]":
                end = i + 1
            else:
                end = self.object_items(i, path) if c == "{" else self.array_items(i, path, key)
            self.parsed.containers[path] = (start, end)
            return end
        if c == '"':
            s, end = _scanstring(text, i + 1)
            self.parsed.entries.append(Entry(path, key, Scalar(s, True, i, end, next(self.counter)), False))
            return end
        m = _JSON_LITERAL.match(text, i)
        assert m is not None, "json.loads accepted the text, so a literal starts here"
        scalar = Scalar(json.loads(m.group(0)), False, i, m.end(), next(self.counter))
        self.parsed.entries.append(Entry(path, key, scalar, False))
        return m.end()

    def object_items(self, i: int, path: tuple[Any, ...]) -> int:
        """Index past the `}` of a non-empty object whose first key starts at `i`."""
        while True:
            i = self.ws(i)
            name, end = _scanstring(self.text, i + 1)
            scalar = Scalar(name, True, i, end, next(self.counter))
            self.parsed.entries.append(Entry(path + (name,), name, scalar, True))
            i = self.ws(end) + 1  # past ':'
            i = self.ws(self.value(i, path + (name,), name))
            if self.text[i] != ",":
                return i + 1  # past '}'
            i += 1

    def array_items(self, i: int, path: tuple[Any, ...], key: str | None) -> int:
        """Index past the `]` of a non-empty array whose first item starts at `i`."""
        index = 0
        while True:
            i = self.ws(self.value(i, path + (index,), key))
            index += 1
            if self.text[i] != ",":
                return i + 1  # past ']'
            i += 1


def _parse_toml(text: str) -> ParsedConfig:
    tomllib = toml_positions.reader()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigParseError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigParseError("nested too deeply for the TOML reader") from None
    if depth_over(data, MAX_DEPTH):
        raise ConfigParseError(f"nested deeper than {MAX_DEPTH} levels")
    parsed = ParsedConfig("toml", text, [data])
    counter = iter(range(1 << 62))
    values: dict[tuple, Scalar] = {}  # document path -> scalar, for every value that is not a table
    keys: list[tuple[tuple, Scalar, int]] = []  # (path of the value the key is read before, key, depth)

    def walk(obj: Any, path: tuple, key: str | None) -> None:
        if isinstance(obj, dict):
            for name, v in obj.items():
                scalar = Scalar(name, True, -1, -1, next(counter))
                parsed.entries.append(Entry((0, *path, name), name, scalar, True))
                keys.append(_key_anchor(v, (*path, name), scalar))
                walk(v, (*path, name), name)
        elif isinstance(obj, list):
            for i, item in enumerate(obj):
                walk(item, (*path, i), key)
        else:
            scalar = Scalar(obj, isinstance(obj, str), -1, -1, next(counter))
            values[path] = scalar
            parsed.entries.append(Entry((0, *path), key, scalar, False))

    walk(data, (), None)
    spans = toml_positions.value_spans(text, [*values, *(anchor for anchor, _, _ in keys)])
    for path, scalar in values.items():
        scalar.start, scalar.end = spans.get(path, (-1, -1))
    for anchor, scalar, depth in keys:
        if anchor in spans and (span := toml_positions.key_span(text, spans[anchor][0], scalar.value, depth)):
            scalar.start, scalar.end = span
    return parsed


def _key_anchor(value: Any, path: tuple, key: Scalar) -> tuple[tuple, Scalar, int]:
    """A key is found just before a value it names: its own, or the first one under a dotted key
    (`name.sub = 1`); the depth counts the dotted parts between the key and that value."""
    depth = 0
    while isinstance(value, dict) and value:
        first = next(iter(value))
        value, path, depth = value[first], (*path, first), depth + 1
    return path, key, depth

# ---- positions and edits ------------------------------------------------------------------------

_NEWLINE = re.compile(r"\r\n|\r|\n")


class LineIndex:
    """Character offset -> 1-based (line, column), counting `\\r\\n`, `\\r`, `\\n` as line breaks."""

    def __init__(self, text: str):
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def position(self, offset: int) -> tuple[int, int]:
        if offset < 0:
            return 1, 1
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line] + 1


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    return text
