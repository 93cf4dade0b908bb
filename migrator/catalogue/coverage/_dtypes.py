"""Which dtype limits matter to a program (standard library only).

A documented dtype list is a finding only for a dtype the program uses: fp64 or complex missing
from a list is not a finding for a program that never uses them. The table's generator reads
`DTYPE_BLIND_APIS` too (their docs' dtype lines are dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._model import CoverageEntry

#: Tensor APIs that compute nothing on the elements (metadata, autograd bookkeeping): no op verdict.
METADATA_APIS = frozenset(
    f"torch.Tensor.{name}" for name in (
        "size", "dim", "numel", "nelement", "ndimension", "ndim", "shape", "stride", "storage_offset",
        "element_size", "data_ptr", "is_contiguous", "is_floating_point", "is_complex", "is_conj",
        "is_signed", "is_inference", "is_pinned", "is_set_to", "is_sparse", "item", "tolist",
        "storage", "untyped_storage", "storage_type", "grad", "detach", "detach_", "requires_grad_",
        "retain_grad", "retains_grad", "register_hook", "record_stream", "dtype", "device",
        "is_cuda", "is_leaf", "requires_grad", "nbytes", "itemsize", "get_device", "dim_order",
    )
) | {"torch.numel", "torch.is_tensor", "torch.is_floating_point", "torch.is_complex", "torch.result_type"}

#: APIs whose documented dtype line is not a limit: no kernel runs on the elements.
DTYPE_BLIND_APIS = METADATA_APIS | {"torch.nn.Identity"}

#: Floating and complex dtypes, in the order a note names the first one outside a list.
VALUE_DTYPES = ("fp32", "bf16", "fp16", "fp64", "complex64", "complex128")

#: What a program that names no dtype computes in (torch's default dtype).
DEFAULT_DTYPES = frozenset({"fp32"})


def dtype_outside(entry: CoverageEntry, used: Iterable[str]) -> str | None:
    """The first dtype of `used` (floating / complex) that `entry`'s documented list leaves out.

    No list, or a list of index dtypes only, judges nothing; bf16 on a `bf16_undocumented` entry
    is a documentation gap, not a limit; a documented exclusion always counts."""
    wanted = set(used)
    values = [d for d in entry.dtypes if d in VALUE_DTYPES]
    for dtype in VALUE_DTYPES:
        if dtype not in wanted:
            continue
        if dtype in entry.dtypes_excluded:
            return dtype
        if not values or dtype in values or (dtype == "bf16" and entry.bf16_undocumented):
            continue
        return dtype
    return None

#: Dtypes a program trains in, set in one place for every module (autocast, `--dtype bf16`, a config):
#: shown anywhere in the tree, they count for every file. fp64 and complex are explicit casts: they
#: count only in the module that shows them (`engine/python_checker.py: dtypes_used`).
TRAINING_DTYPES = ("bf16", "fp16")

# Spellings in code, configs and launch scripts (`torch.bfloat16`, `--dtype bfloat16`,
# `"bf16": {"enabled": true}`, `.half()`); "half" counts only in its torch spelling.
_EVIDENCE = re.compile(rb"\b(?P<bf16>bfloat16|bf16)\b|\b(?P<fp16>float16|fp16)\b|(?P<half>\btorch\.half\b|\.half\(\))")
_CANDIDATE = re.compile(rb"bf16|fp16|float16|half")
_GROUP_DTYPE = {"bf16": "bf16", "fp16": "fp16", "half": "fp16"}


def training_dtypes(texts: Iterable[bytes]) -> tuple[str, ...]:
    """The 16-bit training dtypes a program's files show, in `TRAINING_DTYPES` order."""
    found: set[str] = set()
    for text in texts:
        if not _CANDIDATE.search(text):
            continue  # every spelling holds one of these; the search with word boundaries costs 10x this one
        for match in _EVIDENCE.finditer(text):
            found.add(_GROUP_DTYPE[match.lastgroup or ""])
        if len(found) == len(TRAINING_DTYPES):
            break
    return tuple(d for d in TRAINING_DTYPES if d in found)
