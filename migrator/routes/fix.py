"""`migrate fix` with the MindSpeed route (auto or `--route mindspeed`): its one-time edits, added to the plan.

* `import mindspeed.megatron_adaptor` directly below the module-level `import torch` of each entry
  point (a `__main__` script of the scan that imports megatron and holds a finding), as MindSpeed's
  README asks; on `--target portable` only where torch_npu is installed, so the CUDA run is unchanged;
* the MindSpeed requirement pin appended to the root's requirements.txt, when there is one.

What the adaptor patches is not rewritten (api.fix leaves covered findings to the route).
Routes without edits (DeepSpeed, transformers) leave the plan as it is.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.fix.entry_points import takes_adaptor
from migrator.ground.kinds import Target
from migrator.ground.model import RunResult

if TYPE_CHECKING:
    from migrator.fix.runner import Edit, FixPlan

ADAPTOR = "import mindspeed.megatron_adaptor"
# portable: the adaptor redirects torch.cuda to torch.npu, so it is imported on Ascend hosts only
PORTABLE_ADAPTOR = (
    "import importlib.util\n"
    'if importlib.util.find_spec("torch_npu") is not None:  # Ascend: MindSpeed patches Megatron; CUDA runs as before\n'
    "    import mindspeed.megatron_adaptor  # noqa: F401"
)
ROUTE_CODE = "ROUTE"


def insert_adaptor(text: str, line: str = ADAPTOR) -> str | None:
    """The text with `line` below the first module-level `import torch`; None when already there, when the
    module does not import torch at module level, or when it does not parse."""
    if ADAPTOR in text:
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
            return "".join(lines[:at] + [line.replace("\n", newline) + newline] + lines[at:])
    # no module-level `import torch`: not a training entry point (a script that only imports
    # megatron when it is *not* __main__, say); nothing to patch, so the file is left alone
    return None


def _edit(code_line: int, symbol: str, title: str) -> Edit:
    from migrator.fix.runner import Edit

    return Edit(ROUTE_CODE, "exact", title, symbol, code_line, 1, code_line, 1, code_line + 1, code_line + 1,
                len(symbol) + 1)


def _text_on_disk(root: Path, rel: str) -> str | None:
    """The file's text as the fixer reads it (BOM dropped); None when it cannot be read or decoded (the scan
    already reported it)."""
    from migrator.engine.source import UnreadableSource, decode_python, decode_text

    try:
        data = (root / rel).read_bytes()
        source = decode_python(data) if rel.endswith(".py") else decode_text(data)
    except (OSError, UnreadableSource):
        return None
    return source.text.removeprefix("\ufeff")


def add_route_edits(plan: FixPlan, before: RunResult, choice: str, paths: list[Path] | None = None,
                    exclude: tuple[str, ...] = (), target: str = "npu") -> FixPlan:
    """The plan with the route's edits merged in (entry points and requirements.txt), within the scan's paths."""
    from migrator.fix.runner import with_text

    if choice not in ("auto", "mindspeed"):
        return plan
    fw = next((f for f in before.frameworks if f.route is not None and f.route.name == "mindspeed"), None)
    if fw is None or not (fw.covered or fw.gated or choice == "mindspeed"):
        return plan  # auto: nothing the adaptor covers, so nothing relies on it
    root = Path(plan.root)
    pin = next((r.text for r in fw.route.requirements if r.kind == "pin"), None)
    changes = {c.path: c for c in plan.changes}
    from migrator.routes.apply import scan_files

    with_findings = {f.path for f in before.findings}
    adaptor = PORTABLE_ADAPTOR if target == Target.PORTABLE else ADAPTOR
    for rel, _, kind in scan_files(root, paths, exclude):
        if kind != "python" or rel not in with_findings:
            continue  # a file without a finding is never edited
        change = changes.get(rel)
        if change is not None and change.error:
            continue
        current = change.after if change is not None else None
        if current is None:
            current = _text_on_disk(root, rel)
            if current is None:  # unreadable: the scan already reported it
                continue
        if not takes_adaptor(current):
            continue
        new = insert_adaptor(current, adaptor)
        if new is None:
            continue
        at = next(i for i, ln in enumerate(new.splitlines(), 1) if ADAPTOR in ln)
        edit = _edit(at, ADAPTOR, f"{fw.route.title}: add the adaptor import below `import torch`")
        changes[rel] = with_text(root, rel, new, (*(change.edits if change else ()), edit), change)
    req = "requirements.txt"
    in_scan = any(rel == req for rel, _, _ in scan_files(root, paths, exclude))
    if pin and in_scan and (root / req).is_file():
        change = changes.get(req)
        text = change.after if change is not None else _text_on_disk(root, req)
        if text is not None and "mindspeed" not in text.lower():
            new = text + ("" if text.endswith("\n") or not text else "\n") + pin + "\n"
            edit = _edit(new.count("\n"), pin, f"{fw.route.title}: pin MindSpeed")
            changes[req] = with_text(root, req, new, (*(change.edits if change else ()), edit), change)
    return replace(plan, changes=tuple(changes[k] for k in sorted(changes)))
