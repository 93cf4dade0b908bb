"""KERN019 a launch grid over the core-dimension limit: the kernel made persistent. Its body runs in
`for pid in range(tl.program_id(0), N_PROGRAMS, tl.num_programs(0))` (Triton-Ascend's programming guide),
each launch starts `min(programs, cores)` programs and passes the original count as `N_PROGRAMS`. Planned
(or declined, with the scan's reason) by `migrator/engine/triton_persistent.py`; a `numerics` fix: validate
the kernel (`migrate validate --kernel`)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "module"  # the kernel's body and every launch of it
PORTABLE = "the core count comes from Triton-Ascend's driver: use --target npu"


def precheck(site: CallSite) -> Verdict:
    return FIXABLE if site.target == Target.NPU else Declined(PORTABLE)


def fix_module(ctx: FixContext, module: cst.Module, tree: ast.Module, finding: Finding) -> cst.Module | Declined:
    from migrator.engine import triton_kernels, triton_persistent
    from migrator.fix.module_fixes import qualnames
    from migrator.rules.kernels._persistent import make_persistent

    names = qualnames(ctx.aliases)
    plan = triton_persistent.plan(tree, triton_kernels.kernels(tree, names), finding.symbol, names)
    return Declined(plan) if isinstance(plan, str) else make_persistent(ctx, module, plan)
