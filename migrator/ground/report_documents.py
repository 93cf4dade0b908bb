"""Read models of the two documents `migrate report` embeds: a validation result
(`migrator/ground/schema/validation.schema.json`, written by `migrate validate` or another tool) and a plan
(`plan.schema.json`, `migrate plan -o`).

Each wraps the parsed JSON after `report_data` checked it against its schema; the dict stays private
and the renderers read it only through these accessors, which give a documented default where the
schema leaves a key optional. Stage rows stay mappings (read-only views): the schema lets other tools
add keys, and `reporters/validation_view.py` picks out what it shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from migrator.ground.jsonfile import JsonObject, JsonValue

Row = Mapping[str, Any]  # a stage, check or tensor row: other tools may add keys (the schema allows it)


def _mapping(value: JsonValue) -> Row:
    return MappingProxyType(value) if isinstance(value, dict) else MappingProxyType({})


@dataclass(frozen=True)
class ValidationDocument:
    """A validation result that matched validation.schema.json (`stages` is required there)."""

    _data: JsonObject

    @property
    def stages(self) -> tuple[Row, ...]:
        """S0..S3 as written, each with at least `id`, `name`, `status`, `worst` (the schema's required keys)."""
        stages = self._data.get("stages")
        return tuple(_mapping(st) for st in stages if isinstance(st, dict)) if isinstance(stages, list) else ()

    @property
    def written_by_migrate(self) -> bool:
        """`tool.command == "migrate validate"`: its Markdown repeats the stages (not shown twice)."""
        tool = self._data.get("tool")
        return isinstance(tool, dict) and tool.get("command") == "migrate validate"

    @property
    def markdown(self) -> str | None:
        text = self._data.get("markdown")
        return text if isinstance(text, str) else None

    @property
    def scaling(self) -> list[JsonValue]:
        """`bench.scaling`: 1 card -> N ranks rows (empty when not benchmarked)."""
        bench = self._data.get("bench")
        rows = bench.get("scaling") if isinstance(bench, dict) else None
        return list(rows) if isinstance(rows, list) else []

    def text(self, key: str) -> str:
        """A top-level string field (`original`, `migrated`), "" when absent."""
        value = self._data.get(key)
        return str(value) if value else ""

    @property
    def exit_code(self) -> int | None:
        code = self._data.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    @property
    def layers(self) -> Row:
        """Reference layers per side (`original` / `migrated`: layer -> what stood in)."""
        return _mapping(self._data.get("layers"))

    @property
    def notes(self) -> tuple[str, ...]:
        notes = self._data.get("notes")
        return tuple(str(n) for n in notes if n) if isinstance(notes, list) else ()


@dataclass(frozen=True)
class PlanDocument:
    """A `migrate plan -o` document that matched plan.schema.json (`markdown` is required there)."""

    _data: JsonObject

    @property
    def markdown(self) -> str:
        text = self._data.get("markdown")
        return text if isinstance(text, str) else ""
