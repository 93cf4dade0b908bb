"""JSON output (schema: migrator/schema/findings.schema.json)."""

from __future__ import annotations

import json

from migrator.model import RunResult

SCHEMA_VERSION = 1


def render(result: RunResult) -> str:
    data = {"schema_version": SCHEMA_VERSION, **result.to_dict()}
    if result.frameworks:
        from migrator.reporters.routes import totals

        data["route_summary"] = totals(result)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
