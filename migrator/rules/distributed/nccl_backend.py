"""DIST "nccl" backend strings: "hccl" (npu), `_migrate_backend()` (portable, a plain "nccl" only)."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from migrator.catalogue.patterns import NCCL_STRING, PLAIN_NCCL
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
STRING_WORDS = ("nccl",)


def detect_string(checker: Checker, node: ast.AST, text: str) -> None:
    # the substring first (cheaper than the match): the pattern spells "nccl" in any case, and no character
    # but N/C/L lowers to n/c/l
    if "nccl" in text.lower() and NCCL_STRING.match(text):
        checker.emit("nccl-backend-string", node, text, re.sub("(?i)nccl", "hccl", text))


def precheck(site: CallSite) -> Verdict:
    if site.string != "plain":
        return Declined("not a plain string literal")
    if site.target != Target.NPU and not PLAIN_NCCL.fullmatch(site.text.strip()):
        return Declined("combined backend specs have no portable rewrite; use dist.get_default_backend_for_device")
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.helpers import BACKEND_HELPER, DEVICE_HELPER

    if not isinstance(node, cst.SimpleString):
        return Declined("not a plain string literal")
    if ctx.target == Target.NPU:
        value = re.sub(r"(?i)\bnccl\b", lambda m: "HCCL" if m.group(0).isupper() else "hccl", node.value)
        value = re.sub(r"\bcuda:", "npu:", value)
        return node.with_changes(value=value)
    ctx.helper("_migrate_backend", BACKEND_HELPER)
    ctx.helper("_migrate_device", DEVICE_HELPER)
    return cst.parse_expression("_migrate_backend()")
