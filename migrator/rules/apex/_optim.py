"""What the Apex optimizer and norm rewrites share: every default made explicit."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst


def explicit(args: dict[str, cst.Arg], order: list[str], defaults: dict[str, str]) -> list[cst.Arg]:
    """Every hyper-parameter written out: the user's argument where given, else the old default."""
    from migrator.fix.transforms.args import keep_or_kwarg

    picked = (keep_or_kwarg(args, name, defaults.get(name)) for name in order if name in args or name in defaults)
    return [a for a in picked if a is not None]


def first(args: dict[str, cst.Arg], name: str) -> cst.Arg:
    from migrator.fix.transforms.args import positional

    arg = args[name]
    return arg if arg.keyword is None else positional(arg.value)
