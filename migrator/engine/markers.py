"""Unattributed markers: CUDA-looking tokens on code lines that no rule claimed, so nothing is dropped
silently. Docstrings and the fix's own helpers (`migrator/ground/own_code.py`) are not looked at."""

from __future__ import annotations

import re

from migrator.engine.source import SourceText
from migrator.ground.model import Finding, Marker

MARKER = re.compile(r"(?i)cuda|nccl|apex|flash_attn|xformers|triton|transformer_engine|NVTE_|cudnn")


def unattributed(
    rel: str, kind: str, source: SourceText, findings: list[Finding], doc_lines: set[int],
    own_names: frozenset[str] = frozenset(),
) -> tuple[Marker, ...]:
    claimed: set[int] = set()
    for f in findings:
        claimed.update(range(f.line, f.end_line + 1))
    own = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(own_names))) + r")\b") if own_names else None
    out = []
    for number, text in enumerate(source.lines, 1):
        if number in claimed or number in doc_lines:
            continue
        code = text.split("#", 1)[0] if kind in ("python", "shell", "dockerfile") else text
        if own:
            code = own.sub(" ", code)  # a call of the fix's own `_migrate_flash_attn` is no CUDA token
        m = MARKER.search(code)
        if m:
            out.append(Marker(rel, number, m.group(0).lower()))
    return tuple(out)
