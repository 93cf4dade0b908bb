"""JSON output (schema: migrator/ground/schema/findings.schema.json).

A file name that is not valid UTF-8 is written escaped (`\\xNN` per undecodable byte) with the exact
name as base64 in `path_bytes` (`root_bytes` for the root): see `migrator.ground.safe_text.json_safe`.
"""

from __future__ import annotations

from migrator.ground.model import RunResult
from migrator.ground.safe_text import dumps

SCHEMA_VERSION = 1


def render(result: RunResult) -> str:
    from migrator.reporters import effort

    data = {"schema_version": SCHEMA_VERSION, **result.to_dict(), "effort": effort.to_json(result.findings)}
    if result.frameworks:
        from migrator.reporters.routes import totals

        data["route_summary"] = totals(result)
    return dumps(data, indent=2) + "\n"
