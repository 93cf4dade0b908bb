"""Which dtype limits matter to a program (standard library only).

A documented dtype list is a finding only for a dtype the program uses: fp64 or complex missing
from a list is not a finding for a program that never uses them. The table's generator reads
`DTYPE_BLIND_APIS` too (their docs' dtype lines are dropped).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from migrator.ground.word_search import WordSet

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
# Each spelling is a whole word (`\bbf16\b`, `\btorch\.half\b`) or `.half()`. A leading `\b` makes the regex
# engine try every position, so the words are searched without it and their start checked here.
_WORDS = ((re.compile(rb"(?:bfloat16|bf16)(?![A-Za-z0-9_])"), "bf16"), (re.compile(rb"(?:float16|fp16)(?![A-Za-z0-9_])"), "fp16"),
          (re.compile(rb"torch\.half(?![A-Za-z0-9_])"), "fp16"))
_HALF_CALL = re.compile(rb"\.half\(\)")
TRAINING_WORDS = (b"bf16", b"fp16", b"float16", b"half")  # every spelling holds one: one pass for the four (a regex
# alternation costs more over a text that holds none)
_CANDIDATE_WORDS = WordSet(TRAINING_WORDS)


def training_dtypes(texts: Iterable[bytes], candidates: bool | None = None) -> tuple[str, ...]:
    """The 16-bit training dtypes a program's files show, in `TRAINING_DTYPES` order. `candidates`: whether the
    texts hold a `TRAINING_WORDS` word, where the caller knows (False: nothing to look for)."""
    if candidates is False:
        return ()
    found: set[str] = set()
    for text in texts:
        if candidates is None and not _CANDIDATE_WORDS.found_in(text):
            continue  # every spelling holds one of these
        for pattern, dtype in _WORDS:
            if dtype not in found and any(_word_start(text, m.start()) for m in pattern.finditer(text)):
                found.add(dtype)
        if "fp16" not in found and _HALF_CALL.search(text):
            found.add("fp16")
        if len(found) == len(TRAINING_DTYPES):
            break
    return tuple(d for d in TRAINING_DTYPES if d in found)


def _word_start(text: bytes, at: int) -> bool:
    """No ASCII word character (a bytes pattern's `\\w`) before `at`."""
    before = text[at - 1:at]
    return not before or not (before.isalnum() or before == b"_")
