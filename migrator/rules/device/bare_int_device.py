"""DEV bare integer devices: `torch.device(i)`, `.to(0)`, `device=0` name the CUDA device i."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "either"
UNUSUAL = "unusual torch.device arguments"
DEVICE_KWARGS = {"device", "map_location", "device_type", "device_id", "pin_memory_device"}
INDEX_NAME = re.compile(r"(?i)(rank|gpu|idx|index|device_id|dev_id|^id$|_id$|^i$|^n$)")


def _looks_like_index(node: ast.AST) -> bool:
    """`torch.device(local_rank)` is a CUDA index; `torch.device(args.device)` is usually a string."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return bool(name and INDEX_NAME.search(name))


# what `detect_call` acts on where no import names the callee: `.to(0)`, `device=0`
UNNAMED_CALLEE = (frozenset({"to", "to_empty"}), frozenset(DEVICE_KWARGS))
# ... where an import names it: (qualified names, method names, keywords)
NAMED_CALLEE = (frozenset({"torch.device"}), *UNNAMED_CALLEE)


def detect_call(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict) -> None:
    """Bare integer devices: torch.device(0), torch.device(local_rank), .to(0), device=0."""
    if "torch.device" in func_names and node.args and not isinstance(node.args[0], (ast.Constant, ast.JoinedStr)):
        if len(node.args) == 1 and not node.keywords and _looks_like_index(node.args[0]):
            checker.emit("bare-int-device", node, "torch.device(<int>)")
    if "torch.device" in func_names and node.args and isinstance(node.args[0], ast.Constant):
        if isinstance(node.args[0].value, int) and not isinstance(node.args[0].value, bool):
            checker.emit("bare-int-device", node, f"torch.device({node.args[0].value})")
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in ("to", "to_empty") and len(node.args) == 1:
        target = node.args[0]
        if isinstance(target, ast.Constant) and type(target.value) is int:
            checker.emit("bare-int-device", target, f".to({target.value})")
    for key in DEVICE_KWARGS & kwargs.keys() if kwargs else ():
        value = kwargs[key]
        if isinstance(value, ast.Constant) and type(value.value) is int:
            checker.emit("bare-int-device", value, f"{key}={value.value}")


def precheck(site: CallSite) -> Verdict:
    if site.called and (len(site.args) != 1 or site.args[0].keyword or site.star):
        return Declined(UNUSUAL)
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import positional, with_args
    from migrator.fix.transforms.common import device

    if isinstance(node, cst.Call):  # torch.device(i)
        if len(node.args) != 1 or node.args[0].keyword or node.args[0].star:
            return Declined(UNUSUAL)
        index = node.args[0].value
        if ctx.target == Target.NPU:
            return with_args(node, node.func, [positional(cst.SimpleString('"npu"')), positional(index)])
        return device(ctx, index)
    if isinstance(node, cst.Integer):
        if ctx.target == Target.NPU:
            return cst.SimpleString(f'"npu:{node.value}"')
        return device(ctx, node)
    return Declined("not an integer device")
