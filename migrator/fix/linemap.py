"""Where the lines of a text went after an edit (shared by the fixer's edit positions and the ledger)."""

from __future__ import annotations

import difflib


def line_map(before: str, after: str) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """Old line -> (first, last) new line of the block it became (difflib opcodes), and the new lines.
    A block replaced by as many lines maps line by line (two fixed lines in a row stay two edits)."""
    old, new = before.splitlines(), after.splitlines()
    mapping: dict[int, tuple[int, int]] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            if tag == "equal" or i2 - i1 == j2 - j1:
                mapping[i + 1] = (j1 + (i - i1) + 1, j1 + (i - i1) + 1)
            else:
                mapping[i + 1] = (j1 + 1, max(j1 + 1, j2))
    return mapping, new
