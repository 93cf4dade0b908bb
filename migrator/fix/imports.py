"""Import bookkeeping for fixes: renaming import aliases, removing imports whose last use is gone,
and adding `import torch_npu` / `import torch` / helpers once, in the right place."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

import libcst as cst

from migrator.catalogue.loader import Rule, load_catalogue
from migrator.fix.context import FixContext
from migrator.fix.import_removal import AnyImport, bound_name, name_counts
from migrator.fix.runtime_module import PROVIDES
from migrator.ground.kinds import Target
from migrator.ground.model import Finding

Key = tuple[int, int, int, int]  # a node's source range: line, column, end line, end column
TopLevel = cst.SimpleStatementLine | cst.BaseCompoundStatement  # what a module body holds

# Library roots whose imports are removed once the last use is fixed (never when they were unused).
REMOVABLE_ROOTS = ("apex", "amp_C", "flash_attn", "xformers")


def symbol_replacement(finding: Finding) -> str | None:
    hit = load_catalogue().match_symbol(finding.symbol)
    return hit.replacement if hit else None


def dotted_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted_name(node.value)}.{node.attr.value}"
    raise ValueError("not a dotted name")


def _name_expr(dotted: str) -> cst.Attribute | cst.Name:
    return cst.parse_expression(dotted)  # type: ignore[return-value]


class ImportFixer(Protocol):
    """What `rewrite_import` needs of the module fixer (`fix/python_fixer._Fixer`, which imports this module)."""

    ctx: FixContext
    findings: dict[Key, list[Finding]]
    rules: dict[str, Rule]
    done: set[tuple[Key, str]]
    removable: set[str]
    import_findings: list[Finding]

    def _key(self, node: cst.CSTNode) -> Key | None: ...


def rewrite_import(
    fixer: ImportFixer, original: AnyImport, updated: AnyImport
) -> AnyImport | cst.FlattenSentinel[cst.BaseSmallStatement]:
    """Apply rename fixes found on import aliases; returns the (possibly split) statement."""
    if isinstance(updated.names, cst.ImportStar):
        assert isinstance(original, cst.ImportFrom)  # only `from X import *` has a star
        _decline_star(fixer, original)
        return updated
    renamed = _alias_renames(fixer, original)
    if not renamed:
        return updated
    if isinstance(updated, cst.Import):
        names = [
            alias.with_changes(name=_name_expr(renamed[i])) if i in renamed else alias
            for i, alias in enumerate(updated.names)
        ]
        return updated.with_changes(names=names)
    return _split_from_import(updated, renamed)


def _alias_renames(fixer: ImportFixer, original: cst.Import | cst.ImportFrom) -> dict[int, str]:
    """alias index -> its new qualified name, for the rename fixes on the statement's aliases; other
    fixes on an alias mark its bound name removable once its uses are fixed."""
    ctx = fixer.ctx
    renamed: dict[int, str] = {}
    assert not isinstance(original.names, cst.ImportStar)
    for i, alias in enumerate(original.names):
        key = fixer._key(alias)
        if key is None:
            continue
        for finding in fixer.findings.get(key, []):
            rule: Rule = fixer.rules[finding.code]
            fixer.done.add((key, finding.code))
            if rule.fix != "rename" or finding.fix is None:
                if finding.fix is not None:
                    fixer.removable.add(bound_name(alias))
                    fixer.import_findings.append(finding)
                continue
            new = symbol_replacement(finding)
            if new is None or ctx.target != Target.NPU:
                ctx.decline(finding, "imports are renamed for the npu target only; use the module-level name")
                continue
            renamed[i] = new
            ctx.applied.append(finding)
            if "npu" in new.split("."):
                ctx.needs_torch_npu = True
    return renamed


def _split_from_import(
    updated: cst.ImportFrom, renamed: dict[int, str]
) -> cst.ImportFrom | cst.FlattenSentinel[cst.BaseSmallStatement]:
    """`from X import a, b` with renamed aliases: one statement per target module, original order kept."""
    assert updated.module is not None and not isinstance(updated.names, cst.ImportStar)
    module = dotted_name(updated.module)
    groups: dict[str, list[cst.ImportAlias]] = {}
    for i, alias in enumerate(updated.names):
        if i in renamed:
            new_module, _, new_name = renamed[i].rpartition(".")
            old_name = alias.name.value if isinstance(alias.name, cst.Name) else dotted_name(alias.name)
            asname = alias.asname
            if new_name != old_name and asname is None:
                asname = cst.AsName(name=cst.Name(old_name))  # keep the local name the code uses
            alias = alias.with_changes(name=cst.Name(new_name), asname=asname)
        else:
            new_module = module
        groups.setdefault(new_module, []).append(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    statements: list[cst.ImportFrom] = []
    for mod, aliases in groups.items():
        aliases[-1] = aliases[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        stmt = updated.with_changes(module=_name_expr(mod), names=aliases)
        if len(aliases) == 1 or mod != module:
            stmt = stmt.with_changes(lpar=None, rpar=None) if len(aliases) == 1 else stmt
        statements.append(stmt)
    return statements[0] if len(statements) == 1 else cst.FlattenSentinel(statements)


def _decline_star(fixer: ImportFixer, original: cst.ImportFrom) -> None:
    """`from torch.cuda import *`: the names it binds are unknown here, so nothing is renamed."""
    nodes: list[cst.CSTNode] = [original, *(n for n in (original.names, original.module) if isinstance(n, cst.CSTNode))]
    for node in nodes:
        key = fixer._key(node)
        if key is None:
            continue
        for finding in fixer.findings.get(key, []):
            if (key, finding.code) not in fixer.done:
                fixer.done.add((key, finding.code))
                fixer.ctx.decline(finding, "a star import binds names that cannot be renamed: import them by name")


def _is_import_of(stmt: cst.CSTNode, module: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                if dotted_name(alias.name) == module or dotted_name(alias.name).startswith(module + "."):
                    return True
        if isinstance(small, cst.ImportFrom) and small.module is not None and dotted_name(small.module) == module:
            return True
    return False


def _binds(stmt: cst.CSTNode, name: str) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            if any(bound_name(a) == name for a in small.names):
                return True
    return False


def _binds_anywhere(module: cst.Module, name: str) -> bool:
    return any(_binds(s, name) for s in module.body) or any(
        _binds(inner, name)
        for s in module.body
        if isinstance(s, cst.Try)
        for inner in s.body.body
    )


def _insert_at(module: cst.Module) -> int:
    """Index after the module docstring, `from __future__` imports and leading imports."""
    i = 0
    body = list(module.body)
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr):
        if isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
            i = 1
    while i < len(body) and isinstance(body[i], cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and s.module is not None and dotted_name(s.module) == "__future__"
        for s in body[i].body  # type: ignore[union-attr]  # a SimpleStatementLine, checked above
    ):
        i += 1
    return i


TORCH_NPU = "import torch_npu\n"
# `import torch_npu` registers `torch.npu`, `.npu()` and the "npu" device: unused as a name, so lint
# tools (pyflakes, `ruff --fix`) would delete it without the noqa while the npu calls stay.
TORCH_NPU_SIDE_EFFECT = 'import torch_npu  # noqa: F401  registers the Ascend "npu" device\n'
# Code that reads as using torch_npu once fixed: it must import it.
USES_TORCH_NPU = re.compile(r"""\.npu\(|\btorch\.npu\b|\btorch_npu\b|\.is_npu\b|["']npu\b|["']hccl\b""")

TORCH_NPU_GUARDED = """try:
    import torch_npu  # noqa: F401  registers the Ascend "npu" device when torch-npu is installed
except ImportError:
    torch_npu = None
"""


def ensure_module_imports(module: cst.Module, ctx: FixContext, code: str | None = None) -> cst.Module:
    """Every import the file's fixes scheduled, added once: `import torch` and `import torch_npu` (npu;
    portable: guarded, after the block holding torch, with the device helpers), standard-library
    modules and the tree's runtime module, each where isort / ruff would sort it in the repository's
    style (`fix/import_order.py`), then the inline helpers after the leading imports. Nothing already
    bound is imported again; nothing goes above the docstring or `from __future__`. `code`: the
    module's text when the caller has it (saves a walk of the tree)."""
    from migrator.fix.import_order import STDLIB, THIRD_PARTY, insert_sorted

    style = ctx.import_style
    if ctx.runtime is not None and ctx.runtime_names:
        module = _import_runtime(module, ctx)  # first: its own line sorted among the leading imports
    body = list(module.body)
    lines, guarded, body = _torch_imports(module, ctx, code, body)
    for stmt in lines:
        insert_sorted(body, stmt, _insert_at(module), _block_end(body, _insert_at(module)), style, THIRD_PARTY)
    if guarded is not None:  # a try block ends an import block: after the block that holds torch
        top = _insert_at(module)
        torch_at = max((i for i in range(top, _block_end(body, top)) if _is_import_of(body[i], "torch")), default=None)
        at = _block_end(body, top) if torch_at is None else _run_end(body, torch_at)
        body.insert(at, guarded)
    for name in sorted(ctx.imports):
        if not _binds_anywhere(module, name):
            std = cst.parse_statement(f"import {name}\n")
            insert_sorted(body, std, _insert_at(module), _block_end(body, _insert_at(module)), style, STDLIB)  # type: ignore[arg-type]
    if ctx.helpers:
        _insert_helpers(body, _block_end(body, _insert_at(module)), ctx.helpers)
    return module.with_changes(body=body)


def _torch_imports(
    module: cst.Module, ctx: FixContext, code: str | None, body: list[TopLevel]
) -> tuple[list[cst.SimpleStatementLine], TopLevel | None, list[TopLevel]]:
    """The `import torch` / `import torch_npu` lines to sort in, portable's guarded torch_npu block (or
    None), and `body` with the user's own bare `import torch_npu` given its noqa comment where it now matters."""
    lines: list[cst.SimpleStatementLine] = []
    if (ctx.needs_torch or ctx.helpers) and not _binds_anywhere(module, "torch"):
        lines.append(cst.parse_statement("import torch\n"))  # type: ignore[arg-type]  # a simple statement
    npu_name_used = ctx.target == Target.NPU and ctx.needs_torch_npu and torch_npu_used(module, ctx, code)
    # portable: torch_npu registers the "npu" device the device helpers look for (the runtime module
    # imports it itself); the other helpers run on tensors some device helper already placed
    device_helpers = ctx.target == Target.PORTABLE and any(name in PROVIDES for name in ctx.helpers)
    guarded = None
    if (ctx.needs_torch_npu or device_helpers) and not _binds_anywhere(module, "torch_npu"):
        if ctx.target == Target.NPU:
            lines.append(cst.parse_statement(TORCH_NPU if npu_name_used else TORCH_NPU_SIDE_EFFECT))  # type: ignore[arg-type]
        else:
            guarded = cst.parse_statement(TORCH_NPU_GUARDED)
    elif ctx.target == Target.NPU and ctx.needs_torch_npu and not npu_name_used:
        body = [_with_noqa(s) for s in body]  # the user's own bare `import torch_npu` now matters too
    return lines, guarded, body


def _insert_helpers(body: list[TopLevel], last_import: int, helpers: dict[str, str]) -> None:
    """The inline helpers the file lacks, after the last import of the leading import block."""
    helper_stmts: list[TopLevel] = []
    for name in sorted(helpers):
        if any(isinstance(s, (cst.FunctionDef, cst.ClassDef)) and s.name.value == name for s in body):
            continue
        parsed = cst.parse_module(helpers[name])
        stmts = list(parsed.body)
        stmts[0] = stmts[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        helper_stmts.extend(stmts)
    if helper_stmts and last_import < len(body):
        nxt = body[last_import]
        body[last_import] = nxt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine(), *_strip_blank(nxt.leading_lines)])
    body[last_import:last_import] = helper_stmts


def _block_end(body: list, start: int) -> int:
    """Index of the first statement from `start` on that is not an import (or a guarded import)."""
    i = start
    while i < len(body) and _is_any_import(body[i]):
        i += 1
    return i


def _run_end(body: list, i: int) -> int:
    """End of the blank-line separated run of imports holding `body[i]`."""
    i += 1
    while i < len(body) and _is_any_import(body[i]) and not any(
            line.comment is None for line in getattr(body[i], "leading_lines", ())):
        i += 1
    return i


def _import_runtime(module: cst.Module, ctx: FixContext) -> cst.Module:
    """`from _migrate_runtime import ...` for the runtime helpers the file now uses, through libcst's
    AddImportsVisitor: an existing import of the module is extended, a name already imported is not
    imported again, and a new statement goes after the docstring, `from __future__` and the leading
    imports. A name the file defines itself (an inline helper of an earlier run) is not imported."""
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, ImportItem

    assert ctx.runtime is not None
    counts = name_counts(module)
    helper_text = "\n".join(ctx.helpers.values())
    defined = {s.name.value for s in module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    used = {
        n for n in ctx.runtime_names
        if (counts.get(n, 0) > 0 or re.search(rf"\b{n}\b", helper_text)) and n not in defined
    }
    ctx.runtime_names = used
    if not used:
        return module
    if ctx.runtime.level:
        return _import_runtime_relative(module, ctx.runtime.level, used)
    items = [ImportItem(ctx.runtime.module, name, relative=ctx.runtime.level) for name in sorted(used)]
    # the visitor only places imports in (and reads existing ones from) the leading import block; it
    # walks and copies the module it gets, so it gets that block alone (a 2 000-line module cost 0.6 s)
    lead = _leading_block_end(module)
    head = AddImportsVisitor(CodemodContext(), items).transform_module(module.with_changes(body=module.body[:lead]))
    body = list(head.body)
    added = next((i for i, stmt in enumerate(body) if _is_runtime_import(stmt, ctx.runtime.module)
                  and not any(_is_runtime_import(old, ctx.runtime.module) for old in module.body[:lead])), None)
    if added is not None:  # a new line (not an existing import extended): sorted into its section
        from migrator.fix.import_order import FIRST_PARTY, LOCAL, insert_sorted

        stmt = body.pop(added).with_changes(leading_lines=())
        top = _insert_at(head)
        insert_sorted(body, stmt, top, _block_end(body, top), ctx.import_style,  # type: ignore[arg-type]
                      LOCAL if ctx.runtime.level else FIRST_PARTY)
    return head.with_changes(body=[*body, *module.body[lead:]])


def _is_runtime_import(stmt: cst.CSTNode, name: str) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and any(
        isinstance(s, cst.ImportFrom) and s.module is not None and dotted_name(s.module) == name for s in stmt.body)


def runtime_import_block(level: int, names: list[str]) -> str:
    """The relative import of the tree's runtime module, with its fallback for a file Python runs outside
    its package (by path: no parent package for the relative import); migrator/fix/runtime_module.py."""
    listed = ", ".join(names)
    loaded = "".join(f"    {n} = _migrate_runtime.{n}\n" for n in names)
    return (
        f"try:\n    from {'.' * level}_migrate_runtime import {listed}\n"
        "except ImportError:  # run outside its package (by path): load the tree's copy from its file\n"
        "    import importlib.util as _migrate_util\n"
        "    from pathlib import Path as _MigratePath\n\n"
        "    _migrate_spec = _migrate_util.spec_from_file_location(\n"
        f'        "_migrate_runtime", _MigratePath(__file__).resolve().parents[{level - 1}] / "_migrate_runtime.py"\n'
        "    )\n"
        "    _migrate_runtime = _migrate_util.module_from_spec(_migrate_spec)\n"
        "    _migrate_spec.loader.exec_module(_migrate_runtime)\n"
        + loaded
    )


def _runtime_names_in(stmt: cst.CSTNode, level: int) -> list[str] | None:
    """The names an earlier run's runtime block (a `try` opening with the relative import) imports."""
    if not (isinstance(stmt, cst.Try) and stmt.body.body and isinstance(stmt.body.body[0], cst.SimpleStatementLine)):
        return None
    first = stmt.body.body[0].body[0]
    if not (isinstance(first, cst.ImportFrom) and len(first.relative) == level and isinstance(first.module, cst.Name)
            and first.module.value == "_migrate_runtime" and not isinstance(first.names, cst.ImportStar)):
        return None
    return [a.name.value for a in first.names if isinstance(a.name, cst.Name)]


def _import_runtime_relative(module: cst.Module, level: int, used: set[str]) -> cst.Module:
    """The runtime block after the leading imports, or an earlier one extended with the names it lacks."""
    body = list(module.body)
    for i, stmt in enumerate(body):
        names = _runtime_names_in(stmt, level)
        if names is not None:
            if used <= set(names):
                return module
            block = cst.parse_module(runtime_import_block(level, sorted(used | set(names)))).body[0]
            body[i] = block.with_changes(leading_lines=stmt.leading_lines)
            return module.with_changes(body=body)
    lead = _leading_block_end(module)
    block = cst.parse_module(runtime_import_block(level, sorted(used))).body[0]
    body[lead:lead] = [block]
    return module.with_changes(body=body)


def _leading_block_end(module: cst.Module) -> int:
    """Index of the first top-level statement after the docstring and the leading imports."""
    body = module.body
    i = _insert_at(module)
    while i < len(body) and _is_any_import(body[i]):
        i += 1
    return i


_IMPORT_LINE = re.compile(r"^[ \t]*(?:import|from)[ \t].*$", re.MULTILINE)
_TORCH_NPU_NAME = re.compile(r"\btorch_npu\b")


def torch_npu_used(module: cst.Module, ctx: FixContext, code: str | None = None) -> bool:
    """Whether the name `torch_npu` is used (by the module or a helper it gets), not only imported.
    With the module's text, import lines aside, a word match decides (it only picks the noqa comment)."""
    if code is not None:
        used = _TORCH_NPU_NAME.search(_IMPORT_LINE.sub("", code)) is not None
    else:
        used = name_counts(module).get("torch_npu", 0) > 0
    used = used and _used_without_local_import(code if code is not None else module.code)
    return used or any(re.search(r"\btorch_npu\.", source) for source in ctx.helpers.values())


def _used_without_local_import(code: str) -> bool:
    """A use of `torch_npu` outside every function that imports it itself (ultralytics' `if npu: import
    torch_npu` inside a method): only such a use reads the module-level import, else it needs the noqa."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return True
    local: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                isinstance(n, ast.Import) and any(a.name == "torch_npu" and a.asname is None for a in n.names)
                for n in ast.walk(fn)):
            local.update(id(n) for n in ast.walk(fn))
    return any(isinstance(n, ast.Name) and n.id == "torch_npu" and id(n) not in local for n in ast.walk(tree))


Statement = TypeVar("Statement", bound=cst.BaseStatement)


def _with_noqa(stmt: Statement) -> Statement:
    """`import torch_npu` without a comment gets the noqa comment the fixer's own import has."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Import)):
        return stmt
    names = stmt.body[0].names
    if len(names) != 1 or names[0].asname is not None or not isinstance(names[0].name, cst.Name):
        return stmt
    if names[0].name.value != "torch_npu" or stmt.trailing_whitespace.comment is not None:
        return stmt
    comment = TORCH_NPU_SIDE_EFFECT.split("#", 1)[1].rstrip("\n")
    trailing = stmt.trailing_whitespace.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("#" + comment))
    return stmt.with_changes(trailing_whitespace=trailing)


def _strip_blank(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    lines = list(lines)
    while lines and lines[0].comment is None:
        lines.pop(0)
    return lines


def _is_any_import(stmt: cst.CSTNode) -> bool:
    if isinstance(stmt, cst.SimpleStatementLine):
        return all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body)
    if isinstance(stmt, cst.Try):  # try: import x / except ImportError
        return all(_is_any_import(s) for s in stmt.body.body)
    return False
