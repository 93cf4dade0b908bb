"""One serialiser for the data that crosses layers (migrator/ground/serialise.py): findings and run results
are written as the schema documents them and read back strictly."""

from __future__ import annotations

import json

import pytest

from migrator.ground.model import CoverageInfo, Finding, FixInfo, ImportInfo, RouteMark
from migrator.ground.schema_check import check
from migrator.ground.serialise import SerialiseError

FINDING = Finding("DEV010", "tensor-cuda", "device", "error", "a.py", 2, 5, 2, 12, ".cuda()", "m",
                  fix=FixInfo("exact", "Use .npu()"), coverage=CoverageInfo("partial", "A2", ("fp32",), "n"),
                  cell=3, route=RouteMark("covered", "R", "t", "n", "s"), declined="why",
                  imported=ImportInfo("apex", optional=True))


def test_a_finding_is_written_in_schema_order_with_absent_fields_left_out():
    data = FINDING.to_dict()
    assert list(data)[:12] == ["code", "name", "family", "severity", "path", "line", "column", "end_line",
                               "end_column", "symbol", "message", "fix"]
    assert data["import"] == {"library": "apex", "optional": True} and "imported" not in data
    assert data["coverage"]["dtypes"] == ["fp32"] and "flag" not in data["route"]
    bare = Finding("DEV010", "n", "device", "error", "a.py", 1, 1, 1, 2, "s", "m").to_dict()
    assert bare["fix"] is None and not {"coverage", "cell", "route", "declined", "import"} & set(bare)


def test_a_finding_reads_back_equal_and_strictly():
    assert Finding.from_dict(json.loads(json.dumps(FINDING.to_dict()))) == FINDING
    with pytest.raises(SerialiseError, match=r"^scan\.json: \$: extra fields found \(extra\)"):
        Finding.from_dict({**FINDING.to_dict(), "extra": 1}, "scan.json")
    with pytest.raises(SerialiseError, match=r"\$\.line: .*int"):
        Finding.from_dict({**FINDING.to_dict(), "line": "2"}, "scan.json")
    with pytest.raises(SerialiseError, match=r"\$\.route\.status"):
        Finding.from_dict({**FINDING.to_dict(), "route": {"route": "R", "target": "t", "note": "n", "source": "s"}})


def test_a_run_result_matches_the_findings_schema(frozen_result):
    from migrator.reporters.json_report import render

    document = json.loads(render(frozen_result))
    check(document, "findings.schema.json")
    assert document["findings"] == [f.to_dict() for f in frozen_result.findings]


def test_scalars_are_read_as_they_are_a_subclass_as_its_plain_value_an_enum_as_a_member():
    from migrator.ground.serialise import bare_converter
    from migrator.validation.verdict import Verdict

    class Version(str):  # as torch.__version__ is
        pass

    conv = bare_converter()
    version = conv.structure(Version("2.13.0"), str)
    assert type(version) is str and version == "2.13.0"
    assert conv.structure(3, float) == 3.0 and type(conv.structure(3, float)) is float
    assert conv.structure("pass", Verdict) is Verdict.PASS
    for value, kind in (("3", int), (True, int), (1, bool), (True, float), (1.5, int), ("passed", Verdict)):
        with pytest.raises((TypeError, ValueError)):
            conv.structure(value, kind)
