"""KERN022 `tl.dot(..., allow_tf32=X)`: `input_precision="tf32"` / `"ieee"` (the keyword upstream Triton and
Triton-Ascend read; `allow_tf32` is its deprecated spelling)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Verdict

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "argument"


def precheck(site: CallSite) -> Verdict:
    return FIXABLE


def fix(ctx: FixContext, node: cst.Arg, finding: Finding, rule: Rule) -> cst.Arg:
    import libcst as cst

    value = node.value
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        precision: cst.BaseExpression = cst.SimpleString('"tf32"' if value.value == "True" else '"ieee"')
    else:  # a flag computed at run time keeps its meaning
        precision = cst.parse_expression(f'"tf32" if {cst.Module([]).code_for_node(value)} else "ieee"')
    assert node.keyword is not None
    return node.with_changes(keyword=node.keyword.with_changes(value="input_precision"), value=precision)
