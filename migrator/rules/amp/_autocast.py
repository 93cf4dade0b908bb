"""AMP `torch.cuda.amp.autocast(...)` -> `torch.autocast(<device>, dtype=torch.float16, ...)` (AMP001),
and a literal "cuda" device argument of torch.autocast / GradScaler / friends (AMP004, AMP005)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from migrator.catalogue.patterns import DEVICE_LITERAL, DEVICE_STRING
from migrator.catalogue.protocols import Checker
from migrator.catalogue.site import FIXABLE, CallSite, Declined, Verdict, needs_call
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "call"
T = TypeVar("T")  # an argument of either parser's call
CUDA_AUTOCAST_PARAMS = ["enabled", "dtype", "cache_enabled"]
DEVICE_KEYWORDS = ("device_type", "device")
AUTOCAST_CALLS = {
    "torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast", "torch.get_autocast_dtype",
    "torch.set_autocast_dtype", "torch.is_autocast_enabled", "torch.set_autocast_enabled",
    "torch.amp.is_autocast_available", "torch.amp.custom_fwd", "torch.amp.custom_bwd",
}
SCALER_CALLS = {"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"}
AUTOCAST_OR_SCALER = frozenset(AUTOCAST_CALLS | SCALER_CALLS)  # the calls `detect_call` acts on
NPU_AUTOCAST = "torch.npu.amp.autocast"  # torch_npu's twin of torch.cuda.amp.autocast: same parameters and defaults
PARTIAL = "functools.partial"
VALUE_PORTABLE = ("used as a value other than an assignment or the first argument of functools.partial (a base class, "
                  "isinstance): portable autocast is `torch.autocast` with a device type, not a class to pass around; "
                  "port it by hand")
PARTIAL_ARGS = ("functools.partial gives it positional or unknown arguments, which `torch.autocast` would take as "
                "other parameters (its second is `dtype`); pass them by keyword")


def _device_literal(node: ast.AST | None) -> ast.Constant | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and DEVICE_STRING.match(node.value):
        return node
    return None


# `detect_call` needs a callee an import names (torch.autocast, GradScaler): nothing on any other call
UNNAMED_CALLEE = (frozenset[str](), frozenset[str]())
# ... where an import names it: (qualified names, method names, keywords)
NAMED_CALLEE = (AUTOCAST_OR_SCALER, frozenset[str](), frozenset[str]())


def detect_call(checker: Checker, node: ast.Call, func_names: set[str], kwargs: dict) -> None:
    """A "cuda" device argument to torch.autocast and friends (AMP004) or torch.amp.GradScaler (AMP005)."""
    if func_names.isdisjoint(AUTOCAST_OR_SCALER):
        return
    arg = _device_literal(node.args[0] if node.args else None) or _device_literal(
        kwargs.get("device_type") or kwargs.get("device")
    )
    if arg is not None:
        checker.claim(arg)  # the string is this finding's, not a device-string one
        impl = "grad-scaler-cuda" if func_names & SCALER_CALLS else "autocast-cuda"
        checker.emit(impl, node, f"{sorted(func_names)[0]}({arg.value!r})", '"npu"')


def _device_args(site_args: Sequence[T], keyword_of: Callable[[T], str | None], text_of: Callable[[T], str]) -> list[int]:
    """Indexes of the arguments that name the device with a plain "cuda..." literal."""
    found = []
    for i, arg in enumerate(site_args):
        keyword = keyword_of(arg)
        if (keyword is None and i == 0) or keyword in DEVICE_KEYWORDS:
            if DEVICE_LITERAL.match(text_of(arg).strip()):
                found.append(i)
    return found


def precheck(site: CallSite) -> Verdict:
    if site.code == "AMP001":
        if not site.called:
            return _value_verdict(site)
        if (declined := needs_call(site)) is not None:
            return declined
        return FIXABLE if site.bind(CUDA_AUTOCAST_PARAMS) is not None else Declined("unusual autocast arguments")
    if not _device_args(site.args, lambda a: a.keyword, lambda a: a.text):
        return Declined("the device argument is not a plain string literal")
    return FIXABLE


def _value_verdict(site: CallSite) -> Verdict:
    """`amp_autocast = torch.cuda.amp.autocast` and friends: on npu the NPU class of the same signature; on
    portable `functools.partial(torch.autocast, <device type>, dtype=torch.float16)`, where a partial can
    stand for the class (an assignment, or the first argument of a partial that adds keywords only)."""
    if site.target == Target.NPU:
        return FIXABLE
    if site.passed_to == PARTIAL:
        extra = site.passed_args[1:]
        if any(a.keyword is None or a.keyword not in CUDA_AUTOCAST_PARAMS for a in extra):
            return Declined(PARTIAL_ARGS)
        return FIXABLE
    return FIXABLE if site.assigned else Declined(VALUE_PORTABLE)


def _value_fix(ctx: FixContext, node: cst.BaseExpression) -> cst.BaseExpression:
    import libcst as cst

    from migrator.fix.transforms.args import kwarg, positional
    from migrator.fix.transforms.common import device_arg

    if ctx.target == Target.NPU:
        return ctx.expr_for(NPU_AUTOCAST).with_changes(lpar=node.lpar, rpar=node.rpar)
    # the device type is read when the partial is made; dtype is torch.cuda.amp's default made explicit (as the
    # call rewrite does), and a positional argument given to the partial later then fails loudly on it
    args = [positional(ctx.expr_for("torch.autocast")), positional(device_arg(ctx)), kwarg("dtype", ctx.expr_for("torch.float16"))]
    return cst.Call(func=ctx.expr_for(PARTIAL), args=args, lpar=node.lpar, rpar=node.rpar)


def fix(ctx: FixContext, call: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.transforms.args import bind, code, kwarg, positional, with_args
    from migrator.fix.transforms.common import device_arg

    if not isinstance(call, cst.Call):  # an AMP001 value (`_value_verdict`)
        return _value_fix(ctx, cast(cst.BaseExpression, call))
    if finding.code == "AMP001":  # torch.cuda.amp.autocast(enabled, dtype, cache_enabled)
        args = bind(call, CUDA_AUTOCAST_PARAMS)
        if args is None:
            return Declined("unusual autocast arguments")
        if "dtype" not in args:
            args["dtype"] = kwarg("dtype", ctx.expr_for("torch.float16"))  # torch.cuda.amp's default, made explicit
        new_args = [positional(device_arg(ctx))] + [
            kwarg(k, args[k].value) for k in ("dtype", "enabled", "cache_enabled") if k in args
        ]
        return with_args(call, ctx.expr_for("torch.autocast"), new_args)
    at = _device_args(call.args, lambda a: a.keyword.value if a.keyword else None, lambda a: code(a.value))
    if not at:
        return Declined("the device argument is not a plain string literal")
    return call.with_changes(args=[a.with_changes(value=device_arg(ctx)) if i in at else a for i, a in enumerate(call.args)])
