"""A small JSON Schema checker for the data files users hand us (fix record, validation result,
baseline), driven by the schema files in `migrator/schema/` so the file stays the one contract.

`jsonschema` is a test dependency only; this covers the keywords our own schemas use
(`type`, `enum`, `const`, `required`, `properties`, `additionalProperties`, `items`, `minimum`,
`minLength`, `pattern`, `anyOf`, `$ref` to `#/$defs/...`) and refuses any other keyword, so a schema
edit cannot silently outgrow it (tests check every schema against both this and `jsonschema`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from migrator.resources import schema_path

SUPPORTED = {
    "$schema", "$id", "$defs", "$ref", "title", "description", "type", "enum", "const", "required",
    "properties", "additionalProperties", "items", "minimum", "minLength", "pattern", "anyOf",
    "examples", "default",
}
_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


class SchemaMismatch(ValueError):
    """The data does not follow the schema; the message names the JSON path and the rule broken."""


@cache
def load_schema(name: str) -> dict[str, Any]:
    schema = json.loads(schema_path(name).read_text(encoding="utf-8"))
    unknown = sorted(_keywords(schema) - SUPPORTED)
    if unknown:  # pragma: no cover - guarded by tests
        raise ValueError(f"schema {name} uses keywords this checker does not support: {unknown}")
    return schema


def _keywords(node: Any, in_properties: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if not in_properties:
                found.add(key)
            if key in ("properties", "$defs") and not in_properties:
                for sub in value.values():
                    found |= _keywords(sub)
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                found |= _keywords(value)
            elif key == "anyOf":
                for sub in value:
                    found |= _keywords(sub)
    return found


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def _where(path: tuple) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def check(data: Any, schema_name: str) -> None:
    """Raise SchemaMismatch with the first problem found, or return None."""
    schema = load_schema(schema_name)
    _check(data, schema, schema, ())


def _check(value: Any, node: dict[str, Any], root: dict[str, Any], path: tuple) -> None:
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/$defs/"):  # pragma: no cover - guarded by tests
            raise ValueError(f"unsupported $ref {ref}")
        _check(value, root["$defs"][ref.split("/")[-1]], root, path)
    where = _where(path)
    if "anyOf" in node:
        errors = []
        for option in node["anyOf"]:
            try:
                _check(value, option, root, path)
                break
            except SchemaMismatch as exc:
                errors.append(str(exc))
        else:
            raise SchemaMismatch(errors[0] if len(errors) == 1 else f"{where}: matches none of: " + "; ".join(errors))
    if "type" in node:
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_is_type(value, t) for t in types):
            raise SchemaMismatch(f"{where}: expected {' or '.join(types)}, got {_describe(value)}")
    if "const" in node and value != node["const"]:
        raise SchemaMismatch(f"{where}: must be {json.dumps(node['const'])}, got {_describe(value)}")
    if "enum" in node and value not in node["enum"]:
        choices = ", ".join(json.dumps(c) for c in node["enum"])
        raise SchemaMismatch(f"{where}: must be one of {choices}, got {_describe(value)}")
    if "minimum" in node and _is_type(value, "number") and value < node["minimum"]:
        raise SchemaMismatch(f"{where}: must be at least {node['minimum']}, got {value}")
    if isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            raise SchemaMismatch(f"{where}: must not be empty" if node["minLength"] == 1 else f"{where}: too short")
        if "pattern" in node and not re.search(node["pattern"], value):
            raise SchemaMismatch(f"{where}: {value!r} does not match {node['pattern']}")
    if isinstance(value, dict):
        for key in node.get("required", ()):
            if key not in value:
                raise SchemaMismatch(f"{where}: missing required key {key!r}")
        props = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], root, (*path, key))
            elif extra is False:
                raise SchemaMismatch(f"{where}: unexpected key {key!r} (allowed: {', '.join(props)})")
            elif isinstance(extra, dict):
                _check(item, extra, root, (*path, key))
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, node["items"], root, (*path, i))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        short = value if len(value) <= 40 else value[:37] + "..."
        return f"string {short!r}"
    return type(value).__name__.replace("dict", "object").replace("list", "array")
