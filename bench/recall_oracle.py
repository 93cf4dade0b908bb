"""An independent finder of CUDA-dependent lines in Python source, for `bench/scan_recall.py`.

It shares nothing with the scanner (`migrator/`): no rule table, no name resolution, no `ast`. It reads
the tokens (`tokenize`) and marks a line when one of them is in the lists below, so comments and
docstrings (a string that is a statement by itself) never count. It misses what needs name resolution
(`bnb.optim.Adam8bit` after `import bitsandbytes as bnb` is marked only at the import) and may mark a
line that is not CUDA-dependent (`args.cuda` as a user's flag): the benchmark lists what the scanner
did not report, and a person classifies those lines.

The lists, each with why a line holding it depends on CUDA:
- NAMES (a name token): `cuda` (`.cuda()`, `torch.cuda.*`, `torch.backends.cuda`, `from numba import cuda`),
  `is_cuda`, `cudnn` (`torch.backends.cudnn`), `nccl` (`torch.cuda.nccl`), CUDA-only libraries by their
  module names (apex, flash_attn, xformers, pynvml, bitsandbytes, triton, cupy/cupyx, pycuda,
  transformer_engine, amp_C, mamba_ssm, causal_conv1d, flashinfer, liger_kernel), `CUDAExtension`,
  `CUDA_HOME`;
- a name followed by an attribute (`deepspeed.ops`: DeepSpeed's compiled CUDA ops);
- STRINGS (a string token's text, whole): a CUDA device (`"cuda"`, `"cuda:0"`, `f"cuda:{rank}"`), the
  `"nccl"` backend, a CUDA/NCCL environment variable (`"CUDA_VISIBLE_DEVICES"`, `"NCCL_DEBUG"`,
  `"PYTORCH_CUDA_ALLOC_CONF"`, `"TORCH_CUDA_ARCH_LIST"`, also as `NAME=value`), a CUDA source file
  (`"kernel.cu"`, `"x.cuh"`), `"flash_attention_2"` (transformers' FlashAttention switch).
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

NAMES = frozenset({
    "cuda", "is_cuda", "cudnn", "nccl", "apex", "flash_attn", "flash_attn_interface", "xformers", "pynvml",
    "bitsandbytes", "triton", "cupy", "cupyx", "pycuda", "transformer_engine", "amp_C", "mamba_ssm",
    "causal_conv1d", "flashinfer", "liger_kernel", "CUDAExtension", "CUDA_HOME",
})
ATTRIBUTE_PAIRS = frozenset({("deepspeed", "ops")})
DEVICE = re.compile(r"cuda(?::(?:\d+|\{[^}]*\}))?")
ENV = re.compile(r"(?:CUDA_[A-Z0-9_]+|NCCL_[A-Z0-9_]+|TORCH_NCCL_[A-Z0-9_]+|PYTORCH_CUDA_ALLOC_CONF|TORCH_CUDA_ARCH_LIST)"
                 r"(?:=.*)?")
CUDA_SOURCE = re.compile(r"[^\s'\"]*\.cuh?")
STRING_WORDS = frozenset({"nccl", "flash_attention_2"})
STRING_PREFIX = re.compile(r"^[rRbBuUfF]*")
SKIPPED = (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


@dataclass(frozen=True)
class Statement:
    """A logical line: its first and last physical line, and whether it is an import."""

    first: int
    last: int
    is_import: bool


@dataclass(frozen=True)
class OracleFile:
    lines: dict[int, str]  # line -> the token that marked it (the first on that line)
    statements: tuple[Statement, ...]


def string_text(token: str) -> str:
    """A string token's text without prefix and quotes (escapes left as written: the lists need none)."""
    body = token[len(STRING_PREFIX.match(token).group(0)):]  # type: ignore[union-attr]  # always matches
    quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
    return body[len(quote):len(body) - len(quote)]


def string_hit(text: str) -> str | None:
    if DEVICE.fullmatch(text) or text in STRING_WORDS or ENV.fullmatch(text) or CUDA_SOURCE.fullmatch(text):
        return f'"{text}"' if len(text) < 40 else f'"{text[:37]}..."'
    return None


def scan_text(text: str) -> OracleFile:
    """The marked lines of one module's text, and its logical lines; a file tokenize refuses marks nothing."""
    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in SKIPPED]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return OracleFile({}, ())
    lines: dict[int, str] = {}
    statements: list[Statement] = []
    start = 0  # index of the current logical line's first token
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if i > start:
                statements.append(Statement(tokens[start].start[0], tok.start[0],
                                            tokens[start].string in ("import", "from")))
            start = i + 1
            continue
        hit = None
        if tok.type == tokenize.NAME:
            if tok.string in NAMES:
                hit = tok.string
            elif (i + 2 < len(tokens) and tokens[i + 1].string == "."
                  and (tok.string, tokens[i + 2].string) in ATTRIBUTE_PAIRS):
                hit = f"{tok.string}.{tokens[i + 2].string}"
        elif tok.type == tokenize.STRING and not _is_docstring(tokens, i, start):
            hit = string_hit(string_text(tok.string))
        if hit:
            lines.setdefault(tok.start[0], hit)
    return OracleFile(lines, tuple(statements))


def _is_docstring(tokens: list[tokenize.TokenInfo], i: int, start: int) -> bool:
    """A string that is a whole statement (docstrings, bare strings): prose, never code."""
    if i != start:
        return False
    j = i
    while j < len(tokens) and tokens[j].type == tokenize.STRING:  # implicit concatenation
        j += 1
    return j >= len(tokens) or tokens[j].type in (tokenize.NEWLINE, tokenize.ENDMARKER)
