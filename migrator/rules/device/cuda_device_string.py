"""DEV "cuda" / "cuda:N" / f"cuda:{i}" device strings: "npu..." (npu), `_migrate_device(...)` (portable)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.patterns import DEVICE_LITERAL, DEVICE_STRING
from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "node"


# what `detect_string` needs in a string's lowered text (the scanner calls it on no other string)
STRING_WORDS = ("cuda",)


def detect_string(checker: Checker, node: ast.AST, text: str) -> None:
    if "cuda" in text and DEVICE_STRING.match(text):  # the substring first: cheaper than the match
        checker.emit("device-string", node, text, "npu" + text[4:])
NOT_PLAIN = "not a plain device literal"
NO_PORTABLE = "this device string has no portable rewrite; pick the device once with torch.accelerator"
CHOICES = ("the default of an option with `choices=`: the new default would not be one of them; add the "
           "device to the choices and change the default by hand")


def precheck(site: CallSite) -> Verdict:
    if site.default_of_choices:
        return Declined(CHOICES)
    if site.target == Target.NPU:
        return FIXABLE if _npu_ok(site) else Declined(NOT_PLAIN)
    return FIXABLE if _portable_ok(site) else Declined(NO_PORTABLE)


def _npu_ok(site: CallSite) -> bool:
    if site.string == "plain":
        return bool(DEVICE_LITERAL.match(site.text.strip()))
    if site.string == "fstring" and site.pieces and site.pieces[0][0] == "text":
        first = site.pieces[0][1]
        return first == "cuda" or first.startswith("cuda:")
    return False


def _portable_ok(site: CallSite) -> bool:
    if site.string == "plain":
        m = DEVICE_LITERAL.match(site.text.strip())
        return bool(m and (m.group("rest")[1:].isdigit() or not m.group("rest")))
    return site.string == "fstring" and site.pieces == (("text", "cuda:"), ("expr", "plain"))


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.common import device, device_type

    if ctx.target == Target.NPU:
        if isinstance(node, cst.SimpleString) and (m := DEVICE_LITERAL.match(node.value)):
            return node.with_changes(value=f"{m.group('prefix')}{m.group('q')}npu{m.group('rest')}{m.group('q')}")
        if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
            first = node.parts[0]
            return node.with_changes(parts=[first.with_changes(value="npu" + first.value[4:]), *node.parts[1:]])
        return Declined(NOT_PLAIN)
    if isinstance(node, cst.SimpleString) and (m := DEVICE_LITERAL.match(node.value)):
        index = m.group("rest")[1:]
        if not index:
            return device_type(ctx)
        return cst.Call(func=cst.Name("str"), args=[cst.Arg(device(ctx, cst.Integer(index)))])
    if isinstance(node, cst.FormattedString) and len(node.parts) == 2:
        value = node.parts[1]
        if isinstance(value, cst.FormattedStringExpression):
            return cst.Call(func=cst.Name("str"), args=[cst.Arg(device(ctx, value.expression))])
    return Declined(NO_PORTABLE)
