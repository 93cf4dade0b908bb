"""The code `dataclasses` generates for each class (`__init__`, `__repr__`, `__eq__`, `__hash__`, a frozen
class's `__setattr__`/`__delattr__`), compiled once and kept between runs.

Compiling those small texts was a sixth of a short scan's CPU: a scan creates ~50 dataclasses at import,
each method its own `exec` of generated source. `install()` (the CLI's first step) gives the `dataclasses`
module an `exec` that looks each text up in a kept table before compiling it. The table maps a whole
source text to `compile(text, "<string>", "exec")` of it, which is what `exec(text)` runs, so it can only
ever answer with the very code the text compiles to. One file per command (each reads only the classes it
creates) and Python build (the interpreter's version in its name: bytecode differs between them), its bytes
checked by a digest; a missing, unreadable or
corrupt file is an empty table. New texts are written at exit, atomically (two runs at once: the last
one's table stays, the other's new texts are compiled again next time). Folder: `ground/start_cache.py`.
"""

from __future__ import annotations

import atexit
import hashlib
import marshal
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from migrator.ground import start_cache

_DIGEST = 16
_kept: dict[str, CodeType] = {}
_new: dict[str, CodeType] = {}


def install(command: str) -> None:
    """From now on in this process, dataclasses' generated code comes from `command`'s kept table (once; not
    at all where the start-up caches are turned off)."""
    import dataclasses

    where = start_cache.folder("dataclass-code")
    if where is None or getattr(dataclasses, "exec", None) is _exec:
        return
    build = hashlib.blake2b(sys.version.encode(), digest_size=8).hexdigest()
    path = where / f"{command if command.isidentifier() else 'other'}-{build}.marshal"
    _kept.update(read(path))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # a module global: found before the builtin
    atexit.register(keep, path)


def _exec(source: Any, namespace: dict[str, Any] | None = None, local_names: dict[str, Any] | None = None) -> None:
    if isinstance(source, str):
        code = _kept.get(source)
        if code is None:
            code = _kept[source] = _new[source] = compile(source, "<string>", "exec")
        source = code
    exec(source, namespace, local_names)  # noqa: S102 - the text dataclasses generated, as it would run it


def read(path: Path) -> dict[str, CodeType]:
    """The table kept at `path`; empty when there is none or it is not whole."""
    try:
        data = path.read_bytes()
        payload = data[_DIGEST:]
        if data[:_DIGEST] != hashlib.blake2b(payload, digest_size=_DIGEST).digest():
            return {}
        table = marshal.loads(payload)
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, CodeType)}


def keep(path: Path) -> None:
    """Write the table with the texts compiled in this run, when there were any; errors leave the file."""
    if not _new:
        return
    from migrator.ground.safe_write import write_bytes

    payload = marshal.dumps(_kept)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, hashlib.blake2b(payload, digest_size=_DIGEST).digest() + payload)
    except OSError:
        return
    _new.clear()
