"""`migrate fix --fuse` (opt-in): each FUS site becomes a branch to its fused torch_npu op, the
original code kept as the branch every other device takes.

Before the first statement of the pattern (in the function's own body) the fix inserts::

    if getattr(x, "is_npu", False):
        import torch_npu
        return <the function's return value with the pattern's output replaced by the fused call>

`Tensor.is_npu` exists only once torch_npu is imported (torch's privateuse1 methods), so a CPU/CUDA host
takes the original code, an Ascend tensor the fused op, and `migrate validate`'s emulation (which makes
`is_npu` true for the CPU tensors that stand for NPU ones) runs the fused branch. The fused call's
arguments are the AST finding's mapping (`engine/fusion_checker.py`): epsilon, rotary_mode='half', the
original's scale, atten_mask with masked_fill's polarity (True = masked out), head_num from q's BNSD shape.

A site is declined (with the reason) where the rewrite would not be the same computation: the pattern's
result is not what the function returns, an argument is rebound between where the branch goes and
where the pattern reads it, a statement other than an assignment would be skipped by the branch, or a
name in the call is not defined in the module.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from migrator.engine import fusion_attention, fusion_checker
from migrator.engine.python_checker import collect_aliases
from migrator.engine.sites import qualnames_from
from migrator.ground.model import Finding

FUSED_API = {"fusion-rms-norm": "npu_rms_norm", "fusion-swiglu": "npu_swiglu", "fusion-rotary": "npu_rotary_mul",
             "fusion-attention": "npu_fusion_attention"}
GUARD = 'getattr({x}, "is_npu", False)'


@dataclass(frozen=True)
class Site:
    impl: str
    node: ast.AST  # what the finding points at
    mapping: str  # the finding's fused call


@dataclass(frozen=True)
class Rewrite:
    impl: str
    line: int  # the site's line (the finding's)
    insert_at: int  # 1-based line the branch goes before
    indent: str
    block: str  # the branch, indented, ending in a newline


def sites(func: ast.AST, names: fusion_checker.Names) -> tuple[fusion_checker.Body, list[Site]]:
    """The function's fusion sites, as the scan finds them."""
    body = fusion_checker.Body(func, names)
    found: list[Site] = []

    def emit(impl: str, node: ast.AST, symbol: str, mapping: str) -> None:
        found.append(Site(impl, node, mapping))

    fusion_checker.detect_all(body, emit, fusion_attention.attention)
    return body, sorted(found, key=lambda s: (getattr(s.node, "lineno", 0), getattr(s.node, "col_offset", 0)))


def _fused_call(site: Site) -> ast.expr:
    """The finding's mapping as an expression, with what the advice leaves to the reader filled in."""
    text = site.mapping
    swap = " after swapping the halves"
    if site.impl == "fusion-swiglu" and swap in text:
        call = ast.parse(text.split(swap)[0], mode="eval").body
        assert isinstance(call, ast.Call)
        dim = next((k.value for k in call.keywords if k.arg == "dim"), ast.Constant(-1))
        halves = f"{ast.unparse(call.args[0])}.chunk(2, dim={ast.unparse(dim)})"
        call.args[0] = ast.parse(f"torch.cat(({halves}[1], {halves}[0]), dim={ast.unparse(dim)})", mode="eval").body
        return call
    if site.impl == "fusion-attention":
        call = ast.parse(text.replace("<N>", "0"), mode="eval").body
        call = call.value if isinstance(call, ast.Subscript) else call
        q = ast.unparse(call.args[0]) if isinstance(call, ast.Call) and call.args else "query"
        text = text.replace("head_num=<N>", f"head_num={q}.shape[1]")
    return ast.parse(text, mode="eval").body


class Declined(Exception):
    """Why a site is not rewritten."""


def _top_statement(func: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.AST) -> int:
    line = getattr(node, "lineno", 0)
    for i, stmt in enumerate(func.body):
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return i
    raise Declined("the pattern is not in the function's own statements")


def _contains(tree: ast.AST, target: ast.AST) -> bool:
    return any(n is target for n in ast.walk(tree))


def _normed(body: fusion_checker.Body, site: Site) -> ast.AST | None:
    """RMSNorm's `x * rsqrt(..)`: the innermost product holding the rsqrt."""
    holding = [n for n in body.nodes if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and _contains(n, site.node)]
    return min(holding, key=lambda n: sum(1 for _ in ast.walk(n)), default=None)


def _roots(body: fusion_checker.Body, site: Site) -> list[ast.AST]:
    """What the detector matched: for RMSNorm also the product, whose x must be the x the mean read."""
    normed = _normed(body, site) if site.impl == "fusion-rms-norm" else None
    return [site.node] + ([normed] if normed is not None else [])


def _output(body: fusion_checker.Body, site: Site) -> ast.AST:
    """The node whose value the fused call gives: npu_rms_norm includes the weight's product."""
    if site.impl != "fusion-rms-norm":
        return site.node
    normed = _normed(body, site)
    for node in body.nodes:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and normed is not None and node is not normed:
            sides = (body.value(node.left), body.value(node.right))
            if any(s is normed for s in sides):
                return node
    raise Declined("the normalised value is not multiplied by the weight where the function returns it")


def _returned(body: fusion_checker.Body, func: ast.FunctionDef | ast.AsyncFunctionDef, output: ast.AST) -> tuple[int, ast.expr]:
    """(index of the return statement, its value with the local names that lead to `output` substituted)."""
    for i, stmt in enumerate(func.body):
        if not (isinstance(stmt, ast.Return) and stmt.value is not None):
            continue
        value = stmt.value
        for _ in range(4):
            if _contains(value, output):
                return i, value
            value = _rebuild(value, lambda n: _bound(body, n))
    raise Declined("the fused result is not what the function returns (the branch returns it)")


def _bound(body: fusion_checker.Body, node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.Name):
        bound = body.value(node, depth=1)
        if bound is not node and isinstance(bound, ast.expr):
            return bound
    return None


def _rebuild(node: ast.expr, swap: Callable[[ast.AST], ast.expr | None]) -> ast.expr:
    """A copy of `node` with each sub-node `swap` answers for replaced; the original tree is untouched."""
    new = swap(node)
    if new is not None:
        return new
    fields: dict[str, Any] = {}
    for name, old in ast.iter_fields(node):
        if isinstance(old, ast.expr):
            fields[name] = _rebuild(old, swap)
        elif isinstance(old, list):
            fields[name] = [_rebuild(o, swap) if isinstance(o, ast.expr) else _keyword(o, swap) for o in old]
        else:
            fields[name] = old
    return ast.copy_location(type(node)(**fields), node)


def _keyword(node: object, swap: Callable[[ast.AST], ast.expr | None]) -> object:
    if isinstance(node, ast.keyword):
        return ast.copy_location(ast.keyword(arg=node.arg, value=_rebuild(node.value, swap)), node)
    return node


def _bindings(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[int]]:
    """name -> lines where the function binds it (its parameters at line 0)."""
    out: dict[str, list[int]] = {}
    a = func.args
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []), *([a.kwarg] if a.kwarg else [])):
        out.setdefault(arg.arg, []).append(0)
    for node in fusion_checker.own_nodes(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.setdefault(node.id, []).append(node.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, []).append(node.lineno)
    return out


def _visible(bindings: dict[str, list[int]], name: str, line: int) -> int | None:
    """The line of the binding of `name` that a read on `line` sees (None: not local)."""
    earlier = [b for b in bindings.get(name, []) if b < line]
    return max(earlier) if earlier else None


def module_names(tree: ast.Module) -> set[str]:
    names = set(dir(builtins))
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _closure(body: fusion_checker.Body, output: ast.AST, inputs: set[str]) -> list[ast.AST]:
    """The pattern's nodes: `output` and what it reads, following local names that are not the fused
    call's inputs to the value they hold."""
    seen: dict[int, ast.AST] = {}
    stack = [output]
    while stack:
        node = stack.pop()
        for sub in ast.walk(node):
            if id(sub) in seen:
                continue
            seen[id(sub)] = sub
            if isinstance(sub, ast.Name) and sub.id not in inputs:
                bound = body.value(sub, depth=1)
                if bound is not sub:
                    stack.append(bound)
                elif sub.id in body.chunks:  # `a, b = x.chunk(2, -1)`
                    stack.append(body.chunks[sub.id][1])
    return list(seen.values())


def _guard(fused: ast.expr, func: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The tensor whose `is_npu` picks the branch: the fused call's first argument, or a parameter in it."""
    call = fused.value if isinstance(fused, ast.Subscript) else fused
    first = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if isinstance(first, ast.Name):
        return first.id
    params = {a.arg for a in func.args.args} - {"self", "cls"}
    for node in ast.walk(first) if first is not None else ():
        if isinstance(node, ast.Name) and node.id in params:
            return node.id
    raise Declined("no tensor name to test is_npu on (the fused op's input is neither a name nor built from a parameter)")


def plan(func: ast.FunctionDef | ast.AsyncFunctionDef, body: fusion_checker.Body, group: list[Site],
         lines: list[str], defined: set[str]) -> Rewrite:
    """One branch for the sites whose results one return statement gives."""
    outputs = [(_output(body, site), _fused_call(site)) for site in group]
    ret_index, value = _returned(body, func, outputs[0][0])
    swaps = {id(out): fused for out, fused in outputs}
    new_value = _rebuild(value, lambda n: swaps.get(id(n)))
    fused_nodes = {id(n) for _, fused in outputs for n in ast.walk(fused)}
    inputs = {n.id for _, fused in outputs for n in ast.walk(fused) if isinstance(n, ast.Name)}
    pattern = [n for site in group for root in _roots(body, site) for n in _closure(body, root, inputs)]
    closure = pattern + [n for out, _ in outputs for n in _closure(body, out, inputs)]
    first = min(_top_statement(func, n) for n in closure if hasattr(n, "lineno"))
    if first > ret_index:
        raise Declined("the pattern is computed after the return")
    skipped = func.body[first:ret_index]
    if any(not isinstance(stmt, (ast.Assign, ast.AnnAssign)) for stmt in skipped):
        raise Declined("a statement other than an assignment sits between the pattern's start and the return "
                       "(the fused branch would skip it)")
    at = func.body[first]
    bindings = _bindings(func)
    for name in sorted(inputs - defined - {"torch_npu"}):
        if name not in bindings:
            raise Declined(f"`{name}` in the fused call is not defined here")
    reads = [n for n in pattern if isinstance(n, ast.Name) and n.id in inputs]  # what the fused call's names stand for
    reads += [n for n in ast.walk(new_value) if isinstance(n, ast.Name) and id(n) not in fused_nodes]
    for read in reads:
        if read.id in bindings and _visible(bindings, read.id, read.lineno) != _visible(bindings, read.id, at.lineno):
            raise Declined(f"`{read.id}` is rebound between line {at.lineno} and its use on line {read.lineno}")
    text = lines[at.lineno - 1]
    indent = text[:at.col_offset]
    if indent.strip():
        raise Declined("the pattern's first statement shares its line with other code")
    inner = indent + ("\t" if "\t" in indent else "    ")
    apis = ", ".join(dict.fromkeys(f"torch_npu.{FUSED_API[s.impl]}" for s in group))
    block = (f"{indent}if {GUARD.format(x=_guard(outputs[0][1], func))}:  # Ascend: {apis} (migrate fix --fuse)\n"
             f"{inner}import torch_npu\n"
             f"{inner}return {ast.unparse(new_value)}\n")
    return Rewrite(group[0].impl, getattr(group[0].node, "lineno", 0), at.lineno, indent, block)


def _resolver(tree: ast.AST) -> fusion_checker.Names:
    """Qualified names of a node from the module's imports (what the scanner's `qualnames` gives)."""
    return qualnames_from(collect_aliases(tree))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    yield from fusion_checker.functions(tree)


def fuse_text(text: str) -> tuple[str, list[tuple[str, int]], list[tuple[str, int, str]]]:
    """(new text, (impl, line) of each rewritten site, (impl, line, reason) of each declined one).
    Lines are those of `text`; functions that already call the fused op are left alone."""
    tree = ast.parse(text)
    names = _resolver(tree)
    defined = module_names(tree)
    lines = text.splitlines(keepends=True)
    rewrites: list[Rewrite] = []
    applied: list[tuple[str, int]] = []
    declined: list[tuple[str, int, str]] = []
    for func in _functions(tree):
        body, found = sites(func, names)
        groups: dict[int, list[Site]] = {}
        for site in found:
            try:
                groups.setdefault(_returned(body, func, _output(body, site))[0], []).append(site)
            except Declined as why:
                declined.append((site.impl, getattr(site.node, "lineno", 0), str(why)))
        for group in groups.values():
            try:
                rewrites.append(plan(func, body, group, lines, defined))
                applied.extend((s.impl, getattr(s.node, "lineno", 0)) for s in group)
            except Declined as why:
                declined.extend((s.impl, getattr(s.node, "lineno", 0), str(why)) for s in group)
    for rewrite in sorted(rewrites, key=lambda r: -r.insert_at):
        lines.insert(rewrite.insert_at - 1, rewrite.block)
    return "".join(lines), sorted(applied, key=lambda a: a[1]), sorted(declined, key=lambda d: d[1])


def fuse_findings(text: str, findings: list[Finding]) -> tuple[str, list[Finding], list[tuple[Finding, str]]]:
    """`fuse_text` on a module whose FUS findings the scan gave (the scan's lines may be before other fixes
    moved them): the k-th site of a rule is its k-th finding. (new text, applied, declined with reason)."""
    ours = [f for f in findings if f.name in FUSED_API]
    if not ours:
        return text, [], []
    try:
        new, applied, declined = fuse_text(text)
        ast.parse(new)
    except SyntaxError:
        return text, [], [(f, "the module does not parse with the fused branches") for f in ours]
    by_rule: dict[str, list[Finding]] = {}
    for f in sorted(ours, key=lambda f: (f.line, f.column)):
        by_rule.setdefault(f.name, []).append(f)
    outcome: list[tuple[int, str, str | None]] = sorted(
        [(line, impl, None) for impl, line in applied] + [(line, impl, why) for impl, line, why in declined])
    done: list[Finding] = []
    refused: list[tuple[Finding, str]] = []
    for _, impl, why in outcome:
        queue = by_rule.get(impl) or []
        if not queue:
            continue
        finding = queue.pop(0)
        if why is None:
            done.append(finding)
        else:
            refused.append((finding, why))
    refused.extend((f, "the site was not found again in the fixed text") for rest in by_rule.values() for f in rest)
    return new, done, refused
