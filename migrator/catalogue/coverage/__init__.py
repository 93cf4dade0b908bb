"""Op coverage of torch_npu: which PyTorch APIs run on Ascend NPUs, per SoC.

Reads the generated table ``op_coverage/torch_npu-<version>.json`` (shipped in wheels as
``migrator/_data/op_coverage/``). Standard library only: importing this package never imports
torch, torch_npu or libcst. The table is parsed once per process and version.

>>> from migrator.catalogue.coverage import lookup
>>> lookup("torch.nn.functional.gelu", soc="A2").status
'partial'
"""

from __future__ import annotations

from ._explain import explain, format_text
from ._model import KERNELS, STATUSES, CoverageEntry, CoverageError
from ._names import normalize_dtype, normalize_name
from ._reason import runs_as, status_reason
from ._resources import data_path
from ._table import (
    available_versions,
    default_version,
    float64_supported,
    iter_entries,
    lookup,
    socs,
    table_header,
    torch_npu_release_for_torch,
)

__all__ = [
    "CoverageEntry",
    "CoverageError",
    "KERNELS",
    "STATUSES",
    "available_versions",
    "data_path",
    "default_version",
    "explain",
    "float64_supported",
    "format_text",
    "iter_entries",
    "runs_as",
    "status_reason",
    "lookup",
    "normalize_dtype",
    "normalize_name",
    "socs",
    "table_header",
    "torch_npu_release_for_torch",
]
