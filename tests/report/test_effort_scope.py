"""Effort per library per repository, split into production, tests and optional extensions."""

from __future__ import annotations

from pathlib import Path

from migrator import api
from migrator.reporters import effort


def _tree(tmp_path: Path, files: dict[str, str]) -> list:
    (tmp_path / "pyproject.toml").write_text("")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(api.scan([tmp_path], root=tmp_path, use_cache=False).findings)


KERNEL = "import triton\n\n\ndef launch():\n    return triton\n"


def test_a_library_imported_in_many_files_is_one_action_with_its_files(tmp_path):
    findings = _tree(tmp_path, {"pkg/a.py": KERNEL, "pkg/b.py": KERNEL, "pkg/c.py": KERNEL, "tests/test_a.py": KERNEL})
    imports = effort.to_json(findings)["imports"]
    triton = [row for row in imports if row["library"] == "triton"]
    assert len(triton) == 1
    assert triton[0]["files"] == ["pkg/a.py", "pkg/b.py", "pkg/c.py", "tests/test_a.py"]
    assert triton[0]["scope"] == "production"
    assert effort.total(findings) == triton[0]["minutes"] + sum(
        a.minutes for a in effort.actions(findings) if not (a.unit == "import" and a.code == triton[0]["code"]))


def test_actions_are_split_into_production_tests_and_extensions(tmp_path):
    cuda = "import torch\n\n\ndef sync():\n    torch.cuda.synchronize()\n    return torch.cuda.get_device_properties(0)\n"
    findings = _tree(tmp_path, {"tests/test_k.py": KERNEL, "examples/demo/run.py": cuda, "train.py": cuda})
    scopes = effort.by_scope(findings)
    assert scopes["tests"]["files"] == ["tests/test_k.py"] and scopes["tests"]["actions"] == 1
    assert scopes["extensions"]["files"] == ["examples/demo/run.py"]
    assert scopes["production"]["files"] == ["train.py"]
    assert sum(r["minutes"] for r in scopes.values()) == effort.total(findings) - effort.optional_minutes(findings)
    assert effort.scope_line(findings).split(" · ")[0].startswith("production")  # by role, production first
    assert "test 4 h (1)" in effort.scope_line(findings) and "example " in effort.scope_line(findings)


def test_scope_reads_the_path():
    assert [effort.scope(p) for p in ("src/m.py", "tests/x.py", "pkg/test_m.py", "m_test.py", "conftest.py",
                                      "examples/a/b.py", "contrib/x.py")] == [
        "production", "tests", "tests", "tests", "tests", "extensions", "extensions"]
