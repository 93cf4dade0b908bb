"""What the user chooses about a fix's rewrites: shared by the caller's request
(`pipeline.fix.FixRequest`) and the fixer's options (`fix.runner.FixOptions`). No libcst here: the
request is built with the api, before any fix runs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class FixChoices:
    target: str = "npu"  # "npu" | "portable" (ground.kinds.Target)
    exact_only: bool = False  # only the rewrites that keep semantics exactly
    annotate: bool = False  # a comment on each rewritten line
    strip_annotations: bool = False  # remove the comments an earlier --annotate left
    fuse: bool = False  # --fuse: FUS sites become a branch to the fused torch_npu op (fix/fusion_rewrite.py)

    def chosen(self) -> FixChoices:
        """These fields alone, of a request or options built on them."""
        values: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(FixChoices)}
        return FixChoices(**values)
