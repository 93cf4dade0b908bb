"""What the table builder reads, as text: one record that the builder, the output writer and the real-input
loader share (its own module, so the builder and the writer do not import each other)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from op_coverage.facts import TORCH_NPU_VERSION, TORCH_VERSION


@dataclass
class Inputs:
    """Everything the builder reads, already as text (tests pass small excerpts)."""

    wheel: Mapping[str, str]  # wheel member path -> text
    native_functions: str
    torch_cuda_init: str
    docs: Mapping[str, str]  # docs file name -> markdown
    derivatives: str
    meta: dict = field(default_factory=dict)  # header "inputs" section (versions, sha256s)
    docs_commit: str = "unknown"
    op_plugin_commit: str = "unknown"
    torch_npu_version: str = TORCH_NPU_VERSION
    torch_version: str = TORCH_VERSION
