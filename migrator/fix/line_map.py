"""Where each line of a file went after a fix: old line -> (first, last) line of the new text.

A plain `difflib.SequenceMatcher` over the whole file is quadratic when many lines changed (every
blank or repeated line is a candidate for every match), which made fixing a large generated file
take minutes. This aligns lines that occur exactly once in both texts first (the "patience"
anchors, in increasing order on both sides), strips equal lines around them, and hands only the
short gaps between anchors to difflib; a gap without any anchor that is still large is matched
with difflib's popular-line heuristic on, so no step is quadratic in the file size.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter

Opcode = tuple[str, int, int, int, int]

# gaps up to this many lines on each side get an exact difflib match; beyond, autojunk is on
EXACT_GAP = 400


def _anchors(old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int) -> list[tuple[int, int]]:
    """Pairs (i, j) of lines unique in both ranges, the longest chain increasing on both sides."""
    count_old = Counter(old[i1:i2])
    count_new = Counter(new[j1:j2])
    where_new = {new[j]: j for j in range(j1, j2) if count_new[new[j]] == 1}
    pairs = [(i, where_new[old[i]]) for i in range(i1, i2) if count_old[old[i]] == 1 and old[i] in where_new]
    # longest increasing subsequence of the new positions (patience sorting, O(k log k))
    tails: list[int] = []  # new position ending the best chain of each length
    tail_index: list[int] = []
    back: list[int] = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_index.append(k)
        else:
            tails[pos] = j
            tail_index[pos] = k
        back[k] = tail_index[pos - 1] if pos else -1
    chain: list[tuple[int, int]] = []
    k = tail_index[-1] if tail_index else -1
    while k != -1:
        chain.append(pairs[k])
        k = back[k]
    chain.reverse()
    return chain


def _gap(old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int, out: list[Opcode]) -> None:
    """Opcodes for old[i1:i2] against new[j1:j2] (no anchors in between, or none wanted)."""
    if i1 == i2 and j1 == j2:
        return
    if i1 == i2 or j1 == j2:
        out.append(("insert" if i1 == i2 else "delete", i1, i2, j1, j2))
        return
    exact = i2 - i1 <= EXACT_GAP and j2 - j1 <= EXACT_GAP
    matcher = difflib.SequenceMatcher(a=old[i1:i2], b=new[j1:j2], autojunk=not exact)
    for tag, a1, a2, b1, b2 in matcher.get_opcodes():
        out.append((tag, i1 + a1, i1 + a2, j1 + b1, j1 + b2))


def _align(old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int, out: list[Opcode]) -> None:
    # equal lines at both ends first: they need no search
    start_i, start_j = i1, j1
    while i1 < i2 and j1 < j2 and old[i1] == new[j1]:
        i1, j1 = i1 + 1, j1 + 1
    if i1 > start_i:
        out.append(("equal", start_i, i1, start_j, j1))
    end_i, end_j = i2, j2
    while i2 > i1 and j2 > j1 and old[i2 - 1] == new[j2 - 1]:
        i2, j2 = i2 - 1, j2 - 1
    anchors = _anchors(old, new, i1, i2, j1, j2) if i2 - i1 > EXACT_GAP or j2 - j1 > EXACT_GAP else []
    if not anchors:
        _gap(old, new, i1, i2, j1, j2, out)
    else:
        prev_i, prev_j = i1, j1
        for ai, aj in anchors:
            _align(old, new, prev_i, ai, prev_j, aj, out)
            out.append(("equal", ai, ai + 1, aj, aj + 1))
            prev_i, prev_j = ai + 1, aj + 1
        _align(old, new, prev_i, i2, prev_j, j2, out)
    if i2 < end_i:
        out.append(("equal", i2, end_i, j2, end_j))


def line_opcodes(old: list[str], new: list[str]) -> list[Opcode]:
    """difflib-style opcodes turning `old` into `new`, in order, covering both lists."""
    if len(old) <= EXACT_GAP and len(new) <= EXACT_GAP:  # small files: difflib as it is
        return [(tag, i1, i2, j1, j2) for tag, i1, i2, j1, j2 in
                difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()]
    out: list[Opcode] = []
    _align(old, new, 0, len(old), 0, len(new), out)
    return out


# a replaced block up to this many old x new lines is aligned line by line inside
ALIGN_CELLS = 4096


def _ends(line: str, width: int = 80) -> str:
    """What the similarity of two lines is judged on: their ends (bounded cost on a megabyte line)."""
    return line if len(line) <= 2 * width else line[:width] + line[-width:]


def _block(old: list[str], new: list[str], i1: int, i2: int, j1: int, j2: int) -> list[tuple[int, int]]:
    """For a replaced block, the new line each old line became (0-based), in order.

    As many lines on both sides: line by line (two fixed lines in a row stay two edits). More new
    lines (an import inserted before an edited line): each old line takes the most similar new line
    left for it, so the inserted lines do not swallow their neighbours. Otherwise the whole block."""
    n_old, n_new = i2 - i1, j2 - j1
    if n_old == n_new:
        return [(j1 + k, j1 + k) for k in range(n_old)]
    if n_new < n_old or n_old * n_new > ALIGN_CELLS:
        return [(j1, max(j1, j2 - 1))] * n_old
    out: list[tuple[int, int]] = []
    j = j1
    for k in range(n_old):
        last = j2 - (n_old - k)  # leave one new line for each old line still to place
        here = _ends(old[i1 + k])
        best = max(range(j, last + 1),
                   key=lambda c: difflib.SequenceMatcher(None, here, _ends(new[c]), autojunk=False).ratio())
        out.append((best, best))
        j = best + 1
    return out


def line_map(before: str, after: str) -> tuple[dict[int, tuple[int, int]], list[str]]:
    """Old line (1-based) -> (first, last) new line of the block it became; and the new lines."""
    old, new = before.splitlines(), after.splitlines()
    mapping: dict[int, tuple[int, int]] = {}
    for tag, i1, i2, j1, j2 in line_opcodes(old, new):
        if tag == "equal":
            for i in range(i1, i2):
                mapping[i + 1] = (j1 + (i - i1) + 1, j1 + (i - i1) + 1)
        elif tag != "insert":
            for i, (first, last) in zip(range(i1, i2), _block(old, new, i1, i2, j1, j2)):
                mapping[i + 1] = (first + 1, last + 1) if j2 > j1 else (j1 + 1, j1 + 1)
    return mapping, new
