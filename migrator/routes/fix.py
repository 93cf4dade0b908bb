"""`migrate fix` with the MindSpeed route (auto or `--route mindspeed`): its one-time edits, added to the plan.

* `import mindspeed.megatron_adaptor` directly below the module-level `import torch` of each entry
  point (a `__main__` script that imports megatron), as MindSpeed's README asks;
* the MindSpeed requirement pin appended to the root's requirements.txt, when there is one.

What the adaptor patches is not rewritten (api.fix leaves covered findings to the route).
Routes without edits (DeepSpeed, transformers) leave the plan as it is.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

from migrator.model import RunResult

ADAPTOR = "import mindspeed.megatron_adaptor"
MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.MULTILINE)
IMPORTS_MEGATRON = re.compile(r"^[ \t]*(?:from|import)[ \t]+megatron\b", re.MULTILINE)
ROUTE_CODE = "ROUTE"


def insert_adaptor(text: str, line: str = ADAPTOR) -> str | None:
    """The text with `line` below the first module-level `import torch`; None when already there, when the
    module does not import torch at module level, or when it does not parse."""
    if line in text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == "torch" and a.asname is None for a in node.names):
            at = node.end_lineno or node.lineno
            newline = "\r\n" if lines[at - 1].endswith("\r\n") else "\n"
            if not lines[at - 1].endswith(("\n", "\r")):
                lines[at - 1] += newline
            return "".join(lines[:at] + [line + newline] + lines[at:])
    # no module-level `import torch`: not a training entry point (a script that only imports
    # megatron when it is *not* __main__, say); nothing to patch, so the file is left alone
    return None


def _edit(code_line: int, symbol: str, title: str):
    from migrator.fix.runner import Edit

    return Edit(ROUTE_CODE, "exact", title, symbol, code_line, 1, code_line, 1, code_line + 1, code_line + 1,
                len(symbol) + 1)


def add_route_edits(plan, before: RunResult, choice: str):
    """The plan with the route's edits merged in (entry points and requirements.txt)."""
    from migrator.fix.runner import _read, with_text

    if choice not in ("auto", "mindspeed"):
        return plan
    fw = next((f for f in before.frameworks if f.route is not None and f.route.name == "mindspeed"), None)
    if fw is None or not (fw.covered or fw.gated or choice == "mindspeed"):
        return plan  # auto: nothing the adaptor covers, so nothing relies on it
    root = Path(plan.root)
    pin = next((r.text for r in fw.route.requirements if r.kind == "pin"), None)
    changes = {c.path: c for c in plan.changes}
    from migrator.engine.discover import Candidate, discover

    for cand in discover(root, [root], None):
        if not isinstance(cand, Candidate) or cand.kind != "python":
            continue
        change = changes.get(cand.rel)
        if change is not None and change.error:
            continue
        current = change.after if change is not None else None
        if current is None:
            got = _read(root, cand.rel)
            if isinstance(got, str):  # unreadable: the scan already reported it
                continue
            current = got[0]
        if not (MAIN_GUARD.search(current) and IMPORTS_MEGATRON.search(current)):
            continue
        new = insert_adaptor(current)
        if new is None:
            continue
        at = new.splitlines().index(ADAPTOR) + 1
        edit = _edit(at, ADAPTOR, f"{fw.route.title}: add the adaptor import below `import torch`")
        changes[cand.rel] = with_text(root, cand.rel, new, (*(change.edits if change else ()), edit), change)
    req = "requirements.txt"
    if pin and (root / req).is_file():
        change = changes.get(req)
        got = _read(root, req)
        text = change.after if change is not None else (got[0] if not isinstance(got, str) else None)
        if text is not None and "mindspeed" not in text.lower():
            new = text + ("" if text.endswith("\n") or not text else "\n") + pin + "\n"
            edit = _edit(new.count("\n"), pin, f"{fw.route.title}: pin MindSpeed")
            changes[req] = with_text(root, req, new, (*(change.edits if change else ()), edit), change)
    return replace(plan, changes=tuple(changes[k] for k in sorted(changes)))
