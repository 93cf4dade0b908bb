"""Checking the data files users hand us (fix record, validation result, baseline) against the schema
files in `migrator/ground/schema/` (the one contract), with `jsonschema` (Draft 2020-12).

`jsonschema` is imported on first use: scanning never loads it. The message names the JSON path of
the most relevant problem (`jsonschema.exceptions.best_match`) and what is wrong there.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

import json
from functools import cache
from typing import Any

from migrator.ground.resources import schema_path


class SchemaMismatch(ValueError):
    """The data does not follow the schema; the message names the JSON path and the rule broken."""


@cache
def load_schema(name: str) -> dict[str, Any]:
    return json.loads(schema_path(name).read_text(encoding="utf-8"))


@cache
def _validator(name: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _where(path: Iterable[str | int]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def check(data: Any, schema_name: str) -> None:
    """Raise SchemaMismatch naming the most relevant problem, or return None."""
    from jsonschema.exceptions import best_match

    error = best_match(_validator(schema_name).iter_errors(data))
    if error is not None:
        raise SchemaMismatch(f"{_where(error.absolute_path)}: {error.message}")
