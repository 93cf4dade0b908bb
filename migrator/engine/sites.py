"""The scanner's side of "one decision": each fixable hit becomes a `CallSite` built from the `ast`
tree and goes through its rule's `precheck` (migrator/catalogue/units.py), the same function `migrate
fix` calls with the site it builds from libcst. A declined site is reported as manual, with the
fixer's reason; an import whose fix is its removal is fixable only if every use of the name it
binds is rewritten away (otherwise the fixer keeps the import).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from migrator.catalogue import units
from migrator.catalogue.site import NOT_LITERAL, STAR_IMPORT, Arg, CallSite, Declined, callee_name, string_shape
from migrator.engine.guards import AVAILABILITY, cuda_only, guarded_calls
from migrator.engine.import_scopes import IMPORT_EXPORTED, ImportScopes
from migrator.engine.node_walk import walk_nodes
from migrator.ground.kinds import FixKind

if TYPE_CHECKING:
    from migrator.catalogue.loader import Rule
    from migrator.engine.source import SourceText

IMPORT_UNUSED = "imported but never used here (an availability probe?): remove or port it by hand"
IMPORT_STAYS = "the import stays while the name is still used"


def segment(source: SourceText, node: ast.AST) -> str:
    """The node's source text (ast offsets are UTF-8 bytes)."""
    line, end_line = getattr(node, "lineno", 0), getattr(node, "end_lineno", None)
    col, end_col = getattr(node, "col_offset", 0), getattr(node, "end_col_offset", None)
    if not line or end_line is None or end_col is None or end_line > len(source.lines):
        return ""
    lines = [source.lines[i].encode("utf-8") for i in range(line - 1, end_line)]
    if len(lines) == 1:
        return lines[0][col:end_col].decode("utf-8", "replace")
    parts = [lines[0][col:], *lines[1:-1], lines[-1][:end_col]]
    return "\n".join(p.decode("utf-8", "replace") for p in parts)


def _value(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def _args(call: ast.Call, source: SourceText) -> tuple[Arg, ...]:
    out = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            out.append(Arg(None, NOT_LITERAL, segment(source, a.value), "*"))
        else:
            out.append(Arg(None, _value(a), segment(source, a)))
    for k in call.keywords:
        out.append(Arg(k.arg, _value(k.value), segment(source, k.value), "" if k.arg else "**"))
    return tuple(out)


def dotted(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"], or None when the chain does not start at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def qualnames_from(aliases: Mapping[str, Iterable[str]]) -> Callable[[ast.AST], set[str]]:
    """The qualified names a node spells through the module's import aliases (`F.silu` ->
    {"torch.nn.functional.silu"}): the scanner's and the fixers' one resolution."""

    def names(node: ast.AST) -> set[str]:
        parts = dotted(node)
        if not parts or parts[0] not in aliases:
            return set()
        rest = ".".join(parts[1:])
        return {f"{base}.{rest}" if rest else base for base in aliases[parts[0]]}

    return names


def build_site(checker: Any, source: SourceText, rule: Rule, node: ast.AST, symbol: str,
               replacement: str | None, extra: dict, target: str, guards: dict[int, str] | None = None) -> CallSite:
    call = node if isinstance(node, ast.Call) else checker.call_of.get(node)
    text = segment(source, node)
    string = ""
    pieces: tuple[tuple[str, str], ...] = ()
    if isinstance(node, (ast.Constant, ast.JoinedStr)):
        string = string_shape(text)
        if isinstance(node, ast.JoinedStr):
            pieces = tuple(
                ("text", str(v.value)) if isinstance(v, ast.Constant)
                else ("expr", "plain" if getattr(v, "conversion", -1) == -1 and getattr(v, "format_spec", None) is None else "formatted")
                for v in node.values
            )
    root = tuple(dotted(node) or ())
    outer = checker.first_arg_of.get(node) if call is None else None
    operands: tuple[str, ...] = ()
    if isinstance(node, ast.Compare):
        operands = tuple(segment(source, o) for o in (node.left, *node.comparators))
    return CallSite(
        code=rule.code, symbol=symbol, target=target, text=text, string=string, pieces=pieces,
        called=call is not None, args=_args(call, source) if call is not None else (), replacement=replacement,
        is_import=bool(extra.get("is_import")), root=root,
        root_names=frozenset(checker.aliases.get(root[0], ())) if root else frozenset(), operands=operands,
        in_pattern=node in checker.pattern_nodes, build_file=checker.build_file,
        default_of_choices=node in checker.defaults_with_choices,
        guards=(guards or {}).get(getattr(node, "lineno", 0), "") if symbol == AVAILABILITY else "",
        passed_to=callee_name(dotted(outer.func) or (), checker.aliases) if outer is not None else "",
        passed_args=_args(outer, source) if outer is not None else (), assigned=node in checker.assigned_values,
    )


def _root_name(node: ast.AST) -> ast.Name | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def name_uses(tree: ast.AST) -> Counter[str]:
    """Every place a name is written as a name (not an attribute, not an import), as libcst counts them
    when the fixer decides whether an import is still used. (Most nodes that write one are `Name`s: counted
    in one pass over the walk by class, the rest looked at one by one; only `.get` is asked of the counts.)"""
    nodes = walk_nodes(tree)
    name = ast.Name
    uses: Counter[str] = Counter([node.id for node in nodes if node.__class__ is name])
    for node in [node for node in nodes if node.__class__ in _NAMING]:
        if isinstance(node, (ast.arg, ast.keyword)) and node.arg:
            uses[node.arg] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            uses[node.name] += 1
        elif isinstance(node, ast.ExceptHandler) and node.name:
            uses[node.name] += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            uses.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            uses[node.name] += 1
        elif isinstance(node, ast.MatchMapping) and node.rest:
            uses[node.rest] += 1
    return uses


# the node classes besides `Name` that write a name (`name_uses`)
_NAMING = frozenset({ast.arg, ast.keyword, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler,
                     ast.Global, ast.Nonlocal, ast.MatchAs, ast.MatchStar, ast.MatchMapping})


def removes_import(rule: Rule) -> bool:
    """The fix of an import of this rule is its removal once the last use is rewritten."""
    return rule.fix not in ("none", "rename") and rule.fix_kind != FixKind.MANUAL


def manual_rule(rule: Rule) -> bool:
    return rule.fix == "none" or rule.fix_kind == FixKind.MANUAL


def precheck_hits(checker: Any, source: SourceText, tree: ast.AST, target: str) -> None:
    """Set `manual_reason` on every hit whose rule's precheck declines it (the fixer's reason)."""
    hits = [(rule, node, symbol, replacement, extra) for rule, node, symbol, replacement, extra in checker.hits
            if not manual_rule(rule) and not extra.get("ambiguous")]
    covered: list[ast.Name] = []  # the names of the uses a fix rewrites away
    imports = []
    guards = guarded_calls(
        tree, [node.lineno for _r, node, symbol, _x, _e in checker.hits if symbol == AVAILABILITY],
        [(node.lineno, symbol) for rule, node, symbol, _x, extra in checker.hits
         if not extra.get("is_import") and cuda_only(symbol, manual_rule(rule))], checker.guard_nodes)
    for rule, node, symbol, replacement, extra in hits:
        if extra.get("is_import") and removes_import(rule):
            imports.append((node, symbol, extra))
            continue
        verdict = units.precheck(rule, build_site(checker, source, rule, node, symbol, replacement, extra, target, guards))
        if isinstance(verdict, Declined):
            extra["manual_reason"] = verdict.reason
        elif (root := _root_name(node)) is not None and removes_import(rule):
            covered.append(root)
    if imports:
        _precheck_imports(imports, covered, ImportScopes(tree, name_uses, checker.package_init), checker.aliases)


def _precheck_imports(imports: Iterable, covered: list[ast.Name], scopes: ImportScopes, aliases: dict[str, set[str]]) -> None:
    """Each import is judged in the scope it binds its name in (`engine/import_scopes.py`), as the fixer does."""
    for node, symbol, extra in imports:
        bound = extra.get("bound")
        if bound == "*":
            extra["manual_reason"] = STAR_IMPORT
            continue
        if symbol not in aliases.get(bound, ()):
            extra["manual_reason"] = IMPORT_STAYS  # `import a.b` binds `a`: removing it is not this fix's call
            continue
        scope = scopes.scope(node, bound)
        uses = scopes.uses(scope).get(bound, 0)
        inside = scopes.inside(scope)
        if scopes.re_exported(scope, bound):
            extra["manual_reason"] = IMPORT_EXPORTED
        elif not uses:
            extra["manual_reason"] = IMPORT_UNUSED
        elif sum(1 for r in covered if r.id == bound and (inside is None or id(r) in inside)) < uses:
            extra["manual_reason"] = IMPORT_STAYS
