"""DEV `tensor.is_cuda`: `.is_npu` (npu), "on this host's accelerator" (portable: `x.device.type ==
_migrate_accelerator_type()`, False for cpu, meta, mps/xpu tensors as `.is_cuda` was)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "node"


# what `detect_attribute` acts on (the scanner calls it on no other attribute)
ATTRIBUTE_NAMES = ("is_cuda",)


def detect_attribute(checker: Checker, node: ast.Attribute) -> None:
    """`x.is_cuda` on a value (not `self.is_cuda`, not an imported name)."""
    if node.attr != "is_cuda":  # first: most attributes are another
        return
    own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
    if isinstance(node.ctx, ast.Load) and not own and not checker.qualnames(node):
        checker.emit("tensor-is-cuda", node, "is_cuda", "is_npu")


def precheck(site: CallSite) -> Verdict:
    return FIXABLE  # every site the scanner reports is rewritten


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import code
    from migrator.fix.transforms.common import accelerator_type

    if not isinstance(node, cst.Attribute):
        return Declined("not an attribute")
    if ctx.target == Target.NPU:
        return node.with_changes(attr=node.attr.with_changes(value="is_npu"))
    # not `!= "cpu"`: a meta (or mps/xpu) tensor is no accelerator tensor either
    compare = cst.parse_expression(f"({code(node.value)}.device.type == _migrate_accelerator_type())")
    accelerator_type(ctx)
    return compare
