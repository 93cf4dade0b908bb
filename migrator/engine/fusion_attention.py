"""Eager attention, `matmul -> scale -> mask -> softmax -> (dropout) -> matmul`, as one
`torch_npu.npu_fusion_attention` call with its scale, mask polarity, keep_prob and layout spelled out.

Read backwards from the `P @ V` matmul through the function's local names (`fusion_checker.Body`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from migrator.engine.fusion_checker import DROPOUT, MATMUL, SOFTMAX, Body, Emit, src


@dataclass
class Parts:
    query: ast.AST
    key: ast.AST
    scale: str = "1.0"  # npu_fusion_attention's default is 1.0, not 1/sqrt(D)
    mask: str | None = None
    keep_prob: str = "1.0"


def _matmul_operands(body: Body, node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    node = body.value(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return node.left, node.right
    if isinstance(node, ast.Call) and body.names(node.func) & MATMUL and len(node.args) == 2:
        return node.args[0], node.args[1]
    return None


def _transposed(body: Body, node: ast.AST) -> ast.AST | None:
    """k of `k.transpose(-2, -1)` / `k.mT`; None otherwise."""
    node = body.value(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "transpose":
        return node.func.value
    if isinstance(node, ast.Attribute) and node.attr == "mT":
        return node.value
    return None


def _holds_scores(body: Body, node: ast.AST) -> bool:
    """The operand carrying the scores (a matmul, a masked_fill), not the scale or mask beside it."""
    for n in ast.walk(body.value(node)):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            return True
        if isinstance(n, ast.Call) and (body.names(n.func) & MATMUL or src(n.func).endswith(("masked_fill", "masked_fill_"))):
            return True
    return isinstance(node, ast.Name) and body.value(node) is not node and _holds_scores(body, body.value(node))


def _scores(body: Body, node: ast.AST, parts: dict[str, str], depth: int = 6) -> Parts | None:
    """Strip mask and scale off the softmax input down to `q @ k^T`."""
    node = body.value(node)
    if depth == 0:
        return None
    qk = _matmul_operands(body, node)
    if qk is not None and (key := _transposed(body, qk[1])) is not None:
        return Parts(qk[0], key, parts.get("scale", "1.0"), parts.get("mask"))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("masked_fill", "masked_fill_"):
        if node.args:  # masked_fill(M, -inf): True = filled = masked out, the polarity atten_mask wants
            parts.setdefault("mask", src(node.args[0]))
        return _scores(body, node.func.value, parts, depth - 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add)):
        inner, other = node.left, node.right
        if not _holds_scores(body, inner):
            inner, other = other, inner
        if isinstance(node.op, ast.Add):  # additive mask (0 kept, -inf / large negative masked)
            parts.setdefault("mask", f"({src(other)}) < 0")
        elif isinstance(node.op, ast.Div):
            parts.setdefault("scale", f"1 / ({src(other)})")
        else:
            parts.setdefault("scale", src(other))
        return _scores(body, inner, parts, depth - 1)
    return None


def _softmax_input(body: Body, node: ast.AST) -> tuple[ast.AST, str] | None:
    """(softmax input, keep_prob) of `dropout(softmax(s))` or `softmax(s)`."""
    node = body.value(node)
    keep = "1.0"
    if isinstance(node, ast.Call) and node.args:
        is_dropout = bool(body.names(node.func) & DROPOUT) or "drop" in src(node.func).lower()
        if is_dropout:
            p = next((k.value for k in node.keywords if k.arg == "p"), node.args[1] if len(node.args) > 1 else None)
            keep = f"1 - {src(p)}" if p is not None else f"1 - {src(node.func)}.p"
            node = body.value(node.args[0])
    if not isinstance(node, ast.Call):
        return None
    if body.names(node.func) & SOFTMAX and node.args:
        return node.args[0], keep
    if isinstance(node.func, ast.Attribute) and node.func.attr == "softmax" and not body.names(node.func):
        return node.func.value, keep
    return None


def attention(body: Body, emit: Emit) -> None:
    for node in body.nodes:
        pv = _matmul_operands(body, node) if isinstance(node, (ast.BinOp, ast.Call)) else None
        if pv is None or body.value(node) is not node:
            continue
        soft = _softmax_input(body, pv[0])
        if soft is None:
            continue
        parts = _scores(body, soft[0], {})
        if parts is None:
            continue
        mask = f"atten_mask={parts.mask}" if parts.mask else "atten_mask=None"
        mapping = (f"torch_npu.npu_fusion_attention({src(parts.query)}, {src(parts.key)}, {src(pv[1])}, "
                   f"head_num=<N>, input_layout='BNSD', scale={parts.scale}, {mask}, keep_prob={soft[1]})[0]")
        emit("fusion-attention", node, "softmax(q @ k^T * scale + mask) @ v", mapping)
