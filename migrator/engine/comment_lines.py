"""Where a trailing comment for a Python line can go: a line that ends inside a multi-line string (or on a
backslash continuation) cannot take one, so its comment goes on the first line after it that can — the
line where the string ends (ruff reads `# noqa` on a multi-line string there too).

Shared by the scan, which reads a `# noqa`/`# migrate: ignore` on that line as applying to the lines it
stands for, and `scan --add-noqa`, which writes it there.
"""

from __future__ import annotations

import io
import re
import tokenize

# text that can make a line end inside a string or continue on the next; without it nothing is tokenized
_MAY_CONTINUE = re.compile(r'"""|\'\'\'|\\(?:\r\n|\r|\n)')


def continued_lines(text: str) -> dict[int, int]:
    """line -> the line its trailing comment goes on, for every line that cannot take one itself (its end
    inside a multi-line string or a backslash continuation); {} when there is none or the text does not
    tokenize."""
    if not _MAY_CONTINUE.search(text):
        return {}
    open_lines: set[int] = set()
    comment_lines: set[int] = set()
    fstring_starts: list[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            kind = tokenize.tok_name[tok.type]
            if kind == "STRING":
                open_lines.update(range(tok.start[0], tok.end[0]))
            elif kind == "FSTRING_START":  # Python 3.12+: an f-string is several tokens
                fstring_starts.append(tok.start[0])
            elif kind == "FSTRING_END" and fstring_starts:
                open_lines.update(range(fstring_starts.pop(), tok.end[0]))
            elif kind == "COMMENT":
                comment_lines.add(tok.start[0])
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if line.endswith("\\") and number not in open_lines and number not in comment_lines:
            open_lines.add(number)
    mapped: dict[int, int] = {}
    for number in sorted(open_lines):
        target = number
        while target in open_lines:
            target += 1
        mapped[number] = target
    return mapped


def comment_columns(text: str) -> dict[int, int]:
    """line -> 0-based character column where its comment (a `#` token, never one inside a string) starts."""
    found: dict[int, int] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if tok.type == tokenize.COMMENT:
                found[tok.start[0]] = tok.start[1]
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    return found
