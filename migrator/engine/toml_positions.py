"""Where a TOML value or key is written: character spans from `tomlkit`'s exact round trip.

`tomllib` gives the data but no positions. tomlkit keeps every byte (its `as_string()` renders the
source back unchanged), so a value is found by replacing it with a unique probe, rendering, and
reading where the probe landed; the value's own text is the original item's `as_string()`, and a
span is kept only where the source holds exactly that text there. A key is read just before the
value it names (`key = value`, `a.key.b = value`, inside `{ ... }`).
"""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

KeyPath = tuple  # keys and list indices from the document root
_SIMPLE_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_KEY_BEFORE_VALUE = re.compile(rf"(?P<key>{_SIMPLE_KEY}(?:[ \t]*\.[ \t]*{_SIMPLE_KEY})*)[ \t]*=[ \t]*\Z")
_SEGMENT = re.compile(_SIMPLE_KEY)
# tomlkit reads about 40 KB a second here; past this a TOML file is data, and its findings carry no position
MAX_CHARS = 256 * 1024


def value_spans(text: str, paths: Iterable[KeyPath]) -> dict[KeyPath, tuple[int, int]]:
    """(start, end) of each value at `paths` as written in `text`; paths that cannot be placed are left out."""
    import tomlkit

    if len(text) > MAX_CHARS:
        return {}
    try:
        doc = tomlkit.parse(text)
    except Exception:  # noqa: BLE001 - tomllib accepted the text; without tomlkit's view there are no positions
        return {}
    raw: dict[KeyPath, str] = {}
    for path in dict.fromkeys(paths):
        try:
            raw[path] = _node(doc, path).as_string()  # the value's own text, before any probe
        except (KeyError, IndexError, TypeError, AttributeError):
            continue
    token = secrets.token_hex(8)
    markers: dict[str, tuple[KeyPath, str]] = {}
    spans: dict[KeyPath, tuple[int, int]] = {}
    todo = list(raw)
    while todo:
        # a value holding another wanted value (an array, an inline table) is probed in a later round
        outer = {p[:n] for p in todo for n in range(len(p))}
        for path in (p for p in todo if p not in outer):
            probe = f"migrate-probe-{token}-{len(markers)}"
            try:
                _node(doc, path[:-1])[path[-1]] = probe
            except (KeyError, IndexError, TypeError, AttributeError, ValueError):
                continue
            markers[probe] = (path, raw[path])
        spans.update(_placed(text, doc.as_string(), token, markers))
        todo = [p for p in todo if p in outer]
    return spans


def _placed(text: str, rendered: str, token: str, markers: dict[str, tuple[KeyPath, str]]) -> dict[KeyPath, tuple[int, int]]:
    """Where each probe still in `rendered` stood in `text`: the rendered text is the source with each
    probed value's text replaced by its marker."""
    spans: dict[KeyPath, tuple[int, int]] = {}
    shift = 0  # how much longer the rendered text is than the source, before the marker
    # tomlkit quotes a probe as the value it replaces was quoted (0.15.3 on), or as "..." (before)
    quoted_probe = rf"""(?P<q>"{{3}}|'{{3}}|"|')(?P<probe>migrate-probe-{token}-\d+)(?P=q)"""
    for m in re.finditer(quoted_probe, rendered):
        if m.group("probe") not in markers:
            continue
        path, raw = markers[m.group("probe")]
        start = m.start() - shift
        if text[start : start + len(raw)] == raw:
            spans[path] = (start, start + len(raw))
        shift += len(m.group(0)) - len(raw)
    return spans


def _node(doc: Any, path: KeyPath) -> Any:
    node = doc
    for part in path:
        node = node[part]
    return node


def key_span(text: str, value_start: int, name: str, depth: int) -> tuple[int, int] | None:
    """The span of key `name` written `depth` dotted parts before the value that starts at
    `value_start` (`name = v`: depth 0; `name.sub = v`: depth 1)."""
    line_start = max(text.rfind("\n", 0, value_start), text.rfind("\r", 0, value_start)) + 1
    m = _KEY_BEFORE_VALUE.search(text, line_start, value_start)
    if m is None:
        return None
    segments = list(_SEGMENT.finditer(text, m.start("key"), m.end("key")))
    index = len(segments) - 1 - depth
    if index < 0:
        return None
    segment = segments[index]
    tomllib = reader()
    try:
        decoded = next(iter(tomllib.loads(f"{segment.group(0)} = 0")))
    except (tomllib.TOMLDecodeError, StopIteration):
        return None
    return (segment.start(), segment.end()) if decoded == name else None


def reader() -> ModuleType:
    """`tomllib` (`tomli` before 3.11), imported on first use: most scans read no TOML."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    return tomllib
