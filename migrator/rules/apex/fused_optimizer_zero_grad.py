"""APEX `zero_grad(set_to_none=True)` on a torch_npu fused optimizer: `set_to_none=False` (issue 45).

torch_npu's `NpuFused*` optimizers define `zero_grad(set_to_none=False)` and raise "set_to_none is not
supported in fused optimizers" for True. A bare `zero_grad()` uses that False default and is fine; the
fixer never makes an `NpuFused*` optimizer (Apex FusedAdam becomes `torch.optim.AdamW`, which accepts
True), so this rule is about optimizers written or ported by hand.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
PARAMS = ["set_to_none"]
FUSED = "torch_npu.optim.NpuFused"
PROVEN = "NpuFused.zero_grad"  # the receiver is built by an NpuFused* call in the same function
MAYBE = "zero_grad"  # the module builds one, this receiver is not provably it
NOT_PROVEN = ("the optimizer is not provably a torch_npu fused one in this function; if it is, pass "
              "set_to_none=False (NpuFused* optimizers refuse True)")
NOT_TRUE = "set_to_none is not the literal True here: pass False where the optimizer is a torch_npu fused one"


def _fused(names: set[str]) -> bool:
    return any(n.startswith(FUSED) for n in names)


# what `detect_call` acts on where no import names the callee: `opt.zero_grad(...)`
UNNAMED_CALLEE = (frozenset({"zero_grad"}), frozenset[str]())
# ... where an import names it: (qualified names, method names, keywords); nothing (an optimizer's method only)
NAMED_CALLEE = (frozenset[str](), frozenset[str](), frozenset[str]())


def detect_call(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict) -> None:
    func = node.func
    if func_names or not isinstance(func, ast.Attribute) or func.attr != "zero_grad":  # names first: cheapest
        return
    value = kwargs.get("set_to_none", node.args[0] if len(node.args) == 1 else None)
    if value is None or (isinstance(value, ast.Constant) and value.value is not True):
        return  # NpuFused*'s own default is False
    if not _fused(checker.module_calls()):  # what built the receiver is among them: most modules make no NpuFused*
        return
    if _fused(checker.built_by(func.value)):
        checker.emit("fused-optimizer-zero-grad", node, PROVEN, "set_to_none=False")
    else:
        checker.emit("fused-optimizer-zero-grad", node, MAYBE, "set_to_none=False")


def precheck(site: CallSite) -> Verdict:
    if site.symbol != PROVEN:
        return Declined(NOT_PROVEN)
    args = site.bind(PARAMS)
    if args is None or args.get("set_to_none") is None or args["set_to_none"].value is not True:
        return Declined(NOT_TRUE)
    return FIXABLE


def fix(ctx: FixContext, call: cst.Call, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import bind

    args = bind(call, PARAMS)
    if args is None or "set_to_none" not in args:
        return Declined(NOT_TRUE)
    old = args["set_to_none"]
    new = [a.with_changes(value=cst.Name("False")) if a is old else a for a in call.args]
    return call.with_changes(args=new)
