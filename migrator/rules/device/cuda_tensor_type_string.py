"""DEV "torch.cuda.FloatTensor" type strings -> "torch.npu.FloatTensor" (npu only)."""

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

LEVEL = "node"
CUDA_TENSOR_TYPE = re.compile(r"^torch\.cuda\.\w+(Tensor|Storage)$")


# what `detect_string` needs in a string's lowered text (the scanner calls it on no other string)
STRING_WORDS = ("torch.cuda.",)


def detect_string(checker: Checker, node: ast.AST, text: str) -> None:
    if "torch.cuda." in text and CUDA_TENSOR_TYPE.match(text):  # the substring first: cheaper than the match
        checker.emit("cuda-tensor-type-string", node, text, "torch.npu." + text[len("torch.cuda."):])


def precheck(site: CallSite) -> Verdict:
    if site.target != Target.NPU:
        return Declined("compare dtype and device instead of type strings for portable code")
    return FIXABLE


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    from migrator.fix.transforms.common import string_token_rename

    new = string_token_rename(node, "torch.cuda.", "torch.npu.")
    return new if new is not None else Declined("not a plain string literal")
