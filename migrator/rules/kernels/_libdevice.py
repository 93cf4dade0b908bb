"""libdevice math -> `tl.math` (KERN016): every use of one libdevice function in the module."""

from __future__ import annotations

import libcst as cst

from migrator.catalogue.site import Declined
from migrator.fix.context import FixContext
from migrator.fix.module_fixes import dotted_of, resolve


def to_tl_math(ctx: FixContext, module: cst.Module, qualname: str, name: str) -> cst.Module | Declined:
    """`qualname` (`triton.language.extra.cuda.libdevice.exp`) spelled any way the imports allow -> `tl.math.exp`."""
    replacement = ctx.expr_for(f"triton.language.math.{name}")

    class Rewrite(cst.CSTTransformer):
        attribute_names: set[int] = set()  # `x.rsqrt`'s `rsqrt` is no use of a name `rsqrt`

        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            self.attribute_names.add(id(node.attr))
            return qualname not in resolve(ctx, node)  # the whole chain is replaced: no need to go inside

        def _swap(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
            if qualname in resolve(ctx, original):
                text = dotted_of(original) or ""
                ctx.removable.add(text.split(".")[0])
                return replacement
            return updated

        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            return self._swap(original, updated)

        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            return updated if id(original) in self.attribute_names else self._swap(original, updated)

    return module.visit(Rewrite())
