"""`fix: rename`: a symbol, an import alias or an environment variable renamed to its catalogue
replacement. A plain mapping needs no Python of its own: the YAML entry is the rule.

Only the changed node is replaced (`with_changes` on the Attribute/Name chain), so the user's
parentheses, comments and line breaks around it stay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from migrator.catalogue.site import FIXABLE, STAR_IMPORT, CallSite, Declined, Verdict
from migrator.ground.kinds import Target

if TYPE_CHECKING:
    import libcst as cst

    from migrator.catalogue.loader import Rule
    from migrator.fix.context import FixContext
    from migrator.ground.model import Finding

LEVEL = "node"

ENV_NPU_ONLY = "environment variables are renamed for the npu target only"
IMPORT_NPU_ONLY = "imports are renamed for the npu target only; use the module-level name"
NO_REPLACEMENT = "no replacement name for this use"
NO_PORTABLE = "no portable spelling for this use (it names a CUDA-only module directly)"
GETATTR_COMPUTED = ("getattr with a name computed at run time: which `{module}` attribute it reads is unknown, so "
                    "whether `{replacement}` has it cannot be checked; port it by hand")
GETATTR_UNMAPPED = ("getattr reads `{symbol}`, which has no plain rename to `{replacement}.{name}`{judged}: "
                    "write the attribute out (`{symbol}`) so its rule judges it")
GUARD = ("this check guards {call}, which stays CUDA-only: renamed, it is true on the Ascend host and that call "
         "is reached there; port the guarded call first, then this check")


def precheck(site: CallSite) -> Verdict:
    if site.code.startswith("ENV"):
        return Declined(ENV_NPU_ONLY) if site.target != Target.NPU else FIXABLE
    if site.is_import and site.text == "*":
        return Declined(STAR_IMPORT)
    if site.is_import:
        return Declined(IMPORT_NPU_ONLY) if site.target != Target.NPU else FIXABLE
    if site.guards:
        return Declined(GUARD.format(call=site.guards))
    if site.passed_to == "getattr" and (declined := _getattr_declined(site)) is not None:
        return declined
    if site.target == Target.PORTABLE and not _portable_spelling(site):
        return Declined(NO_PORTABLE)
    return FIXABLE


def _getattr_declined(site: CallSite) -> Declined | None:
    """`getattr(torch.cuda, "name")` renames the module only where the catalogue renames `torch.cuda.name`
    to `torch.npu.name` (the call rewrites' own table), so both spellings get the same answer."""
    from migrator.catalogue.loader import load_catalogue

    replacement = site.replacement or ""
    name = site.passed_args[1].value if len(site.passed_args) > 1 and not site.passed_args[1].star else None
    if not isinstance(name, str):
        return Declined(GETATTR_COMPUTED.format(module=site.symbol, replacement=replacement))
    hit = load_catalogue().match_symbol(f"{site.symbol}.{name}")
    if hit is not None and hit.rule.fix == "rename" and hit.replacement == f"{replacement}.{name}":
        return None
    judged = f" ({hit.rule.code} judges it)" if hit is not None else ""
    return Declined(GETATTR_UNMAPPED.format(symbol=f"{site.symbol}.{name}", replacement=replacement, name=name, judged=judged))


def _portable_spelling(site: CallSite) -> bool:
    """`torch.cuda.X` through an alias of torch becomes `_migrate_device_module().X`."""
    cuda = site.symbol == "torch.cuda" or site.symbol.startswith("torch.cuda.")
    return cuda and "torch" in site.root_names and len(site.root) >= 2 and site.root[1] == "cuda"


def fix(ctx: FixContext, node: cst.CSTNode, finding: Finding, rule: Rule) -> cst.CSTNode | Declined:
    import libcst as cst

    from migrator.fix.imports import symbol_replacement
    from migrator.fix.transforms.common import string_token_rename

    if finding.family == "environment":
        from migrator.catalogue.loader import load_catalogue

        hit = load_catalogue().match_symbol(f"$env.{finding.symbol}")
        new = string_token_rename(node, finding.symbol, hit.replacement) if hit and hit.replacement else None
        return new if new is not None else Declined("the variable name is not a plain string literal here")
    replacement = symbol_replacement(finding)
    if replacement is None or not isinstance(node, (cst.Name, cst.Attribute)):
        return Declined(NO_REPLACEMENT)
    if ctx.target == Target.PORTABLE:
        return _portable_rename(ctx, node)
    return _rename_use(ctx, node, replacement)


def _rename_use(ctx: FixContext, node: cst.BaseExpression, replacement: str) -> cst.BaseExpression:
    """Rewrite a dotted use keeping the user's alias: `t.cuda.x` -> `t.npu.x`."""
    from migrator.fix.imports import dotted_name
    from migrator.fix.transforms.common import replace_dotted

    parts = dotted_name(node).split(".")
    root = parts[0]
    for qual in sorted(ctx.aliases.get(root, ())):
        after = ctx.import_renames.get(root, qual)
        if replacement == after or replacement.startswith(after + "."):
            new = root + replacement[len(after) :]
            if "npu" in new.split(".") or new.startswith("torch_npu"):
                ctx.needs_torch_npu = True
            return replace_dotted(node, new)
    return replace_dotted(node, _dotted_text(ctx.expr_for(replacement)))


def _dotted_text(expr: cst.BaseExpression) -> str:
    from migrator.fix.imports import dotted_name

    return dotted_name(expr)


def _portable_rename(ctx: FixContext, node: cst.BaseExpression) -> cst.CSTNode:
    """`torch.cuda.X` -> `_migrate_device_module().X`: the current accelerator's runtime module,
    or a CPU stand-in, so the same code runs on CUDA, Ascend and CPU-only hosts."""
    from migrator.fix.transforms.common import replace_dotted_prefix
    from migrator.fix.transforms.helpers import DEVICE_MODULE_HELPER

    ctx.helper("_migrate_device_module", DEVICE_MODULE_HELPER)
    return replace_dotted_prefix(node, 2, "_migrate_device_module()")
