"""Triton-Ascend coverage: which `tl.*` ops run for which dtype, and the on-chip limits.

Reads the generated ``op_coverage/triton-ascend.json`` (``op_coverage/triton_ascend.py``), once per
process. Standard library only.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from ._resources import data_path

TABLE = "triton-ascend.json"


@dataclass(frozen=True)
class TritonOp:
    op: str
    status: str  # supported | unsupported | ignored (a compiler hint Ascend drops)
    dtypes: dict[str, str]  # dtype -> yes | no | bool-as-int8
    source: str  # "triton-ascend/python-api/outline.md:7"

    def supports(self, dtype: str) -> bool | None:
        """None when the table has no column for the dtype (fp8, fp64: not in the table)."""
        value = self.dtypes.get(dtype)
        return None if value is None else value != "no"


@functools.cache
def table() -> dict:
    return json.loads(data_path("op_coverage", TABLE).read_bytes())


@functools.cache
def ops() -> dict[str, TritonOp]:
    return {row["op"]: TritonOp(row["op"], row["status"], row["dtypes"],
                                f"{row['source']['file']}:{row['source']['line']}") for row in table()["ops"]}


def limit(name: str) -> tuple[int, str]:
    """(value, "file:line") of `ub_bytes`, `ub_bytes_double_buffer` or `core_dim_max`."""
    entry = table()["limits"][name]
    return entry["value"], f"{entry['source']['file']}:{entry['source']['line']}"


def commit() -> str:
    return str(table()["source"]["commit"])
