"""DEV `x.type == "cuda"`: the "cuda" operand becomes "npu" (npu) or `_migrate_accelerator_type()` (portable:
the accelerator this process uses, None on a CPU-only host, where the comparison stays False as before)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.patterns import DEVICE_LITERAL, lists_npu
from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "node"


def detect_compare(checker: Checker, node: ast.Compare) -> None:
    """`x == "cuda"`, `x in ("cuda", "xpu")` (a collection that lists "npu" too is left alone)."""
    for operand in (node.left, *node.comparators):
        if isinstance(operand, ast.Constant) and operand.value == "cuda":
            checker.claim(operand)
            member = operand is node.left and isinstance(node.ops[0], (ast.In, ast.NotIn))
            checker.emit("device-type-compare", node, MEMBER if member else '== "cuda"', '"npu"')
        elif isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
            cuda = [e for e in operand.elts if isinstance(e, ast.Constant) and e.value == "cuda"]
            for e in cuda:
                checker.claim(e)
            if cuda and not lists_npu(operand):
                checker.emit("device-type-compare", node, 'in (..., "cuda", ...)', '"npu"')


MEMBER = '"cuda" in ...'
MEMBER_REASON = ('`"cuda" in ...` tests either a device string (`in str(x.device)`) or a list of names a user may '
                 'type (`in CHOICES`): say which by hand (`x.device.type == "npu"`, or add "npu" to the names)')


def _plain_cuda(text: str) -> bool:
    m = DEVICE_LITERAL.match(text.strip())
    return bool(m and not m.group("rest"))


def precheck(site: CallSite) -> Verdict:
    if site.symbol == MEMBER:
        return Declined(MEMBER_REASON)
    if any(_plain_cuda(t) for t in site.operands):
        return FIXABLE
    return Declined('"cuda" is not a plain operand here (it sits in a tuple or set): rewrite the comparison by hand')


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.common import accelerator_type

    if not isinstance(node, cst.Comparison):
        return Declined("not a comparison")

    def swap(expr: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(expr, cst.SimpleString) and _plain_cuda(expr.value):
            if ctx.target == Target.NPU:
                return expr.with_changes(value=expr.value.replace("cuda", "npu"))
            return accelerator_type(ctx)
        return expr

    return node.with_changes(
        left=swap(node.left),
        comparisons=[c.with_changes(comparator=swap(c.comparator)) for c in node.comparisons],
    )
