"""Error codes and messages from `ascend_env/error_codes.yaml` (each entry cites its source)."""

from __future__ import annotations

import re
from functools import cache

import yaml

from migrator.doctor.model import Explanation, LogFinding
from migrator.doctor.where_to_look import CODE_SHAPE, code_key
from migrator.ground.resources import data_dir

# a CANN code (E + module + 4 digits/letters: EZ9999, EI0006, E39999) or a torch_npu ERRmmccc code
_CODE = re.compile(r"\b(E[0-9A-Z]\d{4}|ERR\d{5})\b")
# an ACL return code as torch_npu prints it: "NPU function error: <call>, error code is 507015"
_ACL_RETURN = re.compile(r"error code(?: is|:|=)\s*(\d{6})\b")
_INNER = re.compile(r"^E[0-9A-Z]9999$")


@cache
def _entries() -> tuple[tuple[Explanation, re.Pattern[str] | None], ...]:
    data = yaml.safe_load((data_dir("ascend_env") / "error_codes.yaml").read_text(encoding="utf-8"))
    out = []
    for item in data["entries"]:
        explanation = Explanation(str(item["code"]), item["title"], item["cause"], item["remedy"], item["source"],
                                  item["component"])
        out.append((explanation, re.compile(item["match"]) if item.get("match") else None))
    return tuple(out)


def table() -> tuple[Explanation, ...]:
    return tuple(e for e, _ in _entries())


def _by_code(code: str) -> Explanation | None:
    code = code.upper()
    for explanation, _ in _entries():
        if explanation.code.upper() == code:
            return explanation
    if _INNER.match(code):  # E19999, EH9999, ...: the generic inner-error entry
        return next((e for e, _ in _entries() if e.code == "E*9999"), None)
    family = re.match(r"^ERR\d{2}(\d{3})$", code)  # ERR02005 -> the documented ERR**005 entry
    if family:
        return next((e for e, _ in _entries() if e.code.startswith("ERR") and e.code.endswith(family.group(1))), None)
    return None


def lookup(text: str) -> list[Explanation]:
    """A code (`EZ9999`, ` ez 9999`, `507015`; `ezc9999` is not one), a name from the table, or a log line:
    every match, in order."""
    key = code_key(text)
    direct = next((e for e, _ in _entries() if e.code.lower() == key.lower()), None)
    if direct:
        return [direct]
    if CODE_SHAPE.fullmatch(key):
        found = _by_code(key)
        return [found] if found else []
    return [finding.explanation for finding in _scan_line(key, 0)]


def nearest_codes(text: str, limit: int = 12) -> list[str]:
    """The table's codes sharing the longest prefix with `text` (`EI0099` -> the EI00.. codes), at most `limit`;
    none when not even the first character is shared."""
    key = code_key(text).upper()
    codes = sorted(e.code for e in table())
    for size in range(len(key), 0, -1):
        near = [c for c in codes if c.upper().startswith(key[:size])]
        if near:
            return near[:limit]
    return []


def _codes_in(line: str) -> list[str]:
    """The CANN / torch_npu codes and ACL return codes of a line, in the order they appear."""
    spans = [(m.start(1), m.group(1)) for m in _CODE.finditer(line)]
    spans += [(m.start(1), m.group(1)) for m in _ACL_RETURN.finditer(line)]
    return [code for _, code in sorted(spans)]


def _scan_line(line: str, number: int) -> list[LogFinding]:
    found: list[LogFinding] = []
    seen: set[str] = set()
    for code in _codes_in(line):
        explanation = _by_code(code)
        if explanation and explanation.code not in seen:
            seen.add(explanation.code)
            found.append(LogFinding(number, line, explanation))
    for explanation, pattern in _entries():
        if pattern is not None and explanation.code not in seen and pattern.search(line):
            seen.add(explanation.code)
            found.append(LogFinding(number, line, explanation))
    return found


def scan_text(text: str) -> list[LogFinding]:
    """The first line holding each documented code or message (a log repeats them per rank and frame)."""
    findings: list[LogFinding] = []
    reported: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        for finding in _scan_line(line, number):
            if finding.explanation.code not in reported:
                reported.add(finding.explanation.code)
                findings.append(LogFinding(number, line.strip()[:300], finding.explanation))
    return findings
