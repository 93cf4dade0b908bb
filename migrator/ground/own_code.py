"""The code `migrate fix` itself inserted is never a finding nor an unattributed marker.

Recognised by what the fix writes, never by a name prefix (a user's `_migrate_x` is the user's code):
- every helper definition it inserts carries `OWN_MARKER` in its docstring (`migrator/fix/runtime_helpers/`,
  a test checks each one);
- the `_migrate_runtime.py` modules it wrote are listed in the fix record with their hash; while a file still
  hashes to that, the whole file is ours.
"""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

OWN_MARKER = "Added by ascend-migrate."


def is_own_helper(node: ast.AST) -> bool:
    """A function or class whose docstring carries the fix's marker."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    doc = ast.get_docstring(node, clean=False)
    return doc is not None and OWN_MARKER in doc


def own_helpers(tree: ast.AST) -> list[ast.stmt]:
    """The module's top-level helper definitions inserted by the fix (helpers are only inserted there)."""
    return [node for node in getattr(tree, "body", ()) if is_own_helper(node)]


def helper_lines(node: ast.stmt) -> range:
    """The lines of a definition, decorators included."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    return range(start, (node.end_lineno or node.lineno) + 1)


def unchanged_runtime_modules(root: Path) -> frozenset[str]:
    """Root-relative paths of the runtime modules the fix record lists that still hold what the fix wrote
    (an edited one is the user's now and scanned like any file); none without a readable record."""
    path = root / ".migrate" / "fix-record.json"
    if not os.path.lexists(path):  # the record's classes are not imported for a root without one
        return frozenset()
    from migrator.ground.fix_record import FixRecordError, load_if_present

    try:
        record = load_if_present(path, root=root, schema=False)
    except FixRecordError:
        return frozenset()
    out = set()
    for module in record.runtime_modules if record is not None else ():
        try:
            data = (root / module.path).read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() == module.sha256:
            out.add(module.path)
    return frozenset(out)
