"""DEV `.cuda()` on a tensor or module: `.npu()` (npu), `.to(_migrate_device(...))` (portable)."""

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

LEVEL = "call"
PARAMS = ["device", "non_blocking", "memory_format"]


# what `detect_call` acts on where no import names the callee: (method names, keywords)
UNNAMED_CALLEE = (frozenset({"cuda"}), frozenset[str]())
# ... where an import names it: (qualified names, method names, keywords); nothing (a value's method only)
NAMED_CALLEE = (frozenset[str](), frozenset[str](), frozenset[str]())


def detect_call(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict) -> None:
    """`.cuda()` on a tensor or module (the receiver is a value, not an imported module)."""
    if not func_names and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda":  # names first: cheapest
        checker.emit("tensor-cuda-call", node.func, ".cuda()", ".npu()")


def precheck(site: CallSite) -> Verdict:
    if site.target != Target.NPU and site.bind(PARAMS) is None:
        return Declined("unusual `.cuda()` arguments")
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import bind, kwarg, positional, with_args
    from migrator.fix.transforms.common import device

    func = call.func
    if not isinstance(func, cst.Attribute):
        return Declined("not a method call")
    if ctx.target == Target.NPU:
        return call.with_changes(func=func.with_changes(attr=func.attr.with_changes(value="npu")))
    args = bind(call, PARAMS)
    if args is None:
        return Declined("unusual `.cuda()` arguments")
    index = device(ctx, args["device"].value if "device" in args else None)
    new_args = [positional(index)] + [kwarg(k, a.value) for k, a in args.items() if k != "device"]
    return with_args(call, func.with_changes(attr=func.attr.with_changes(value="to")), new_args)
