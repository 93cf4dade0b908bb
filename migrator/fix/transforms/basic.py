"""Renames and small rewrites: torch.cuda names, `.cuda()`, device strings, NCCL, autocast, scalers."""

from __future__ import annotations

import re

import libcst as cst

from migrator.fix.context import FixContext
from migrator.fix.imports import dotted_name, symbol_replacement
from migrator.fix.transforms.args import bind, code, kwarg, positional, with_args
from migrator.fix.transforms.helpers import BACKEND_HELPER, DEVICE_HELPER, DEVICE_MODULE_HELPER
from migrator.fix.transforms.registry import register
from migrator.model import Finding
from migrator.rules.catalogue import load_catalogue

DEVICE_CALL = "_migrate_device()"


def _device(ctx: FixContext, index: cst.BaseExpression | None = None) -> cst.Call:
    ctx.helper("_migrate_device", DEVICE_HELPER)
    args = [cst.Arg(index)] if index is not None else []
    return cst.Call(func=cst.Name("_migrate_device"), args=args)


def _device_type(ctx: FixContext) -> cst.Attribute:
    return cst.Attribute(value=_device(ctx), attr=cst.Name("type"))


# -- symbol renames -----------------------------------------------------------------------------
def _rename_use(ctx: FixContext, node: cst.BaseExpression, replacement: str) -> cst.BaseExpression:
    """Rewrite a dotted use keeping the user's alias: `t.cuda.x` -> `t.npu.x`."""
    parts = dotted_name(node).split(".")
    root = parts[0]
    for qual in sorted(ctx.aliases.get(root, ())):
        after = ctx.import_renames.get(root, qual)
        if replacement == after or replacement.startswith(after + "."):
            new = root + replacement[len(after) :]
            if "npu" in new.split(".") or new.startswith("torch_npu"):
                ctx.needs_torch_npu = True
            return cst.parse_expression(new)
    return ctx.expr_for(replacement)


def _string_token_rename(node: cst.CSTNode, old: str, new: str) -> cst.BaseExpression | None:
    if isinstance(node, cst.SimpleString):
        if old not in node.value:
            return None
        return node.with_changes(value=node.value.replace(old, new))
    if isinstance(node, cst.ConcatenatedString):
        left = _string_token_rename(node.left, old, new) or node.left
        right = _string_token_rename(node.right, old, new) or node.right
        return node.with_changes(left=left, right=right)
    if isinstance(node, cst.FormattedString):
        parts = [
            p.with_changes(value=p.value.replace(old, new)) if isinstance(p, cst.FormattedStringText) else p
            for p in node.parts
        ]
        return node.with_changes(parts=parts)
    return None


@register("rename")
def rename(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if finding.family == "environment":
        hit = load_catalogue().match_symbol(f"$env.{finding.symbol}")
        replacement = hit.replacement if hit else None
        if ctx.target != "npu":
            ctx.decline(finding, "environment variables are renamed for the npu target only")
            return None
        new = _string_token_rename(node, finding.symbol, replacement) if replacement else None
        if new is None:
            ctx.decline(finding, "the variable name is not a plain string literal here")
        return new
    replacement = symbol_replacement(finding)
    if replacement is None or not isinstance(node, (cst.Name, cst.Attribute)):
        ctx.decline(finding, "no replacement name for this use")
        return None
    if ctx.target == "portable":
        return _portable_rename(ctx, node, finding)
    return _rename_use(ctx, node, replacement)


def _portable_rename(ctx: FixContext, node: cst.BaseExpression, finding: Finding) -> cst.CSTNode | None:
    """`torch.cuda.X` -> `_migrate_device_module().X`: the current accelerator's runtime module,
    or a CPU stand-in, so the same code runs on CUDA, Ascend and CPU-only hosts."""
    symbol = finding.symbol
    if symbol == "torch.cuda" or symbol.startswith("torch.cuda."):
        try:
            parts = dotted_name(node).split(".")
        except ValueError:
            parts = []
        root_quals = ctx.aliases.get(parts[0], set()) if parts else set()
        if "torch" in root_quals and len(parts) >= 2 and parts[1] == "cuda":
            ctx.helper("_migrate_device_module", DEVICE_MODULE_HELPER)
            expr = "_migrate_device_module()" + "".join(f".{p}" for p in parts[2:])
            return cst.parse_expression(expr)
    ctx.decline(finding, "no portable spelling for this use (it names a CUDA-only module directly)")
    return None


# -- values ------------------------------------------------------------------------------------
@register("tensor-cuda", level="call")
def tensor_cuda(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    if ctx.target == "npu":
        return call.with_changes(func=func.with_changes(attr=cst.Name("npu")))
    args = bind(call, ["device", "non_blocking", "memory_format"])
    if args is None:
        ctx.decline(finding, "unusual `.cuda()` arguments")
        return None
    device = _device(ctx, args["device"].value if "device" in args else None)
    new_args = [positional(device)] + [kwarg(k, a.value) for k, a in args.items() if k != "device"]
    return with_args(call, func.with_changes(attr=cst.Name("to")), new_args)


@register("is-cuda")
def is_cuda(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if not isinstance(node, cst.Attribute):
        return None
    if ctx.target == "npu":
        return node.with_changes(attr=cst.Name("is_npu"))
    # any accelerator: the tensor is not on the CPU
    return cst.parse_expression(f'({code(node.value)}.device.type != "cpu")')


DEVICE_LITERAL = re.compile(r"^(?P<prefix>[rRbBuU]*)(?P<q>['\"]{1,3})cuda(?P<rest>(:(\d+|\{\w*\}|%d|%s))?)(?P=q)$")


@register("device-string")
def device_string(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if ctx.target == "npu":
        new = _string_device_npu(node)
        if new is None:
            ctx.decline(finding, "not a plain device literal")
        return new
    if isinstance(node, cst.SimpleString):
        m = DEVICE_LITERAL.match(node.value)
        if m and (m.group("rest")[1:].isdigit() or not m.group("rest")):
            index = m.group("rest")[1:]
            if not index:
                return _device_type(ctx)
            return cst.Call(func=cst.Name("str"), args=[cst.Arg(_device(ctx, cst.Integer(index)))])
    if isinstance(node, cst.FormattedString) and len(node.parts) == 2:
        text, value = node.parts
        if isinstance(text, cst.FormattedStringText) and text.value == "cuda:" and isinstance(
            value, cst.FormattedStringExpression
        ) and value.format_spec is None and value.conversion is None:
            return cst.Call(func=cst.Name("str"), args=[cst.Arg(_device(ctx, value.expression))])
    ctx.decline(finding, "this device string has no portable rewrite; pick the device once with torch.accelerator")
    return None


def _string_device_npu(node: cst.CSTNode) -> cst.CSTNode | None:
    if isinstance(node, cst.SimpleString):
        m = DEVICE_LITERAL.match(node.value)
        if not m:
            return None
        return node.with_changes(value=f"{m.group('prefix')}{m.group('q')}npu{m.group('rest')}{m.group('q')}")
    if isinstance(node, cst.FormattedString) and node.parts and isinstance(node.parts[0], cst.FormattedStringText):
        first = node.parts[0]
        if first.value == "cuda" or first.value.startswith("cuda:"):
            return node.with_changes(parts=[first.with_changes(value="npu" + first.value[4:]), *node.parts[1:]])
    return None


@register("nccl-backend")
def nccl_backend(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if not isinstance(node, cst.SimpleString):
        ctx.decline(finding, "not a plain string literal")
        return None
    if ctx.target == "npu":
        value = re.sub(r"(?i)\bnccl\b", lambda m: "HCCL" if m.group(0).isupper() else "hccl", node.value)
        value = re.sub(r"\bcuda:", "npu:", value)
        return node.with_changes(value=value)
    if re.fullmatch(r"[rRuU]?(['\"])nccl\1", node.value, flags=re.I):
        ctx.helper("_migrate_backend", BACKEND_HELPER)
        ctx.helper("_migrate_device", DEVICE_HELPER)
        return cst.parse_expression("_migrate_backend()")
    ctx.decline(finding, "combined backend specs have no portable rewrite; use dist.get_default_backend_for_device")
    return None


@register("device-type-compare")
def device_type_compare(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if not isinstance(node, cst.Comparison):
        return None

    def swap(expr: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(expr, cst.SimpleString) and (m := DEVICE_LITERAL.match(expr.value)) and not m.group("rest"):
            if ctx.target == "npu":
                return expr.with_changes(value=expr.value.replace("cuda", "npu"))
            return _device_type(ctx)
        return expr

    return node.with_changes(
        left=swap(node.left),
        comparisons=[c.with_changes(comparator=swap(c.comparator)) for c in node.comparisons],
    )


@register("int-device", level="either")
def int_device(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if isinstance(node, cst.Call):  # torch.device(i)
        if len(node.args) != 1 or node.args[0].keyword or node.args[0].star:
            ctx.decline(finding, "unusual torch.device arguments")
            return None
        index = node.args[0].value
        if ctx.target == "npu":
            return with_args(node, node.func, [positional(cst.SimpleString('"npu"')), positional(index)])
        return _device(ctx, index)
    if isinstance(node, cst.Integer):
        if ctx.target == "npu":
            return cst.SimpleString(f'"npu:{node.value}"')
        return _device(ctx, node)
    return None


# -- autocast and loss scaling -----------------------------------------------------------------
CUDA_AUTOCAST_PARAMS = ["enabled", "dtype", "cache_enabled"]


def _device_arg(ctx: FixContext) -> cst.BaseExpression:
    return cst.SimpleString('"npu"') if ctx.target == "npu" else _device_type(ctx)


@register("autocast-device", level="call")
def autocast_device(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    if finding.code == "AMP001":  # torch.cuda.amp.autocast(enabled, dtype, cache_enabled)
        args = bind(call, CUDA_AUTOCAST_PARAMS)
        if args is None:
            ctx.decline(finding, "unusual autocast arguments")
            return None
        if "dtype" not in args:
            args["dtype"] = kwarg("dtype", ctx.expr_for("torch.float16"))  # torch.cuda.amp's default, made explicit
        new_args = [positional(_device_arg(ctx))] + [kwarg(k, args[k].value) for k in ("dtype", "enabled", "cache_enabled") if k in args]
        return with_args(call, ctx.expr_for("torch.autocast"), new_args)
    # AMP004 / AMP005: a "cuda" device argument to torch.autocast / torch.amp.GradScaler / friends
    new_args = []
    changed = False
    for i, arg in enumerate(call.args):
        is_device = (arg.keyword is None and i == 0) or (
            arg.keyword is not None and arg.keyword.value in ("device_type", "device")
        )
        if is_device and isinstance(arg.value, cst.SimpleString) and DEVICE_LITERAL.match(arg.value.value):
            arg = arg.with_changes(value=_device_arg(ctx))
            changed = True
        new_args.append(arg)
    if not changed:
        ctx.decline(finding, "the device argument is not a literal")
        return None
    return call.with_changes(args=new_args)


@register("grad-scaler", level="either")
def grad_scaler(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if not isinstance(node, cst.Call):
        if ctx.target == "npu":
            return ctx.expr_for("torch.npu.amp.GradScaler")
        ctx.decline(finding, "GradScaler used as a value: pass the device when constructing it")
        return None
    if ctx.target == "npu":
        return node.with_changes(func=ctx.expr_for("torch.npu.amp.GradScaler"))
    return with_args(node, ctx.expr_for("torch.amp.GradScaler"), [positional(_device_type(ctx)), *node.args])


@register("custom-fwd", level="either")
def custom_fwd(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    name = finding.symbol.rsplit(".", 1)[-1]
    func = ctx.expr_for(f"torch.amp.{name}")
    device = kwarg("device_type", _device_arg(ctx))
    if isinstance(node, cst.Call):
        return with_args(node, func, [device, *node.args])
    return cst.Call(func=func, args=[device])


@register("autocast-dtype-api", level="call")
def autocast_dtype_api(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    replacement = symbol_replacement(finding)
    if replacement is None:
        return None
    return with_args(call, ctx.expr_for(replacement), [positional(_device_arg(ctx)), *call.args])


@register("nvtx-noop", level="call")
def nvtx_noop(ctx: FixContext, call: cst.Call, finding: Finding, rule) -> cst.CSTNode | None:
    name = finding.symbol.rsplit(".", 1)[-1]
    if ctx.target == "npu" and name in ("range_push", "range_pop", "mark"):
        ctx.needs_torch_npu = True
        return call.with_changes(func=cst.parse_expression(f"torch_npu.npu.mstx.{name}"))
    ctx.decline(finding, f"`nvtx.{name}` has no automatic {ctx.target} rewrite; remove it or use torch_npu.npu.mstx")
    return None


@register("tensor-type-string")
def tensor_type_string(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule) -> cst.CSTNode | None:
    if ctx.target != "npu":
        ctx.decline(finding, "compare dtype and device instead of type strings for portable code")
        return None
    new = _string_token_rename(node, "torch.cuda.", "torch.npu.")
    if new is None:
        ctx.decline(finding, "not a plain string literal")
    return new
