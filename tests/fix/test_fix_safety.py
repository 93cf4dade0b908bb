"""Nothing the user had is lost: untouched files stay byte-identical, encodings and endings kept,
writes are atomic, a fix that would break a file is refused, and fix twice == fix once."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from migrator import api
from migrator.fix import python_fixer

NOQA = 'import torch_npu  # noqa: F401  registers the Ascend "npu" device'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n")
    (tmp_path / "train.py").write_text("import torch\ntorch.cuda.synchronize()\nx = y.cuda()\n")
    (tmp_path / "clean.py").write_text("import torch\nx = torch.zeros(2)\n")
    (tmp_path / "manual.py").write_text("import torch\nm = torch.nn.DataParallel(m)\n")
    return tmp_path


def test_untouched_files_are_not_rewritten(repo):
    clean, manual = repo / "clean.py", repo / "manual.py"
    os.utime(clean, (1_000_000, 1_000_000))
    os.utime(manual, (1_000_000, 1_000_000))
    before = (clean.read_bytes(), manual.read_bytes())
    outcome = api.fix([repo], use_cache=False)
    assert outcome.changed_files == ["train.py"]
    assert (clean.read_bytes(), manual.read_bytes()) == before
    assert clean.stat().st_mtime == 1_000_000 and manual.stat().st_mtime == 1_000_000


def test_fix_twice_is_fix_once(repo):
    api.fix([repo], use_cache=False)
    first = {p.name: p.read_bytes() for p in repo.glob("*.py")}
    outcome = api.fix([repo], use_cache=False)
    assert outcome.changed_files == []
    assert {p.name: p.read_bytes() for p in repo.glob("*.py")} == first


def test_crlf_bom_latin1_and_mode_are_kept(repo):
    crlf = repo / "crlf.py"
    crlf.write_bytes(b"\xef\xbb\xbfimport torch\r\nx = y.cuda()\r\n")
    latin = repo / "latin.py"
    latin.write_bytes('# -*- coding: latin-1 -*-\nimport torch\ns = "café"\nx = y.cuda()\n'.encode("latin-1"))
    crlf_import = repo / "crlf_import.py"
    crlf_import.write_bytes(b"import torch\r\ntorch.cuda.synchronize()\r\n")
    script = repo / "run.sh"
    script.write_text("#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=0\n")
    script.chmod(0o755)
    api.fix([repo], use_cache=False)
    noqa = NOQA.encode()
    # `.npu()` exists once torch_npu is imported: every file using it imports it (lint-proof)
    assert crlf.read_bytes() == b"\xef\xbb\xbfimport torch\r\n" + noqa + b"\r\nx = y.npu()\r\n"
    assert latin.read_bytes() == f'# -*- coding: latin-1 -*-\nimport torch\n{noqa.decode()}\ns = "café"\nx = y.npu()\n'.encode(
        "latin-1"
    )
    assert crlf_import.read_bytes() == b"import torch\r\n" + noqa + b"\r\ntorch.npu.synchronize()\r\n"
    assert script.read_text() == "#!/bin/sh\nexport ASCEND_RT_VISIBLE_DEVICES=0\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o755


def test_a_fix_that_breaks_the_file_is_refused(repo, monkeypatch):
    original = (repo / "train.py").read_bytes()

    def broken(text, *args, **kwargs):
        return python_fixer.PythonFixResult("def broken(:\n", [], [])

    monkeypatch.setattr(python_fixer, "fix_python", broken)
    outcome = api.fix([repo], use_cache=False)
    assert outcome.errors and "would not parse" in outcome.errors[0][1]
    assert (repo / "train.py").read_bytes() == original


def test_diff_and_check_write_nothing(repo):
    before = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}
    outcome = api.fix([repo], write=False, use_cache=False)
    assert outcome.changed_files == ["train.py"]
    assert "+import torch_npu" in outcome.plan.changes[-1].diff() or any("+import torch_npu" in c.diff() for c in outcome.plan.changes)
    assert {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()} == before
    assert not (repo / ".migrate").exists()


def test_out_dir_copies_the_tree_and_leaves_the_original(repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "migrated"
    before = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}
    outcome = api.fix([repo], out_dir=out, use_cache=False)
    assert {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()} == before
    assert (out / "clean.py").read_bytes() == before["clean.py"]
    assert "torch.npu.synchronize()" in (out / "train.py").read_text()
    record = json.loads((out / ".migrate" / "fix-record.json").read_text())
    assert record["target"] == "npu" and record["files"][0]["path"] == "train.py"
    codes = [e["code"] for e in record["files"][0]["edits"]]
    assert codes == ["DEV001", "DEV010"]
    assert all(e["fix_kind"] == "exact" for e in record["files"][0]["edits"])
    assert outcome.remaining.findings and all(f.path != "train.py" or f.fix is None for f in outcome.remaining.findings)


def test_out_dir_must_be_new_or_empty(repo, tmp_path_factory):
    out = tmp_path_factory.mktemp("busy")
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        api.fix([repo], out_dir=out, use_cache=False)
    assert (out / "keep.txt").read_text() == "mine"


def test_exact_only_leaves_numerics_fixes(repo):
    (repo / "attn.py").write_text("from flash_attn import flash_attn_func\nx = y.cuda()\no = flash_attn_func(q, k, v)\n")
    outcome = api.fix([repo / "attn.py"], root=repo, exact_only=True, use_cache=False)
    text = (repo / "attn.py").read_text()
    assert "y.npu()" in text and "flash_attn_func(q, k, v)" in text
    assert [f.code for f in outcome.remaining.findings if f.fix] == ["ATTN001", "ATTN001"]


def test_annotations_are_added_once_and_stripped(repo):
    api.fix([repo], annotate=True, use_cache=False)
    text = (repo / "manual.py").read_text()
    assert text.count("# MIGRATE(DIST005):") == 1
    api.fix([repo], annotate=True, use_cache=False)
    assert (repo / "manual.py").read_text() == text
    api.fix([repo], strip_annotations=True, use_cache=False)
    assert "MIGRATE(" not in (repo / "manual.py").read_text()


def test_fix_record_is_written_at_the_root(repo):
    outcome = api.fix([repo], use_cache=False)
    record = json.loads((repo / ".migrate" / "fix-record.json").read_text())
    assert outcome.record == repo / ".migrate" / "fix-record.json"
    edit = record["files"][0]["edits"][0]
    assert set(edit) >= {"code", "fix_kind", "title", "original", "new"}


def test_entry_point_gets_torch_npu_import(repo):
    (repo / "main.py").write_text("import torch\n\nif __name__ == '__main__':\n    model.cuda()\n")
    api.fix([repo], use_cache=False)
    assert (repo / "main.py").read_text().count("import torch_npu") == 1


def test_user_alias_is_kept(repo):
    (repo / "alias.py").write_text("import torch as t\nt.cuda.synchronize()\n")
    api.fix([repo], use_cache=False)
    assert (repo / "alias.py").read_text() == f"import torch as t\n{NOQA}\nt.npu.synchronize()\n"


def test_cli_diff_and_check_exit_codes(repo):
    from tests.conftest import run_cli

    diff = run_cli("fix", str(repo), "--diff", "--no-cache")
    assert diff.returncode == 1 and "+import torch_npu" in diff.stdout and "would change 1 file" in diff.stderr
    assert "torch.cuda.synchronize()" in (repo / "train.py").read_text()  # --diff wrote nothing
    assert run_cli("fix", str(repo), "--check", "--no-cache").returncode == 1
    applied = run_cli("fix", str(repo), "--no-cache")
    assert applied.returncode == 1 and "DIST005" in applied.stdout  # DataParallel remains: manual, an error
    assert run_cli("fix", str(repo), "--check", "--no-cache").returncode == 0  # already fixed
    assert run_cli("fix", str(repo / "nope"), "--check").returncode == 2


def test_requirements_gain_the_paired_torch_npu_pin(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch==2.13.0"]\n')
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\r\nnumpy\r\n")
    outcome = api.fix([tmp_path], use_cache=False)
    assert (tmp_path / "requirements.txt").read_bytes() == b"torch==2.13.0\r\ntorch-npu==2.13.0\r\nnumpy\r\n"
    assert "torch-npu" not in (tmp_path / "pyproject.toml").read_text()  # TOML arrays are not edited
    remaining = {(f.path, f.code, f.fix is None) for f in outcome.remaining.findings}
    assert ("pyproject.toml", "OPS008", True) in remaining
    assert not any(p == "requirements.txt" for p, _, _ in remaining)
    assert api.fix([tmp_path], write=False, use_cache=False).changed_files == []


def test_fixing_some_files_keeps_the_record_of_the_others(repo):
    import json

    (repo / "other.py").write_text("import torch\nm = torch.nn.DataParallel(m)\nx = y.cuda()\n")
    api.fix([repo], use_cache=False)
    first = json.loads((repo / ".migrate" / "fix-record.json").read_text())
    assert {f["path"] for f in first["files"]} == {"train.py", "other.py"}
    (repo / "train.py").write_text("import torch\nz = w.cuda()\n")
    api.fix([repo / "train.py"], root=repo, use_cache=False)  # the pre-commit case: one file
    second = json.loads((repo / ".migrate" / "fix-record.json").read_text())
    assert {f["path"] for f in second["files"]} == {"train.py", "other.py"}
    assert [e["symbol"] for f in second["files"] if f["path"] == "train.py" for e in f["edits"]] == [".cuda()"]


def test_no_record(repo):
    outcome = api.fix([repo], record=False, use_cache=False)
    assert outcome.record is None and not (repo / ".migrate").exists()
    assert "x = y.npu()" in (repo / "train.py").read_text()
