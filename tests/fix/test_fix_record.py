"""The fix record as typed data (migrator/ground/fix_record.py): read strictly with errors naming the file and
the field, older versions still read, written back byte for byte; `migrate fix` refuses to merge into
a record it cannot read instead of dropping it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from migrator import api
from migrator.ground.fix_record import FixRecordError, Span, load, parse, to_bytes
from migrator.ground.usage_error import UsageError

TRAIN = "import torch\nx = torch.zeros(2).cuda()\ntorch.cuda.synchronize()\n"
HASH = "0" * 64


@pytest.fixture
def fixed(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "train.py").write_text(TRAIN)
    api.fix([tmp_path], use_cache=False)
    return tmp_path


def record_path(root: Path) -> Path:
    return root / ".migrate" / "fix-record.json"


def test_a_record_fix_wrote_reads_and_writes_back_byte_for_byte(fixed):
    data = record_path(fixed).read_bytes()
    record = load(record_path(fixed))
    assert record.files and record.files[0].edits and record.target == "npu"
    assert to_bytes(record) == data


@pytest.mark.parametrize(("change", "field", "problem"), [
    (lambda r: r["files"][0]["edits"][0].update(extra=1), "$.files[0].edits[0]", "extra fields found (extra)"),
    (lambda r: r["files"][0]["edits"][0]["new"].update(line="3"), "$.files[0].edits[0].new.line", "integer"),
    (lambda r: r["declined"].append({"path": "a.py", "code": "X", "symbol": "s"}), "$.declined[0]", "'reason'"),
    (lambda r: r["tool"].update(version=7), "$.tool.version", "str"),
])
def test_a_broken_record_names_the_file_and_the_field(fixed, change, field, problem):
    data = json.loads(record_path(fixed).read_text())
    data.setdefault("declined", [])
    change(data)
    with pytest.raises(FixRecordError) as err:
        parse(data, "the-record.json")
    assert str(err.value).startswith("the-record.json: ")
    assert field in str(err.value) and problem in str(err.value)


def test_unknown_keys_are_ignored_only_when_asked(fixed):
    data = json.loads(record_path(fixed).read_text())
    data["files"][0]["future_key"] = "x"
    with pytest.raises(FixRecordError, match="future_key"):
        parse(data, "r.json")
    assert parse(data, "r.json", extra_keys="ignore").files[0].path == "train.py"


def test_a_record_of_an_older_version_reads():
    old = {"schema_version": 1, "root": "/somewhere", "target": "npu",
           "files": [{"path": "a.py", "edits": [{"code": "DEV010", "new": {"line": 2, "end_line": 2, "text": "x = y.npu()"}}]}]}
    record = parse(old, "old.json")
    assert record.root == "/somewhere"
    assert record.files[0].edits[0].new == Span(line=2, end_line=2, text="x = y.npu()")
    assert record.files[0].sha256 is None and record.declined == ()


def test_fix_refuses_a_record_it_cannot_merge_and_writes_nothing(fixed):
    (fixed / "train.py").write_text(TRAIN)  # back to CUDA: a run would change it again
    broken = json.loads(record_path(fixed).read_text())
    broken["files"][0]["edits"][0]["code"] = 17
    record_path(fixed).write_text(json.dumps(broken))
    before = record_path(fixed).read_bytes()
    with pytest.raises(UsageError) as err:
        api.fix([fixed], use_cache=False)
    assert "fix-record.json" in str(err.value) and "$.files[0].edits[0].code" in str(err.value)
    assert (fixed / "train.py").read_text() == TRAIN and record_path(fixed).read_bytes() == before


def test_cli_fix_on_a_broken_record_exits_2_naming_it(fixed):
    from tests.conftest import run_cli

    record_path(fixed).write_text('{"schema_version": 1, "files": [{"path": "a.py"}]}')
    proc = run_cli("fix", str(fixed), "--no-cache")
    assert proc.returncode == 2 and "fix-record.json" in proc.stderr and "'edits'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_scan_leaves_findings_as_the_catalogue_says_when_the_record_is_broken(fixed):
    (fixed / "train.py").write_text(TRAIN)
    record_path(fixed).write_text(json.dumps({"schema_version": 1, "files": [], "declined": [
        {"path": "train.py", "code": "DEV010", "symbol": ".cuda()", "reason": "r", "line": 2}]}))
    result = api.scan([fixed], use_cache=False)
    assert all("not fixed automatically" not in f.message for f in result.findings)
    assert any(f.fix is not None for f in result.findings)
