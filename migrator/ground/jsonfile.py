"""Reading the tool's own JSON files (baselines, fix records, validation results) with one clear
message per problem, naming the file. Read through :mod:`migrator.ground.input_files` (a regular file under a
size cap, inside ``root`` when one is given); nesting deeper than :data:`MAX_DEPTH` and numbers with more
digits than Python converts are refused like invalid JSON, naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from migrator.ground.input_files import MAX_TOOL_FILE_BYTES, read_text

MAX_DEPTH = 200  # our own files and configs nest a handful of levels

# What json.load gives and json.dump takes: for data that really is JSON at a file boundary (a job or status
# file, dump.json, validation.json); structured data inside the tool has a dataclass or TypedDict of its own
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject = dict[str, JsonValue]


def depth_over(data: Any, limit: int) -> bool:
    """Whether lists/dicts nest deeper than ``limit`` (walked without recursion)."""
    todo = [(data, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, (list, dict)):
            if depth > limit:
                return True
            todo.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return False


def loads_bounded(text: str) -> Any:
    """`json.loads`, with nesting over MAX_DEPTH and over-long numbers as `ValueError` with the reason
    (the C decoder stops at the recursion limit with a RecursionError; what it accepts is walked)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of more than 4 300 digits
        raise ValueError(str(exc)) from None
    if depth_over(data, MAX_DEPTH):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return data


def read_json(path: Path, what: str, error: type[Exception], hint: str = "", root: Path | None = None) -> Any:
    try:
        text = read_text(path, MAX_TOOL_FILE_BYTES, root)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found{hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {what}: {exc}") from None
    try:
        return loads_bounded(text)
    except ValueError as exc:
        raise error(f"{path}: the {what} is not valid JSON ({exc})") from None


def read_json_or_none(path: Path, root: Path | None = None) -> Any:
    """For files that are optional and advisory: None when missing, unreadable or refused."""
    try:
        return loads_bounded(read_text(path, MAX_TOOL_FILE_BYTES, root))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
