"""Exact, span-based fixes for launch scripts (env var renames, nccl/cuda words) and annotations."""

from __future__ import annotations

import re

from migrator.catalogue import units
from migrator.catalogue.loader import load_catalogue
from migrator.ground.model import Finding

ANNOTATION = re.compile(r"^[ \t]*# MIGRATE\((?P<code>[A-Z]+\d{3})\): .*(\r\n|\n|\r)?$")


def _replacement(finding: Finding) -> str | None:
    if finding.code == "ENV023":
        return "npu" if finding.symbol == "gpu" and finding.fix else None  # torchrun --nproc_per_node gpu
    if finding.family == "environment":
        hit = load_catalogue().match_symbol(f"$env.{finding.symbol}")
        return hit.replacement if hit and finding.fix else None
    if finding.code == "DIST001":
        return "hccl"
    if finding.code == "DEV012":
        return "npu" + finding.symbol[4:]
    return None


def fix_text(text: str, findings: list[Finding], target: str) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    """Replace each finding's span on its line, right to left so columns stay valid."""
    applied: list[Finding] = []
    declined: list[tuple[Finding, str]] = []
    lines = text.splitlines(keepends=True)
    rules = load_catalogue().rules
    for f in sorted(findings, key=lambda f: (f.line, f.column), reverse=True):
        why = units.text_reason(rules[f.code], f.symbol, target, _kind(f.path))  # the scan's own verdict
        if why is not None:
            declined.append((f, why))
            continue
        if f.code == "OPS008":
            _add_torch_npu(lines, f, applied, declined)
            continue
        new = _replacement(f)
        if new is None:
            declined.append((f, "no exact rewrite"))
            continue
        line = lines[f.line - 1]
        start, end = f.column - 1, f.end_column - 1
        if line[start:end] != f.symbol:
            declined.append((f, "the text at this position changed"))
            continue
        lines[f.line - 1] = line[:start] + new + line[end:]
        applied.append(f)
    return "".join(lines), applied, declined


def _kind(path: str) -> str:
    from pathlib import Path

    from migrator.engine.discover import file_kind

    return file_kind(Path(path)) or "shell"


def _add_torch_npu(lines: list[str], f: Finding, applied: list, declined: list) -> None:
    """`torch==X` gains a `torch-npu==Y` line right after it (the pairing is exact: ascend-facts §a);
    the target and file kind were judged by the rule's precheck (migrator/rules/coverage/add_torch_npu.py)."""
    from migrator.catalogue.coverage import torch_npu_release_for_torch

    version = f.symbol.split("==", 1)[-1]
    release = torch_npu_release_for_torch(version)
    line = lines[f.line - 1]
    if not release or f.symbol not in line.replace(" ", ""):
        declined.append((f, "the torch pin changed"))
        return
    ending = line[len(line.rstrip("\r\n")) :] or "\n"
    if not line.endswith(("\n", "\r")):
        lines[f.line - 1] = line + ending
    lines.insert(f.line, f"torch-npu=={release}{ending}")
    applied.append(f)


def newline_of(text: str) -> str:
    m = re.search(r"\r\n|\n|\r", text)
    return m.group(0) if m else "\n"


def annotate(text: str, notes: dict[int, list[tuple[str, str]]]) -> str:
    """Insert `# MIGRATE(CODE): reason` above each noted line; never twice for the same code."""
    if not notes:
        return text
    nl = newline_of(text)
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    for number, line in enumerate(lines, 1):
        if number in notes:
            existing = set()
            k = len(out) - 1
            while k >= 0 and (note := ANNOTATION.match(out[k])):
                existing.add(note.group("code"))
                k -= 1
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            for code, reason in notes[number]:
                if code not in existing:
                    out.append(f"{indent}# MIGRATE({code}): {reason}{nl}")
                    existing.add(code)
        out.append(line)
    return "".join(out)


def strip_annotations(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not ANNOTATION.match(line))
