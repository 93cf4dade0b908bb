"""Patterns several floors share: the scanner detects with them, the rule units decide and rewrite
with them. One definition each, so a detector and its fixer never disagree on what "a device string"
or "an NCCL backend" is.
"""

from __future__ import annotations

import ast
import re

# "cuda", 'cuda:0', "cuda:{}" / %d / %s templates, with any string prefix (a literal's source text)
DEVICE_LITERAL = re.compile(r"^(?P<prefix>[rRbBuU]*)(?P<q>['\"]{1,3})cuda(?P<rest>(:(\d+|\{\w*\}|%d|%s))?)(?P=q)$")
# the same device names as a string's value
DEVICE_STRING = re.compile(r"^cuda(:(\d+|\{\w*\}|%d|%s))?$")

# a whole backend name, or a "device:backend,..." spec that names nccl
NCCL_STRING = re.compile(r"(?i)^(nccl|(\w+:\w+,)*\w+:nccl(,\w+:\w+)*)$")
# a plain "nccl" literal (source text): the only backend string with a portable rewrite
PLAIN_NCCL = re.compile(r"[rRuU]?(['\"])nccl\1", flags=re.I)

# names that show a collection already handles Ascend
ASCEND_NAMES = frozenset({"npu", "hccl"})
# Lightning's `accelerator=` values that mean a CUDA device
CUDA_ACCELERATORS = frozenset({"cuda", "gpu"})


def lists_npu(node: ast.Tuple | ast.List | ast.Set) -> bool:
    """("cuda", "npu", ...) already handles Ascend."""
    return any(isinstance(e, ast.Constant) and e.value in ASCEND_NAMES for e in node.elts)


def accepted_names(node: ast.Tuple | ast.List | ast.Set) -> bool:
    """`{"cpu", "cuda"}`, `choices=["cpu", "cuda", "auto"]`: the names a user may type, not a device selection
    (only strings, "cuda" among other names)."""
    if len(node.elts) < 2 or not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return False
    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return "cuda" in names and any(not n.startswith("cuda") for n in names)
