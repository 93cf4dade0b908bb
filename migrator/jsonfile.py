"""Reading the tool's own JSON files (baselines, fix records, validation results) with one clear
message per problem, naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, what: str, error: type[Exception], hint: str = "") -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {what} not found{hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {what}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: the {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def read_json_or_none(path: Path) -> Any:
    """For files that are optional and advisory: None when missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
