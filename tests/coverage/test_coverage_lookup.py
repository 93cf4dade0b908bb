"""migrator.catalogue.coverage API: lookups, normalisation, errors, explain/format_text, loading."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

import migrator.catalogue.coverage as coverage
from migrator.catalogue.coverage import CoverageEntry, CoverageError, _table, lookup


@pytest.fixture
def fresh_cache():
    _table._reset_cache()
    yield
    _table._reset_cache()


def test_versions_and_socs():
    assert coverage.available_versions() == ("2.14.0",)
    assert coverage.default_version() == "2.14.0"
    assert coverage.socs() == ("A2", "A3", "950DT")


def test_entry_is_frozen_dataclass():
    e = lookup("torch.matmul")
    assert isinstance(e, CoverageEntry)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.status = "supported"  # type: ignore[misc]
    d = e.to_dict()
    assert d["dtypes"] == ["fp16", "fp32"] and json.dumps(d)
    assert e.source.startswith("torch 2.13.0 native_functions.yaml; Ascend/pytorch docs pytorch_2-13-0/torch.md @9e73e70")


@pytest.mark.parametrize(
    "query, name",
    [
        ("Tensor.add_", "torch.Tensor.add_"),
        ("torch.\\_\\_config\\_\\_.show", "torch.__config__.show"),
        ("  torch.matmul() ", "torch.matmul"),
        ("torch_npu.npu.synchronize", "torch.npu.synchronize"),
        ("torch.nn.modules.linear.Linear", "torch.nn.Linear"),
        ("torch.ops.npu.npu_rms_norm", "torch_npu.npu_rms_norm"),
    ],
)
def test_name_normalisation(query, name):
    e = lookup(query)
    assert e.name == name and e.known


def test_soc_selection_and_case():
    assert lookup("torch.matmul", soc="950dt").soc == "950DT"
    assert lookup("torch.matmul", soc="a3").status == "partial"


def test_unknown_soc_version_dtype_raise_with_choices():
    with pytest.raises(CoverageError, match=r"valid: A2, A3, 950DT"):
        lookup("torch.matmul", soc="910B")
    with pytest.raises(CoverageError, match=r"valid: 2\.14\.0"):
        lookup("torch.matmul", version="2.1.0")
    with pytest.raises(CoverageError, match="unknown dtype"):
        lookup("torch.matmul", dtype="float7")
    with pytest.raises(CoverageError):
        list(coverage.iter_entries(soc="H100"))
    with pytest.raises(CoverageError, match="valid: supported"):
        list(coverage.iter_entries(status="broken"))
    assert issubclass(CoverageError, ValueError)


def test_dtype_argument():
    assert lookup("torch.matmul", dtype="torch.float16").status == "partial"
    fp64 = lookup("torch.matmul", dtype="double")
    assert fp64.status == "unsupported" and fp64.dtype == "fp64" and "fp64" in fp64.note
    # no documented list -> unchanged
    assert lookup("torch.cuda.synchronize", dtype="float64").status == "supported"


def test_float64_supported():
    assert coverage.float64_supported("torch.matmul") is False
    assert coverage.float64_supported("torch.nn.functional.dropout") is True
    assert coverage.float64_supported("torch.cuda.synchronize") is None
    assert coverage.float64_supported("torch.cuda.DoubleTensor") is False


def test_unlisted_names():
    mode = lookup("torch.ops.aten.mode")
    assert not mode.known and mode.status == "cpu_fallback" and mode.kernel == "cpu_fallback"
    assert lookup("aten::matmul").kernel == "npu_kernel"
    nvtx = lookup("torch.cuda.nvtx.range_push")
    assert nvtx.status == "unsupported" and not nvtx.known
    member = lookup("torch.cuda.Event.record")
    assert member.npu_name == "torch.npu.Event.record" and member.status == "unverified"
    other = lookup("torch.definitely_not_an_api")
    assert other.status == "unverified" and other.kernel == "unknown" and not other.known
    assert lookup("torch.Tensor.digamma").status == "cpu_fallback"  # listed from native_functions.yaml
    assert lookup("torch.Tensor.mode").status == "unsupported"  # docs: cross on A2 (docs win)


def test_iter_entries_filters():
    unsupported = list(coverage.iter_entries("A2", status="unsupported"))
    assert unsupported and all(e.status == "unsupported" for e in unsupported)
    names = [e.name for e in unsupported]
    assert names == sorted(names) and "torch.nn.DataParallel" in names
    both = list(coverage.iter_entries("A2", status=["cpu_fallback", "unsupported"]))
    assert len(both) > len(unsupported)
    header = coverage.table_header()
    total = sum(header["counts"]["status_by_soc"]["A2"].values())
    assert len(list(coverage.iter_entries("A2"))) == total


def test_torch_pairing():
    f = coverage.torch_npu_release_for_torch
    assert f("2.14.0") == "2.14.0"
    assert f("2.13.0+cpu") == "2.13.0"
    assert f("2.12.0") == "2.12.0.post3"
    assert f("2.11.0") == "2.11.0.post3"
    assert f("2.7.1") == "2.7.1.post11"
    assert f("2.9") == "2.9.1"
    assert f("1.13.1") is None and f("garbage") is None


def test_explain_and_format_text():
    records = coverage.explain(["torch.matmul", "F.gelu", "torch.cuda.synchronize"], soc="A2")
    assert [r["query"] for r in records] == ["torch.matmul", "F.gelu", "torch.cuda.synchronize"]
    assert records[0]["status"] == "partial" and records[0]["bf16_undocumented"] is True
    assert records[1]["known"] is True and records[1]["name"] == "torch.nn.functional.gelu"  # F. is expanded
    assert records[1]["partial_because"]  # and a partial op says which limit
    json.dumps(records)
    text = coverage.format_text(records)
    assert "torch.matmul: partial on A2 (torch-npu 2.14.0)" in text
    assert "bf16 undocumented" in text and "NPU name   torch.npu.synchronize" in text
    assert "source" in text
    assert coverage.format_text([lookup("torch.matmul")]).splitlines()[0] == records[0]["name"] + ": partial on A2 (torch-npu 2.14.0)"
    assert coverage.format_text([]) == ""


def test_data_path_resolves_repo_checkout(cov):
    path = coverage.data_path("op_coverage", "torch_npu-2.14.0.json")
    assert path.is_file() and path.read_bytes() == cov.TABLE.read_bytes()
    with pytest.raises(FileNotFoundError, match="not found"):
        coverage.data_path("op_coverage", "nope.json")


def test_missing_table_is_a_coverage_error(fresh_cache, monkeypatch, tmp_path):
    def missing(*parts):
        raise FileNotFoundError("ascend-migrate data op_coverage not found (looked in: x)")

    monkeypatch.setattr(_table, "data_path", missing)
    with pytest.raises(CoverageError, match="no coverage tables installed"):
        lookup("torch.matmul")
    empty = tmp_path / "op_coverage"
    empty.mkdir()
    monkeypatch.setattr(_table, "data_path", lambda *parts: empty)
    _table._reset_cache()
    with pytest.raises(CoverageError, match="no torch_npu-"):
        coverage.available_versions()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "is corrupt"),
        (b"[]", "has format"),
        (b'{"format": 99}', "has format 99"),
        (b'{"format": 1, "entries": {}}', "lacks aten, socs, sources"),
    ],
)
def test_corrupt_table_is_a_coverage_error(fresh_cache, monkeypatch, tmp_path, content, message):
    folder = tmp_path / "op_coverage"
    folder.mkdir()
    (folder / "torch_npu-2.14.0.json").write_bytes(content)
    monkeypatch.setattr(_table, "data_path", lambda *parts: folder)
    with pytest.raises(CoverageError, match=message):
        lookup("torch.matmul")


def test_import_is_light(cov):
    """A lookup imports neither torch, libcst nor torch_npu (how long it takes: bench/coverage_lookup_bench.py)."""
    code = (
        "import sys\n"
        "import migrator.catalogue.coverage as c\n"
        "e = c.lookup('torch.matmul')\n"
        "print('torch' in sys.modules, 'libcst' in sys.modules, 'torch_npu' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=cov.REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_table_read_once_per_process(fresh_cache):
    lookup("torch.matmul")
    for _ in range(100):
        lookup("torch.nn.functional.gelu")
    info = _table._load_cached.cache_info()
    assert info.misses == 1 and info.hits >= 1  # one read, then the cached table


def test_data_path_prefers_packaged_data(monkeypatch, tmp_path):
    from migrator.catalogue.coverage import _resources

    packaged = tmp_path / "migrator"
    (packaged / "_data" / "op_coverage").mkdir(parents=True)
    (packaged / "_data" / "op_coverage" / "torch_npu-9.9.9.json").write_text("{}")
    monkeypatch.setattr(_resources, "_package_folder", lambda: packaged)
    assert _resources.data_path("op_coverage", "torch_npu-9.9.9.json") == packaged / "_data" / "op_coverage" / "torch_npu-9.9.9.json"
    # not packaged -> the repository checkout
    assert _resources.data_path("op_coverage", "torch_npu-2.14.0.json") == _resources.repo_root() / "op_coverage" / "torch_npu-2.14.0.json"


def test_package_folder_is_what_importlib_resources_gives():
    """Found without importing importlib.resources (a short scan's start-up), the same folder as it gives."""
    import importlib.resources

    from migrator.catalogue.coverage import _resources

    assert _resources._package_folder() == importlib.resources.files("migrator")
