"""GitHub Actions workflow commands: one annotation per finding on the PR's "Files changed" tab.

    ::warning file=train.py,line=3,endLine=3,col=33,endColumn=38,title=DIST001 nccl-backend::message

Levels: error -> `error`, warning -> `warning`, info -> `notice`. Escaping follows the runner's
rules: in the message `%`, CR and LF are percent-encoded; in properties also `:` and `,`.
`endColumn` is inclusive here (the findings' end column is exclusive).
"""

from __future__ import annotations

from migrator.model import RunResult

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(result: RunResult) -> str:
    out = []
    for f in result.findings:
        props = [("file", f.path), ("line", str(f.line))]
        end_line = max(f.end_line, f.line)
        props.append(("endLine", str(end_line)))
        props.append(("col", str(f.column)))
        end_col = f.end_column - 1  # inclusive
        if (end_line > f.line and end_col >= 1) or end_col >= f.column:
            props.append(("endColumn", str(end_col)))
        props.append(("title", f"{f.code} {f.name}"))
        message = f.message
        if f.fix:
            message += f"\nFix ({f.fix.kind}): {f.fix.title}"
        else:
            message += f"\nManual: see `migrate rule {f.code}`"
        head = ",".join(f"{k}={escape_property(v)}" for k, v in props)
        out.append(f"::{LEVEL[f.severity]} {head}::{escape_data(message)}")
    return "".join(line + "\n" for line in out)
