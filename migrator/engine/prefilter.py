"""Whether a Python file's bytes can lead to a finding at all: files that cannot are only checked for syntax,
without their tree (`scan_file._check_python`)."""

from __future__ import annotations

import re

from migrator.ground.word_search import WordSet

# Bytes that can lead to a finding in Python code; files without any are not checked (`prefiltered`: one pass
# for all, `word_search.WordSet`). The commonest first, for the substring searches that stand in without RE2
PREFILTER_WORDS = (
    b"torch", b"cuda", b"device", b"CUDA", b"nccl", b"NCCL", b"apex", b"amp_C", b"flash_attn", b"xformers", b"triton",
    b"transformer_engine", b"bitsandbytes", b"cupy", b"pynvml", b"nvidia", b"deepspeed", b"DataParallel",
    b"cpp_extension", b"autocast", b"GradScaler", b"migrate:", b".to(", b"cudnn", b"nvtx", b"GPUtil", b"data_parallel",
    b"NVIDIA", b"NVTE_", b"flashinfer", b"liger_kernel", b"mamba_ssm", b"causal_conv1d", b"dropout_layer_norm",
    b"fused_dense_lib", b"rotary_emb", b"flash_attention_", b"BitsandbytesPrecision", b"accelerator=",
    b"ASCEND_LAUNCH_BLOCKING", b"cutlass", b"ASCEND_GLOBAL_LOG_LEVEL", b"TASK_QUEUE_ENABLE", b"HCCL_ALGO",
)
PREFILTER = re.compile(b"|".join(map(re.escape, PREFILTER_WORDS)))  # the same test as one pattern


_PREFILTER_WORDS = WordSet(PREFILTER_WORDS)


def prefiltered(data: bytes) -> bool:
    """Whether `data` holds a `PREFILTER_WORDS` word (`PREFILTER.search(data)`, faster; most files name torch)."""
    return b"torch" in data or _PREFILTER_WORDS.found_in(data)


# the comment and blank lines a file starts with (a licence header): no code, so no finding, is there
LEADING_COMMENTS = re.compile(rb"(?:[ \t\f]*(?:#[^\r\n]*)?(?:\r\n|\r|\n))*")


def code_prefiltered(data: bytes) -> bool:
    """`prefiltered`, not counting a word that only the leading comments hold (`# Copyright (c) NVIDIA
    CORPORATION`: a tenth of Megatron's files name no other). Comments make no syntax node, so such a file's tree
    is that of one without the word, which the prefilter skips; a directive there (`migrate:`) still counts."""
    if not prefiltered(data):
        return False
    end = LEADING_COMMENTS.match(data).end()  # type: ignore[union-attr]  # (it matches the empty string)
    return end == 0 or prefiltered(data[end:]) or b"migrate:" in data[:end]
