"""The text of the runtime helpers (`migrator/fix/runtime_helpers/`) as `migrate fix` inserts it.

The modules are read as text, never imported (they import torch): a helper is the exact source of
its top-level definitions, so the code the tests run is the code a migrated file gets.
"""

from __future__ import annotations

import ast
from functools import cache
from importlib import resources

PACKAGE = "migrator.fix.runtime_helpers"


@cache
def module_text(module: str) -> str:
    """The whole source of `migrator/fix/runtime_helpers/<module>.py`."""
    return resources.files(PACKAGE).joinpath(f"{module}.py").read_text(encoding="utf-8")


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    return set()


@cache
def definitions(module: str, *names: str) -> str:
    """The named top-level definitions of `module` (functions with their decorators, classes,
    assignments), in the module's order, separated by two blank lines. A name the module does not
    define is a programming error (KeyError), caught by the tests that build every helper."""
    text = module_text(module)
    lines = text.splitlines()
    wanted = set(names)
    pieces = []
    for node in ast.parse(text).body:
        defined = _defined_names(node) & wanted
        if not defined:
            continue
        wanted -= defined
        decorators = getattr(node, "decorator_list", [])
        start = min([node.lineno, *(d.lineno for d in decorators)])
        pieces.append("\n".join(lines[start - 1 : node.end_lineno]))
    if wanted:
        raise KeyError(f"{PACKAGE}.{module} defines no {', '.join(sorted(wanted))}")
    return "\n\n\n".join(pieces) + "\n"
