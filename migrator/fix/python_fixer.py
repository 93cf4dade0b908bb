"""Apply fixes to one Python module with libcst, keeping the user's formatting.

Findings come from the `ast` scanner; each is matched to the libcst node with the same source range
and rewritten by its rule's fix (`rename` or a named transform). Imports are then tidied: renamed
in place, removed when a fixed library's last use is gone, and `import torch_npu` added once.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypeVar, cast

import libcst as cst

from migrator.catalogue import units
from migrator.catalogue.loader import Rule
from migrator.catalogue.site import CallSite, Declined, is_package_init
from migrator.engine.guards import AVAILABILITY, cuda_only, guarded_calls
from migrator.engine.import_scopes import IMPORT_EXPORTED, ImportScopes
from migrator.engine.python_checker import collect_aliases
from migrator.engine.sites import IMPORT_STAYS, IMPORT_UNUSED, manual_rule, name_uses
from migrator.engine.statements import iter_statements
from migrator.fix import module_fixes, syntax
from migrator.fix.context import Checkpoint, FixContext
from migrator.fix.dropped_args import rejoin_arguments
from migrator.fix.entry_points import takes_adaptor
from migrator.fix.import_order import ImportStyle
from migrator.fix.import_removal import kept_by_untouched_uses, remove_unused_imports, rewritten_names
from migrator.fix.imports import (
    REMOVABLE_ROOTS,
    USES_TORCH_NPU,
    Key,
    ensure_module_imports,
    rewrite_import,
    symbol_replacement,
    torch_npu_used,
)
from migrator.fix.positions import NodePositions, node_positions, source_texts
from migrator.fix.runtime_module import RuntimeImport
from migrator.fix.scanned_declines import declined_as_scanned
from migrator.fix.sites import build_site
from migrator.fix.stand_ins import StandIns, WholeModuleNeeded, stand_ins
from migrator.fix.verbatim import with_source_text
from migrator.ground.kinds import Target
from migrator.ground.model import Finding

Node = TypeVar("Node", bound=cst.CSTNode)
ARGUMENT_LEVEL = "argument"  # a unit whose finding is a keyword's value rewrites the whole argument


def key_of(f: Finding) -> Key:
    return (f.line, f.column - 1, f.end_line, f.end_column - 1)


@dataclass
class PythonFixResult:
    text: str
    applied: list[Finding]
    declined: list[tuple[Finding, str]]
    runtime_names: frozenset[str] = frozenset()  # imported from the tree's `_migrate_runtime` module


class _Fixer(cst.CSTTransformer):
    def __init__(self, ctx: FixContext, findings: dict[Key, list[Finding]], rules: dict[str, Rule], module: cst.Module,
                 work_lines: list[int], positions: NodePositions):
        super().__init__()
        self.ctx = ctx
        self.positions = positions.ranges
        self.skipped = positions.skipped  # top-level statements without work: not walked into
        # lines where something may be rewritten: a statement holding none of them is not walked into
        self.work_lines = work_lines
        self.module = module  # its indentation and newline settings render a statement on its own
        self.findings = findings
        self.rules = rules
        self.call_funcs: dict[int, Key] = {}  # id(original callee node) -> its range
        self.first_arg_of: dict[int, cst.Call] = {}  # id(original first positional argument) -> its call
        self.assigned_values: set[int] = set()  # ids of the original whole values of assignments
        self.defaults_with_choices: set[int] = set()  # id of each original `default=` value beside a `choices=`
        self.guards: dict[int, str] = {}  # line of an availability check -> the CUDA-only call it guards
        self.done: set[tuple[Key, str]] = set()
        self.removable: set[str] = set()  # import-bound names whose uses were rewritten
        self.import_findings: list[Finding] = []  # transform findings on import lines
        self.pattern_depth = 0  # inside a `case` pattern
        self.fstring_quotes: list[str] = []  # closing quotes of the f-strings around the node
        self.statements: list[Checkpoint | None] = []  # checkpoints of the statements being fixed
        self.dropped_args: set[int] = set()  # ids of the original arguments a fix removed

    def _key(self, node: cst.CSTNode) -> Key | None:
        r = self.positions.get(node)
        if r is None:
            return None
        return (r.start.line, r.start.column, r.end.line, r.end.column)

    def _apply(self, updated: cst.CSTNode, key: Key | None, at_call: bool, is_callee: bool,
               original: cst.CSTNode | None = None, call: cst.Call | None = None) -> cst.CSTNode | cst.RemovalSentinel:
        """Rewrite the findings at `key`: each through its rule's precheck (the scanner's question,
        on the libcst site), then its `fix`. `original`/`call`: the node as written and its call."""
        if key is None or key not in self.findings:
            return updated
        for finding in self.findings[key]:
            if (key, finding.code) in self.done:
                continue
            rule = self.rules[finding.code]
            level = units.level(rule)
            if is_callee and level in ("call", "either"):
                continue  # rewritten with its call, in leave_Call
            if (level == ARGUMENT_LEVEL) != isinstance(updated, cst.Arg):
                continue  # a keyword's value: rewritten (or dropped) with its whole argument, in leave_Arg
            self.done.add((key, finding.code))
            unit = units.unit(rule)
            fix = getattr(unit, "fix", None)
            if fix is None:
                self.ctx.decline(finding, f"no automatic fix in {rule.unit_module} yet")
                continue
            site = build_site(self.ctx, finding, original if original is not None else updated, call if at_call else None,
                              in_pattern=self.pattern_depth > 0, default_of_choices=id(original) in self.defaults_with_choices,
                              guards=self.guards.get(finding.line, "") if finding.symbol == AVAILABILITY else "",
                              passed_in=None if at_call else self.first_arg_of.get(id(original)),
                              assigned=id(original) in self.assigned_values)
            verdict = units.precheck(rule, site)
            if isinstance(verdict, Declined):
                self.ctx.decline(finding, verdict.reason)
                continue
            mark = self.ctx.checkpoint()
            result = fix(self.ctx, updated, finding, rule)
            if result is None or isinstance(result, Declined):
                self.ctx.decline(finding, result.reason if result is not None else "the fix did not apply at this site")
                continue
            self.ctx.applied.append(finding)
            if isinstance(result, cst.RemovalSentinel):
                return result  # the argument is dropped: nothing left to rewrite
            fitted, misfit = self._fit(updated, result)
            if misfit:
                self.ctx.undo_since(mark, misfit)
                continue
            updated = fitted
        return updated

    def _fit(self, node: cst.CSTNode, new: cst.CSTNode) -> tuple[cst.CSTNode, str | None]:
        """`new` as it may replace `node` where it stands, or why it cannot."""
        if self.pattern_depth and not syntax.fits_pattern(node, new):
            return new, syntax.PATTERN_REASON
        if self.fstring_quotes and not syntax.fits_fstring(node, new, self.fstring_quotes):
            new = syntax.requote(new, self.fstring_quotes)  # "npu" -> 'npu' inside f"..."
            if not syntax.fits_fstring(node, new, self.fstring_quotes):
                return new, syntax.FSTRING_REASON
        return new, None

    # A statement holding a rewrite must still parse on its own (simple statements whole, compound
    # statements by their headers: decorators, `with` items, `for` targets); if it does not, its
    # rewrites are undone and declined.
    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.BaseStatement):
            if self._nothing_inside(node):
                self.statements.append(None)  # on_leave still runs and pops it
                return False  # nothing to rewrite in here: keep it as it is, unvisited
            self.statements.append(self.ctx.checkpoint())
        return super().on_visit(node)

    def _nothing_inside(self, node: cst.BaseStatement) -> bool:
        # Only statements are skipped: their range holds everything inside them once decorators are
        # counted (a parameter's range, say, leaves out its default value, so expressions are not).
        if id(node) in self.skipped:
            return True
        r = self.positions.get(node)
        if r is None:
            return False
        decorators = getattr(node, "decorators", ())
        first = self.positions[decorators[0]].start.line if decorators else r.start.line
        at = bisect.bisect_left(self.work_lines, first)
        return at == len(self.work_lines) or self.work_lines[at] > r.end.line

    def on_leave(self, original: Node, updated: Node) -> Node | cst.RemovalSentinel | cst.FlattenSentinel[Node]:
        result = super().on_leave(original, updated)
        if isinstance(original, cst.BaseStatement):
            mark = self.statements.pop()
            if (
                mark is not None
                and len(self.ctx.applied) > mark.applied
                and isinstance(result, cst.BaseStatement)
                and not syntax.parses_alone(result, self.module)
                and syntax.parses_alone(original, self.module)
            ):
                self.ctx.undo_since(mark, syntax.STATEMENT_REASON)
                return original
        return result

    def visit_MatchCase_pattern(self, node: cst.MatchCase) -> None:
        self.pattern_depth += 1

    def leave_MatchCase_pattern(self, node: cst.MatchCase) -> None:
        self.pattern_depth -= 1

    def visit_FormattedString_parts(self, node: cst.FormattedString) -> None:
        self.fstring_quotes.append(syntax.fstring_quote(node))

    def leave_FormattedString_parts(self, node: cst.FormattedString) -> None:
        self.fstring_quotes.pop()

    def visit_Call(self, node: cst.Call) -> bool:
        key = self._key(node.func)
        if key is not None:
            self.call_funcs[id(node.func)] = key
        if node.args and node.args[0].keyword is None and not node.args[0].star:
            self.first_arg_of[id(node.args[0].value)] = node
        if any(a.keyword is not None and a.keyword.value == "choices" for a in node.args):
            self.defaults_with_choices.update(
                id(a.value) for a in node.args if a.keyword is not None and a.keyword.value == "default")
        return True

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigned_values.add(id(node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.assigned_values.add(id(node.value))

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg | cst.RemovalSentinel:
        new = self._apply(updated, self._key(original.value), at_call=False, is_callee=False, original=original.value)
        if isinstance(new, cst.RemovalSentinel):
            self.dropped_args.add(id(original))
        return cast("cst.Arg | cst.RemovalSentinel", new)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        updated = rejoin_arguments(original, updated, self.dropped_args)  # no layout or comment lost with them
        new = self._apply(updated, self._key(original), at_call=True, is_callee=id(original) in self.call_funcs,
                          original=original, call=original)
        func_key = self.call_funcs.get(id(original.func))
        if isinstance(new, cst.Call) and func_key is not None:
            new = self._apply(new, func_key, at_call=True, is_callee=False, original=original.func, call=original)
        return cast(cst.BaseExpression, new)  # an expression's fix returns an expression

    # named as libcst's leave_* methods name them, so it stands in for each of them
    def _leave_expr(self, original_node: cst.BaseExpression, updated_node: cst.BaseExpression) -> cst.BaseExpression:
        new = self._apply(updated_node, self._key(original_node), at_call=False,
                          is_callee=id(original_node) in self.call_funcs, original=original_node)
        return cast(cst.BaseExpression, new)  # an expression's fix returns an expression

    leave_Attribute = _leave_expr
    leave_Name = _leave_expr
    leave_Integer = _leave_expr
    leave_SimpleString = _leave_expr
    leave_FormattedString = _leave_expr
    leave_ConcatenatedString = _leave_expr
    leave_Comparison = _leave_expr

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        return False  # import aliases are rewritten as a whole by rewrite_import

    def leave_Import(
        self, original: cst.Import, updated: cst.Import
    ) -> cst.Import | cst.FlattenSentinel[cst.BaseSmallStatement]:
        return rewrite_import(self, original, updated)

    def leave_ImportFrom(
        self, original: cst.ImportFrom, updated: cst.ImportFrom
    ) -> cst.ImportFrom | cst.FlattenSentinel[cst.BaseSmallStatement]:
        return rewrite_import(self, original, updated)


def import_renames(
    findings: list[Finding], rules: dict[str, Rule], aliases: dict[str, set[str]], target: str
) -> dict[str, str]:
    """local name -> qualified name after the fix, for aliases bound to a renamed symbol."""
    if target != Target.NPU:
        return {}
    renamed: dict[str, str] = {}
    for f in findings:
        rule = rules[f.code]
        if rule.fix != "rename" or f.fix is None or f.family == "environment":
            continue
        new = symbol_replacement(f)
        if new is None:
            continue
        for local, quals in aliases.items():
            if quals == {f.symbol} and (local != f.symbol.split(".")[0] or "." not in f.symbol):
                renamed[local] = new
    return renamed


def _keys(findings: list[Finding], shifted: dict[int, int]) -> dict[Key, list[Finding]]:
    """Findings by source range; `shifted`: characters removed from the start of a line (form feeds)."""
    by_key: dict[Key, list[Finding]] = defaultdict(list)
    for f in findings:
        line, col, end_line, end_col = key_of(f)
        by_key[(line, col - shifted.get(line, 0), end_line, end_col - shifted.get(end_line, 0))].append(f)
    return by_key


def fix_python(text: str, findings: list[Finding], rules: dict[str, Rule], target: str, entry_point: bool,
               runtime: RuntimeImport | None = None, style: ImportStyle | None = None,
               context: Sequence[Finding] = (), torch_autoload: bool = False) -> PythonFixResult:
    """`runtime`: where the tree's `_migrate_runtime` module is for this file (portable target; None:
    the device helpers are copied into the file); `style`: the repository's import sorting; `context`:
    every finding of the file, manual ones too (default: `findings`); `torch_autoload`: the pinned torch
    loads torch_npu on `import torch` (`fix/torch_pin.py`), so only entry points import it for its effect."""
    original_text = text
    text, shifted = syntax.normalise_form_feeds(text)
    tree = ast.parse(text)
    by_node, whole = module_fixes.split(findings, rules)  # `whole`: fixed over the module, after the walk
    by_key = _keys(by_node, shifted)
    work_lines = sorted({k[0] for k in by_key})  # an import without a finding is left as it is here
    # a module-level fix reads the whole module; elsewhere the statements without work stand in (fix/stand_ins.py)
    stand = None if whole else stand_ins(text, tree, work_lines)
    if stand is not None:
        try:
            return _fix(_Module(original_text, text, tree, by_key, whole, work_lines), findings, rules, target, entry_point,
                        runtime, style, context, torch_autoload, stand)
        except WholeModuleNeeded:
            pass
    return _fix(_Module(original_text, text, tree, by_key, whole, work_lines), findings, rules, target, entry_point,
                runtime, style, context, torch_autoload)


@dataclass(frozen=True)
class _Module:
    """A module as `fix_python` prepared it: its text (form feeds dropped from indentation), `ast` tree,
    findings by source range (those fixed over the whole module apart) and the lines they start on."""
    original_text: str
    text: str
    tree: ast.Module
    by_key: dict[Key, list[Finding]]
    whole: list[Finding]
    work_lines: list[int]


def _fix(prepared: _Module, findings: list[Finding], rules: dict[str, Rule], target: str, entry_point: bool,
         runtime: RuntimeImport | None, style: ImportStyle | None, context: Sequence[Finding], torch_autoload: bool,
         stand: StandIns | None = None) -> PythonFixResult:
    """`fix_python` over the whole module, or (`stand`) with its statements without work stood in for:
    raises `WholeModuleNeeded` where that cannot give the same result."""
    original_text, text, tree, by_key, whole, work_lines = (
        prepared.original_text, prepared.text, prepared.tree, prepared.by_key, prepared.whole, prepared.work_lines)
    aliases = collect_aliases(tree)
    import_lines = {n.lineno for n in iter_statements(tree) if isinstance(n, (ast.Import, ast.ImportFrom))}
    ctx = FixContext(target=target, aliases=aliases, module_text=text, runtime=runtime,
                     import_style=style or ImportStyle())
    ctx.import_renames = import_renames(findings, rules, aliases, target)
    module = _parsed(text, original_text, tree, findings, rules, stand)
    if isinstance(module, PythonFixResult):
        return module
    top = tree if stand is None else ast.Module(body=stand.body, type_ignores=[])  # one node per stand-in
    module = module if stand is None else stand.install(module)
    positions = node_positions(module, top, text, work_lines)
    rendered = source_texts(module, top, text) if not positions.complete else {}
    fixer = _Fixer(ctx, by_key, rules, module, work_lines, positions)
    fixer.guards = guarded_calls(  # the scan's question on the scan's findings (engine/sites.precheck_hits)
        tree, [f.line for f in findings if f.symbol == AVAILABILITY],
        [(f.line, f.symbol) for f in context or findings if f.line not in import_lines and cuda_only(f.symbol, manual_rule(rules[f.code]))])
    new_module = module.visit(fixer)
    new_module = module_fixes.apply_module_fixes(ctx, new_module, tree, whole, rules)
    candidates = _removal_candidates(fixer, ctx, tree, text, whole)
    if stand is not None and stand.mentions(candidates):
        raise WholeModuleNeeded  # the removal counts each name's uses over the whole module, per function
    # built on first use: most modules remove no import and judge none
    scopes = cache(lambda: ImportScopes(tree, name_uses, bool(findings) and is_package_init(findings[0].path)))
    # a Megatron script's module-level `import torch` anchors the MindSpeed adaptor (`routes/fix.insert_adaptor`);
    # elsewhere an `import torch` the fix left unused goes (torch_npu, or the runtime helper, registers the device)
    anchors = {local for local, quals in ctx.aliases.items() if quals == {"torch"}} if takes_adaptor(text) else set()
    new_module, removed = remove_unused_imports(
        module, new_module, candidates, lambda s, n: (s is None and n in anchors) or scopes().re_exported(s, n))
    # imports the scan already called manual never reach `fixer.import_findings`: judged here the same way
    seen = {id(f) for f in ctx.applied} | {id(f) for f, _ in ctx.declined} | {id(f) for f in fixer.import_findings}
    pending = [f for f in findings if id(f) not in seen and f.fix is None and f.line in import_lines]

    def bound_by(f: Finding) -> list[tuple[int | None, str]]:  # (scope, name) of each name the import binds
        return [(scopes().scope_at_line(f.line, local), local) for local, quals in aliases.items() if f.symbol in quals]

    def import_kept(f: Finding) -> str:  # why an import the fix does not remove stays (as the scan says)
        bound = bound_by(f)
        if any(scopes().re_exported(scope, local) for scope, local in bound):
            return IMPORT_EXPORTED
        return IMPORT_UNUSED if bound and not any(scopes().uses(scope).get(local) for scope, local in bound) else IMPORT_STAYS

    for f in pending:
        renamed = rules[f.code].fix == "rename"  # an alias renamed in place: the rule's own verdict
        verdict = units.precheck(rules[f.code], CallSite(f.code, f.symbol, target, is_import=True)) if renamed else None
        ctx.decline(f, verdict.reason if isinstance(verdict, Declined) else import_kept(f))
    for f in fixer.import_findings:
        if f.symbol and any(pair in removed for pair in bound_by(f)):
            ctx.applied.append(f)
        elif all(f is not a for a in ctx.applied):
            ctx.decline(f, import_kept(f))
    if not ctx.applied:  # the text stays: nothing below can decline a finding
        return _unchanged(original_text, findings, ctx)
    # the statements the fix left alone keep their source text; only rewritten ones are rendered
    code = render(new_module, rendered, positions.cuts) if target == Target.NPU and ctx.applied else None  # for both questions
    ctx.needs_torch_npu = _needs_torch_npu(ctx, tree, new_module, lambda: render(new_module, rendered, positions.cuts), code,
                                           entry_point, torch_autoload, stand)
    if stand is not None and stand.mentions({*ctx.helpers, *(ctx.runtime_names if ctx.runtime is not None else ()),
                                             *(("torch_npu",) if code is None else ())}):
        raise WholeModuleNeeded  # the helpers' imports and definitions are judged on the names the module uses
    new_module = ensure_module_imports(new_module, ctx, code)
    _unchanged(original_text, findings, ctx)
    fixed = syntax.keep_final_cr(original_text, render(new_module, rendered, positions.cuts))
    return PythonFixResult(fixed, ctx.applied, ctx.declined, frozenset(ctx.runtime_names))




def _unchanged(original_text: str, findings: list[Finding], ctx: FixContext) -> PythonFixResult:
    """The module as it was, every finding neither applied nor declined declined (no form feed moved for nothing)."""
    seen = {id(f) for f in ctx.applied} | {id(f) for f, _ in ctx.declined}
    for f in findings:
        if id(f) not in seen:
            ctx.decline(f, "the fix did not apply at this site")
    return PythonFixResult(original_text, ctx.applied, ctx.declined)


def _parsed(text: str, original_text: str, tree: ast.Module, findings: list[Finding], rules: dict[str, Rule],
            stand: StandIns | None) -> cst.Module | PythonFixResult:
    """The module's libcst tree, or its result where it needs none (the scan declined every site: nothing
    to rewrite) or libcst cannot parse it."""
    declined = declined_as_scanned(tree, findings, rules)
    if declined is not None:
        return PythonFixResult(original_text, [], declined)
    try:
        return cst.parse_module(text if stand is None else stand.text)
    except cst.ParserSyntaxError as exc:  # syntax newer than the pinned libcst knows
        if stand is not None:
            raise WholeModuleNeeded from exc  # its message names the line of the whole module's parse
        reason = f"libcst cannot parse this file (line {exc.raw_line}: {exc.message}); fix it by hand"
        return PythonFixResult(original_text, [], [(f, reason) for f in findings])


def _removal_candidates(fixer: _Fixer, ctx: FixContext, tree: ast.Module, text: str, whole: list[Finding]) -> set[str]:
    """Import-bound names whose import may have lost its last use: those whose uses a fix took, those of
    fixed CUDA-only libraries (`REMOVABLE_ROOTS`) spelled where something was rewritten, and `torch` where
    its only uses were `torch.cuda.*` (portable)."""
    candidates = fixer.removable | ctx.removable | {
        local for local, quals in ctx.aliases.items() if any(q.split(".")[0] in REMOVABLE_ROOTS for q in quals)
    } | {local for local, quals in ctx.aliases.items() if quals == {"torch"}}
    applied = {id(f) for f in ctx.applied}
    if any(id(f) in applied for f in whole):  # a module-level fix may rewrite anywhere
        return candidates
    spans = {(f.line, f.end_line) for f in ctx.applied}
    spelled = rewritten_names(tree, text.splitlines(), spans, candidates)
    return spelled - kept_by_untouched_uses(tree, spans, spelled)  # `torch` nearly always keeps a use


NEEDS_REGISTERED_NPU = re.compile(r"\.npu\(|\.is_npu\b|\btorch_npu\b")


def _needs_torch_npu(ctx: FixContext, tree: ast.Module, new_module: cst.Module, rendered: Callable[[], str],
                     code: str | None, entry_point: bool, torch_autoload: bool, stand: StandIns | None = None) -> bool:
    """Whether the fixed module gets `import torch_npu` (npu target; `code`: its text, None when not rendered;
    `stand`: the statements `new_module` holds as source text only)."""
    needs = ctx.needs_torch_npu
    if code is not None and not needs and (entry_point or USES_TORCH_NPU.search(code)):
        needs = True  # `.npu()`, torch.npu and the "npu" device exist once torch_npu is imported
    if (needs and not ctx.needs_torch and not ctx.helpers and not _imports_torch(tree)
            and not NEEDS_REGISTERED_NPU.search(rendered())):
        # no torch here and nothing that exists only once torch_npu is imported ("npu" strings do not):
        # torch_npu is registered where torch is imported (a build file or a config module gets none)
        return False
    if needs and torch_autoload and not entry_point and code is None and stand is not None and stand.mentions(["torch_npu"]):
        raise WholeModuleNeeded  # counted over the whole module's names
    if needs and torch_autoload and not entry_point and not torch_npu_used(new_module, ctx, code):
        return False  # registered by torch's backend autoload (fix/torch_pin.py); CPU-only hosts still import this
    return needs


def _imports_torch(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in ("torch", "torch_npu") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("torch", "torch_npu"):
            return True
    return False


def render(module: cst.Module, memo: dict[int, tuple[cst.CSTNode, str]],
           cuts: dict[int, tuple[cst.CSTNode, str, str]] | None = None) -> str:
    """`module.code`, rendering each top-level statement once across calls: the imports added last
    leave the other statements as they were, and rendering megatron-core's modules twice cost a fifth
    of its fix time. Inside a rewritten statement, the nested statements in `cuts` (unchanged, their
    source text known) are emitted as that text (`verbatim.with_source_text`)."""
    if not module.has_trailing_newline or not module.body:
        return module.code  # libcst trims or adds the final newline token: leave that to it
    parts = [module.code_for_node(line) for line in module.header]
    for stmt in module.body:
        known = memo.get(id(stmt))
        if known is None or known[0] is not stmt:
            known = memo[id(stmt)] = (stmt, module.code_for_node(with_source_text(stmt, cuts) if cuts else stmt))
        parts.append(known[1])
    parts.extend(module.code_for_node(line) for line in module.footer)
    return "".join(parts)
