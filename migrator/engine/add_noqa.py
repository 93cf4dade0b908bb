"""`migrate scan --add-noqa`: a `# noqa: CODE` comment for every finding of a scan, as ruff's --add-noqa.

Per line one comment with all its codes, merged into a `# noqa: A` already there (`# noqa: A, CODE`), never a
code twice. A line that ends inside a multi-line string (or continues with a backslash) gets its comment on
the line where the string ends (`comment_lines.continued_lines`; the scan reads it there). Only the changed
lines' bytes change: encoding, BOM and line endings are kept, and a Python file is written (through the one
safe writer) only when its syntax tree is the same after. Notebooks, configs, shell scripts and Dockerfiles
are left, with a note: a trailing comment there can change what the file means, or is no comment at all.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from migrator.engine.suppress import NOQA
from migrator.ground.model import Finding, RunResult

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n|$)")
_BOM = b"\xef\xbb\xbf"
_REQUIREMENTS_COMMENT = re.compile(r"(?:^|\s)#")
COMMENTABLE = ("python", "requirements")


@dataclass(frozen=True)
class NoqaOutcome:
    comments: int  # lines given a new comment, or codes in the comment they had
    files: tuple[str, ...]  # root-relative paths written
    notes: tuple[str, ...]  # findings left without a comment, and why


def add_noqa(result: RunResult) -> NoqaOutcome:
    from migrator.engine.discover import explicit_kind, file_kind

    root = Path(result.summary.root)
    per_file: dict[str, list[Finding]] = {}
    left: dict[str, int] = {}
    for f in result.findings:
        why = _why_not(f, file_kind(root / f.path) or explicit_kind(root / f.path))
        if why:
            left[why] = left.get(why, 0) + 1
        else:
            per_file.setdefault(f.path, []).append(f)
    notes = [f"{n} finding(s) {why}" for why, n in left.items()]
    comments, written = 0, []
    for rel, findings in sorted(per_file.items()):
        try:
            added = _commented_file(root, rel, findings)
        except (OSError, ValueError) as exc:
            notes.append(f"{rel}: left as it is: {exc}")
            continue
        if added:
            comments += added
            written.append(rel)
    return NoqaOutcome(comments, tuple(written), tuple(notes))


def _why_not(f: Finding, kind: str | None) -> str | None:
    if f.family == "meta":
        return "about the file itself (unreadable, suppressions): a noqa does not hide them"
    if f.cell is not None:
        return "in notebooks: add `# noqa: CODE` in the cell by hand"
    if kind not in COMMENTABLE:
        return "in configs, shell scripts or Dockerfiles: a trailing comment could change them; use `exclude` or --baseline"
    return None


def _commented_file(root: Path, rel: str, findings: list[Finding]) -> int:
    """Comments added to one file (0: nothing to change); raises OSError/ValueError when it cannot be done safely."""
    from migrator.engine.comment_lines import comment_columns, continued_lines
    from migrator.engine.discover import file_kind
    from migrator.engine.source import UnreadableSource, decode_python, decode_text
    from migrator.ground.input_files import MAX_SOURCE_BYTES, read_bytes
    from migrator.ground.safe_write import write_bytes

    path = root / rel
    data = read_bytes(path, MAX_SOURCE_BYTES, root)
    python = file_kind(path) != "requirements"
    try:
        source = decode_python(data) if python else decode_text(data)
    except UnreadableSource as exc:
        raise ValueError(str(exc)) from None
    mapped = continued_lines(source.text) if python else {}
    comments = comment_columns(source.text) if python else {}
    wanted: dict[int, set[str]] = {}
    for f in findings:
        wanted.setdefault(mapped.get(f.line, f.line), set()).add(f.code)
    encoding = "utf-8" if source.encoding == "utf-8-sig" else source.encoding
    bom = _BOM if data.startswith(_BOM) else b""
    lines = [m.group(0) for m in _LINE.finditer(data[len(bom):]) if m.group(0)]
    added = 0
    for number, codes in sorted(wanted.items()):
        if not 1 <= number <= len(lines):
            raise ValueError(f"line {number} is past the end of the file (changed since the scan?)")
        raw = lines[number - 1]
        body = raw.rstrip(b"\r\n")
        text = body.decode(encoding)
        if not python and text.endswith("\\"):
            raise ValueError(f"line {number} continues on the next: no comment can follow it")
        column = comments.get(number) if python else _requirements_comment(text)
        changed = with_codes(text, column, sorted(codes))
        if changed != text:
            encoded = changed.encode(encoding)
            if encoded.decode(encoding) != changed:
                raise ValueError(f"line {number}: the comment cannot be written in {encoding}")
            lines[number - 1] = encoded + raw[len(body):]
            added += 1
    if not added:
        return 0
    new = bom + b"".join(lines)
    if python:
        _same_tree(source.text, new[len(bom):].decode(encoding), rel)
    write_bytes(path, new, root=root)
    return added


def _requirements_comment(text: str) -> int | None:
    m = _REQUIREMENTS_COMMENT.search(text)
    return None if m is None else m.end() - 1


def with_codes(line: str, comment_at: int | None, codes: Iterable[str]) -> str:
    """`line` with `# noqa:` naming each of `codes`: added to the first `# noqa: ...` of its comment (which
    starts at `comment_at`), else a comment of its own at the end; unchanged when every code is there."""
    codes = list(codes)
    if comment_at is not None:
        for m in NOQA.finditer(line, comment_at):
            if m.group("codes"):
                present = {c.upper() for c in re.split(r"[,\s]+", m.group("codes")) if c}
                new = [c for c in codes if c.upper() not in present]
                if not new:
                    return line
                return line[: m.end("codes")] + ", " + ", ".join(new) + line[m.end("codes"):]
    return line.rstrip(" \t") + "  # noqa: " + ", ".join(codes)


def _same_tree(before: str, after: str, rel: str) -> None:
    """Comments never change a module's syntax tree; anything else means a comment went where it must not."""
    try:
        same = ast.dump(ast.parse(before)) == ast.dump(ast.parse(after))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"cannot check the result parses the same ({exc.__class__.__name__})") from None
    if not same:
        raise ValueError("a comment would change the code (inside a string?): not written")
