"""S1's fused-op argument check (issue 37 item 6): the eps each fused norm call of the port gets against the
eps the original's module at that place holds (both recorded by child/fused_args.py), compared exactly like a
constant of the model as built. An eps 10x off moves unit-scale activations by ~5e-6 relative, under the fp32
logic bound and the bf16 noise floor, so no tensor check sees it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ... import op_semantics as S
from ...facts import CheckRow
from ...records import FusedNormCall
from ...verdict import Verdict

CHECK = "fused-op arguments (npu_rms_norm epsilon vs the original module's eps)"
EPS_RTOL = 1e-6


def fused_args_check(original_eps: Mapping[str, float], calls: Sequence[FusedNormCall]) -> CheckRow | None:
    """The check row, or None when the port makes no fused norm call in a module whose original holds an eps."""
    compared = [(c, original_eps[c.module]) for c in calls if c.module in original_eps]
    if not compared:
        return None
    wrong = [(c, eps) for c, eps in compared if not math.isclose(c.eps, eps, rel_tol=EPS_RTOL, abs_tol=0.0)]
    if not wrong:
        return CheckRow(check=CHECK, status=Verdict.PASS, tensors=len(compared),
                        message=f"{len(compared)} fused norm call(s) with the original's eps")
    c, eps = wrong[0]
    default = f" ({c.op}'s default)" if not c.given else ""
    modules = sorted({w.module for w, _ in wrong})
    where = c.module + (f" (and {len(modules) - 1} more module(s))" if len(modules) > 1 else "")
    return CheckRow(check=CHECK, status=Verdict.FAIL, tensors=len(compared), worst_tensor=c.module,
                    message=f"RMSNorm eps: the port uses {S.format_value(c.eps)}{default}, the original "
                            f"{S.format_value(eps)} ({c.op} in {where} vs the module's eps); "
                            f"pass epsilon={S.format_value(eps)}")  # the words of localisation/fused_causes.py
