"""The fix record (`.migrate/fix-record.json`, `migrator/ground/schema/fix-record.schema.json`) as frozen
dataclasses: the one shape the ledger (`fix/ledger.py`), the journal, the declines (`declines.py`) and
the report (`report_data.py`) share, instead of each reading raw keys.

Read strictly: the data is checked against the schema, then structured by the serialiser
(`migrator/ground/serialise.py`); an unknown key, a missing field or a wrong type is a `FixRecordError`
naming the file and the field. `migrate report` reads with unknown keys ignored (the schema says so:
a newer tool's record still shows). Records of older versions still read: no hashes, an absolute
`root`, an edit's new lines as `new.text` instead of `new.sha256`. `to_bytes` is what the ledger
writes (through `safe_write`): each field in schema order, absent fields left out (the same bytes as
before this module existed).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.ground.serialise import SerialiseError, from_data, register, shape, to_data

if TYPE_CHECKING:
    from cattrs import Converter

SCHEMA = "fix-record.schema.json"
SCHEMA_VERSION = 1


class FixRecordError(ValueError):
    """A fix record that cannot be read or does not fit the schema; the message names the file and field."""


@dataclass(frozen=True)
class Span:
    """Where an edit is: `Edit.original` before the fix, `Edit.new` after it (1-based, columns in characters)."""

    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None
    sha256: str | None = None  # `new` only: hash of lines line..end_line joined with "\n"
    text: str | None = None  # `new` in records of older versions: the lines themselves


@dataclass(frozen=True)
class Edit:
    code: str
    fix_kind: str | None = None  # "exact" | "numerics"
    title: str | None = None
    symbol: str | None = None
    original: Span | None = None
    new: Span | None = None
    cell: int | None = None  # notebooks: the 1-based cell; the spans count lines within it

    @property
    def block_line(self) -> int | None:
        """Where the edited lines start now (None when the record does not say)."""
        return self.new.line if self.new is not None else None


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    path: str  # POSIX, relative to the root
    sha256: str | None = None  # the file's bytes as the last run that recorded it left them
    sha256_before: str | None = None  # before its earliest recorded edit (back to these: reverted)
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Decline:
    """A site the fixer would not rewrite, and why; scan at that root reports it as manual."""

    path: str
    code: str
    symbol: str
    reason: str
    cell: int | None = None

    @property
    def site(self) -> tuple[str, str, str]:
        return (self.path, self.code, self.symbol)


@dataclass(frozen=True)
class RuntimeModule:
    """A `_migrate_runtime.py` the fix wrote, with the hash of what it wrote."""

    path: str
    sha256: str


@dataclass(frozen=True)
class FileError:
    path: str
    error: str


@dataclass(frozen=True)
class ToolStamp:
    name: str
    version: str
    catalogue: str | None = None  # digest of the rule catalogue the run used


@dataclass(frozen=True, kw_only=True)
class FixRecord:
    schema_version: int = SCHEMA_VERSION
    tool: ToolStamp | None = None
    target: str | None = None  # "npu" | "portable"
    root: str | None = None  # older records only: the absolute root the paths are relative to
    files: tuple[FileEntry, ...] = ()
    declined: tuple[Decline, ...] = ()
    errors: tuple[FileError, ...] = ()
    runtime_modules: tuple[RuntimeModule, ...] = ()


@register
def _hooks(conv: Converter) -> None:
    for cls in (Span, Edit, Decline, ToolStamp):
        shape(conv, cls)
    shape(conv, FileEntry, always=("edits",))
    shape(conv, FixRecord, always=("schema_version", "files", "declined", "errors", "runtime_modules"))


def parse(data: object, source: str, extra_keys: str = "refuse", schema: bool = True) -> FixRecord:
    """`data` (parsed JSON) as a FixRecord: schema first (the contract; `schema=False` skips it where only
    the typed fields matter and jsonschema's import would cost every scan), then every field typed."""
    if schema:
        from migrator.ground.schema_check import SchemaMismatch, check

        try:
            check(data, SCHEMA)
        except SchemaMismatch as exc:
            raise FixRecordError(f"{source}: does not match the fix record schema (migrator/ground/schema/{SCHEMA}): {exc}") from None
    bad = _nul_path(data, "$")
    if bad is not None:  # no file has such a name: refused before the fix writes anything (issue 38)
        raise FixRecordError(f"{source}: {bad}: a path holding a NUL byte; no file can have that name")
    try:
        return from_data(data, FixRecord, source, extra_keys)
    except SerialiseError as exc:
        raise FixRecordError(str(exc)) from None


def _nul_path(data: object, where: str) -> str | None:
    """The JSON path of the first `path` or `root` string holding a NUL byte, else None."""
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ("path", "root") and isinstance(value, str) and "\0" in value:
                return f"{where}.{key}"
            found = _nul_path(value, f"{where}.{key}")
            if found is not None:
                return found
    elif isinstance(data, list):
        for i, value in enumerate(data):
            found = _nul_path(value, f"{where}[{i}]")
            if found is not None:
                return found
    return None


def load(path: Path, root: Path | None = None, extra_keys: str = "refuse", schema: bool = True) -> FixRecord:
    """The record at `path` (inside `root` when one is given, never through a link out of it)."""
    from migrator.ground.jsonfile import read_json

    return parse(read_json(path, "fix record", FixRecordError, root=root), str(path), extra_keys, schema)


def load_if_present(path: Path, root: Path | None = None, schema: bool = True) -> FixRecord | None:
    """None when there is no record at `path`; a record that is there but unreadable raises FixRecordError."""
    import os

    return load(path, root, schema=schema) if os.path.lexists(path) else None


def to_bytes(record: FixRecord) -> bytes:
    from migrator.ground.safe_text import dumps_exact

    return (dumps_exact(to_data(record), indent=2) + "\n").encode("utf-8")  # undecodable names: `\\udcXX`
