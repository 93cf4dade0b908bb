"""JUnit XML for CIs that show test reports (GitLab, Jenkins, Azure): one `<testsuite>` per file with
findings, one failing `<testcase>` per finding (ruff's `--output-format junit` shape).

Which findings: those the machine formats emit (`annotations.emitted`). Text goes through `visible`
(XML 1.0 cannot carry control characters or undecodable bytes of a name).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from itertools import groupby

from migrator.ground.model import RunResult
from migrator.ground.safe_text import one_line


def render(result: RunResult, include_info: bool = False) -> str:
    from migrator.reporters.annotations import emitted, message_suffix

    findings = sorted(emitted(result.findings, include_info), key=lambda f: f.sort_key())
    top = ET.Element("testsuites", name="ascend-migrate", tests=str(len(findings)), failures=str(len(findings)))
    for path, group in groupby(findings, key=lambda f: f.path):
        items = list(group)
        name = one_line(path)
        suite = ET.SubElement(top, "testsuite", name=name, tests=str(len(items)), failures=str(len(items)), errors="0")
        for f in items:
            where = f"cell {f.cell}, line {f.line}" if f.cell is not None else f"{f.line}:{f.column}"
            case = ET.SubElement(suite, "testcase", name=f"{f.code} {f.name} at {where}", classname=name,
                                 file=name, line=str(f.line))
            failure = ET.SubElement(case, "failure", message=one_line(f.message + message_suffix(f)), type=f.code)
            failure.text = f"{name}:{where}: {one_line(f.message)}"
    ET.indent(top)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(top, encoding="unicode") + "\n"
