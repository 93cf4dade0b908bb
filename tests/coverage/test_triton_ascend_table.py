"""The generated Triton-Ascend table matches the pinned docs it was built from, row by row."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from migrator.catalogue.coverage import triton_ascend
from op_coverage import triton_ascend as generator

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
TABLE = json.loads(generator.OUT.read_text(encoding="utf-8"))
needs_docs = pytest.mark.skipif(not (SHARED / generator.OUTLINE).is_file(), reason="shared triton-ascend docs absent")


def _line(src: dict) -> str:
    return (SHARED / src["file"]).read_text(encoding="utf-8").splitlines()[src["line"] - 1]


@needs_docs
def test_every_row_is_its_source_line():
    marks = {"yes": "✓", "bool-as-int8": "✓*", "no": "×"}
    for row in TABLE["ops"]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", _line(row["source"]).strip())[1:-1]]
        assert cells[1].replace(" ", "_").startswith(row["op"]), row
        assert cells[2:] == [marks[row["dtypes"][d]] for d in TABLE["dtypes"]], row


@needs_docs
def test_limits_and_constraints_are_their_source_lines():
    assert "192 KB" in _line(TABLE["limits"]["ub_bytes"]["source"])
    assert "96KB" in _line(TABLE["limits"]["ub_bytes_double_buffer"]["source"])
    assert "65535" in _line(TABLE["limits"]["core_dim_max"]["source"])
    for c in TABLE["constraints"]:
        assert _line(c["source"]).startswith("- " + c["ops"][0].split("/")[0]) or "/" in _line(c["source"])


@needs_docs
def test_committed_table_is_fresh():
    assert generator.render(generator.build(SHARED)) == generator.OUT.read_text(encoding="utf-8")


def test_reader_facts():
    ops = triton_ascend.ops()
    assert ops["dot"].supports("int32") is False and ops["dot"].supports("bf16") is True
    assert ops["trans"].supports("int64") is False
    assert ops["load"].supports("uint32") is False
    assert ops["add"].supports("bool") is True  # ✓*: computed as int8
    assert ops["dot"].supports("fp8e4nv") is None
    assert ops["dot_scaled"].status == "unsupported"
    for hint in ("multiple_of", "max_contiguous", "max_constancy"):
        assert ops[hint].status == "ignored"  # × in the table, yet Ascend's tutorials call them
    assert triton_ascend.limit("ub_bytes")[0] == 192 * 1024
    assert triton_ascend.limit("core_dim_max")[0] == 65535
    assert triton_ascend.commit() == generator.COMMIT
