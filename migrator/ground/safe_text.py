"""The one sanitiser for text that comes from a user's tree (file names, source lines, reasons in a
fix record) on its way to a terminal, a line-oriented format or a report.

* `visible(text)`: control characters are shown, not obeyed: C0 (except tab and newline), DEL and
  C1 become `\\xNN` (ESC of ANSI/OSC sequences: `\\x1b`), bidirectional overrides and marks become
  `<U+202E>`, and bytes of an undecodable file name (Python holds them as lone surrogates,
  `os.fsdecode`'s surrogateescape) become `\\xNN`, the byte itself. The result always encodes as UTF-8.
* `one_line(text)`: `visible`, and line breaks (`\\n`, `\\r`, U+2028/2029) escaped too, so one
  finding is always one line.
* `visible_block(text)`: `visible` for a block of lines (a diff): `\\n` and `\\r\\n` kept, a lone
  `\\r` (which would overwrite the line on a terminal) escaped.
* `json_safe(data)`: JSON-ready data without lone surrogates (they cannot be written as UTF-8):
  strings are escaped as `visible` does for undecodable bytes, and next to an escaped `path` or `root`
  the exact name goes in `path_bytes` / `root_bytes` (base64 of the raw bytes); `name_from_json`
  reads it back.
* `dumps_exact(data)`: JSON for files the tool reads back itself (the fix record, the journal): a
  lone surrogate (an undecodable byte of a file name, surrogateescape) is written as its JSON escape
  `\\udcXX`, which `json.loads` turns back into the same string, so `os.fsencode` gives the exact name.

Pure string functions, standard library only (imported by the CLI on every run).
"""

from __future__ import annotations

import base64
import os
import re
from functools import cache
from typing import Any

_BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SURROGATES = "\ud800-\udfff"
# compiled on first use (`_pattern`): each is a 64K-character bitmap to build, and most runs need one at most
_UNSAFE = f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]"
_UNSAFE_LINE = f"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{_BIDI}{_SURROGATES}]"
_UNSAFE_BLOCK = f"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}{_SURROGATES}]"
_HAS_SURROGATE = re.compile(f"[{_SURROGATES}]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if code < 0xA0:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape: the undecodable byte itself
        return f"\\x{code - 0xDC00:02x}"
    return f"<U+{code:04X}>"


@cache
def _pattern(source: str) -> re.Pattern[str]:
    return re.compile(source)


def _sub(pattern: re.Pattern, text: str) -> str:
    if pattern.search(text) is None:  # the common case costs one scan, no copy
        return text
    return pattern.sub(lambda m: _escape(m.group()), text)


def visible(text: str) -> str:
    """Control characters, bidi overrides and undecodable bytes shown as escapes (tab and LF kept)."""
    return _sub(_pattern(_UNSAFE), text)


def one_line(text: Any) -> str:
    """`visible`, with line breaks escaped as well: for names, messages and reasons on one line."""
    return _sub(_pattern(_UNSAFE_LINE), str(text))


def visible_block(text: str) -> str:
    """`visible` for multi-line text: LF and CRLF line ends kept, a lone CR escaped."""
    return _sub(_pattern(_UNSAFE_BLOCK), text)


def has_surrogates(text: str) -> bool:
    return _HAS_SURROGATE.search(text) is not None


def escape_name(name: str) -> str:
    """A file name as valid Unicode: undecodable bytes as `\\xNN` (other text unchanged)."""
    if not has_surrogates(name):
        return name
    return os.fsencode(name).decode("utf-8", "backslashreplace") if _decodable(name) else _sub(_HAS_SURROGATE, name)


def _decodable(name: str) -> bool:
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return False
    return True


def name_bytes(name: str) -> str:
    """base64 of the raw bytes of a file name (the lossless form next to an escaped name)."""
    raw = os.fsencode(name) if _decodable(name) else name.encode("utf-8", "surrogatepass")
    return base64.b64encode(raw).decode("ascii")


def name_from_json(entry: dict, key: str = "path") -> Any:
    """The exact name from a JSON object written through `json_safe` (uses `<key>_bytes` when present)."""
    raw = entry.get(f"{key}_bytes")
    if isinstance(raw, str):
        try:
            return os.fsdecode(base64.b64decode(raw, validate=True))
        except ValueError:
            pass
    return entry.get(key)


NAME_KEYS = ("path", "root")


def json_safe(data: Any) -> Any:
    """A copy of JSON-ready `data` that encodes as UTF-8 (see the module doc); unchanged objects are reused."""
    if isinstance(data, str):
        return escape_name(data)
    if isinstance(data, list):
        return [json_safe(v) for v in data]
    if isinstance(data, tuple):
        return [json_safe(v) for v in data]
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            key = escape_name(key) if isinstance(key, str) else key
            if key in NAME_KEYS and isinstance(value, str) and has_surrogates(value):
                out[key] = escape_name(value)
                out[f"{key}_bytes"] = name_bytes(value)
            else:
                out[key] = json_safe(value)
        return out
    return data


def dumps(data: Any, indent: int | None = 2) -> str:
    """`json.dumps(..., ensure_ascii=False)` that never holds a lone surrogate (fast path when none)."""
    import json

    text = json.dumps(data, indent=indent, ensure_ascii=False)
    if has_surrogates(text):
        text = json.dumps(json_safe(data), indent=indent, ensure_ascii=False)
    return text


def dumps_exact(data: Any, indent: int | None = None) -> str:
    """`json.dumps(..., ensure_ascii=False)` with each lone surrogate escaped (`\\udcff`): valid UTF-8,
    and read back by `json.loads` as the same string (the exact undecodable name)."""
    import json

    text = json.dumps(data, indent=indent, ensure_ascii=False)
    # outside strings JSON has only ASCII, so every surrogate here sits inside a string
    return _HAS_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if has_surrogates(text) else text
