"""The data-file schemas are valid JSON Schema; `schema_check` refuses broken documents and names the place."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from migrator.ground.resources import schema_path
from migrator.ground.schema_check import SchemaMismatch, check
from tests.report.test_golden import FIX_RECORD, VALIDATION

BASELINE = {"schema_version": 1, "findings": [{"code": "DEV010", "path": "a.py", "fingerprint": "0123456789abcdef", "occurrence": 0, "line": 3}]}
VALID = {"validation.schema.json": VALIDATION, "fix-record.schema.json": FIX_RECORD, "baseline.schema.json": BASELINE}


def _mutations(doc: dict):
    """Broken variants: (description, document)."""
    d = copy.deepcopy(doc)
    d.pop("schema_version")
    yield "no schema_version", d
    d = copy.deepcopy(doc)
    d["schema_version"] = "1"
    yield "schema_version as text", d
    if "stages" in doc:
        for key, value in (("status", "passed"), ("id", "S4"), ("worst", None), ("name", "")):
            d = copy.deepcopy(doc)
            d["stages"][1][key] = value
            yield f"stage {key}={value!r}", d
        d = copy.deepcopy(doc)
        d["stages"][1]["worst"][0]["value"] = "0.1"
        yield "metric value as text", d
        d = copy.deepcopy(doc)
        del d["stages"][1]["worst"][0]["tensor"]
        yield "metric without tensor", d
        d = copy.deepcopy(doc)
        d["stages"][1]["worst"][0]["value"] = True
        yield "metric value boolean", d
    if "files" in doc:
        d = copy.deepcopy(doc)
        d["files"][0]["edits"][0]["fix_kind"] = "manual"
        yield "fix_kind manual", d
        d = copy.deepcopy(doc)
        d["files"][0]["edits"][0]["new"]["line"] = 0
        yield "line 0", d
        d = copy.deepcopy(doc)
        d["target"] = "gpu"
        yield "target gpu", d
    if "findings" in doc:
        d = copy.deepcopy(doc)
        d["findings"][0]["fingerprint"] = "XYZ"
        yield "bad fingerprint", d
        d = copy.deepcopy(doc)
        d["findings"][0]["occurrence"] = -1
        yield "negative occurrence", d


@pytest.mark.parametrize("name", sorted(VALID))
def test_schema_and_checker_agree(name):
    schema = json.loads(schema_path(name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(VALID[name])
    check(VALID[name], name)
    for what, doc in _mutations(VALID[name]):
        assert not validator.is_valid(doc), what
        with pytest.raises(SchemaMismatch):
            check(doc, name)


def test_error_messages_name_the_place():
    doc = copy.deepcopy(VALIDATION)
    doc["stages"][2]["worst"][0]["value"] = "big"
    with pytest.raises(SchemaMismatch, match=r"\$\.stages\[2\]\.worst\[0\]\.value: 'big' is not of type 'number'"):
        check(doc, "validation.schema.json")
    with pytest.raises(SchemaMismatch, match=r"\$\.stages\[0\]\.status: 'ok' is not one of \['pass', 'warn'"):
        check({"schema_version": 1, "stages": [{"id": "S0", "name": "n", "status": "ok", "worst": []}]}, "validation.schema.json")


def test_findings_schema_accepts_baselined_summary(frozen_result):
    from migrator.reporters.baseline import with_findings

    schema = json.loads(schema_path("findings.schema.json").read_text())
    data = {"schema_version": 1, **with_findings(frozen_result, [], baselined=3).to_dict()}
    jsonschema.validate(data, schema)
    assert data["summary"]["baselined"] == 3
