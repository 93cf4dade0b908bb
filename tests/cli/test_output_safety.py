"""Output that is safe for any terminal and any file name: hostile names and fix-record reasons
never reach the terminal as control sequences nor forge finding lines; names that are not UTF-8 are
carried losslessly by JSON/SARIF/reports, which never crash nor leave temp files behind."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from migrator.ground.resources import schema_path
from migrator.ground.safe_text import json_safe, name_from_json, one_line, visible, visible_block
from tests.conftest import REPO

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="needs arbitrary bytes in file names")
BAD_NAME = b"bad\xffname.py"
EVIL_NAME = "evil\x1b]52;c;aGVsbG8=\x07\x1b]0;pwned\x07\x1b[2J\u202e.py"
NEWLINE_NAME = "new\nline.py"
CUDA = b"import torch\nx = torch.zeros(2).cuda()\n"
RAW_CONTROL = [b"\x1b", b"\x07", b"\x9b", "\u202e".encode()]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "MIGRATE_CACHE_DIR": str(cwd / ".cache-test")}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=cwd, env=env, capture_output=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "ok.py").write_bytes(CUDA)
    return tmp_path


def _temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*.tmp")]


@linux_only
@pytest.mark.parametrize(
    "args, out",
    [
        (("scan", ".", "--format", "json"), "out/scan.json"),
        (("scan", ".", "--format", "sarif"), "out/scan.sarif"),
        (("report", "."), "out/report.html"),
        (("report", "."), "out/report.md"),
    ],
)
def test_undecodable_name_never_crashes_nor_leaves_temp_files(tree, args, out):
    (tree / os.fsdecode(BAD_NAME)).write_bytes(CUDA)
    proc = _cli(*args, "-o", out, "--no-cache", cwd=tree)
    assert proc.returncode in (0, 1), proc.stderr.decode(errors="replace")
    text = (tree / out).read_bytes().decode("utf-8")  # valid UTF-8
    assert "bad\\xffname.py" in text.replace("\\\\", "\\") or "bad%FFname.py" in text  # SARIF: a URI
    assert _temp_files(tree) == []


@linux_only
def test_json_carries_the_exact_name_and_matches_the_schema(tree):
    (tree / os.fsdecode(BAD_NAME)).write_bytes(CUDA)
    proc = _cli("scan", ".", "--format", "json", "-o", "scan.json", "--no-cache", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads((tree / "scan.json").read_text(encoding="utf-8"))
    jsonschema.validate(doc, json.loads(schema_path("findings.schema.json").read_text()))
    bad = [f for f in doc["findings"] if f["path"] != "ok.py"]
    assert bad and all(f["path"] == "bad\\xffname.py" for f in bad)
    assert all(base64.b64decode(f["path_bytes"]) == BAD_NAME for f in bad)
    assert all("path_bytes" not in f for f in doc["findings"] if f["path"] == "ok.py")
    assert os.fsencode(name_from_json(bad[0])) == BAD_NAME

    sarif = _cli("scan", ".", "--format", "sarif", "-o", "scan.sarif", "--no-cache", cwd=tree)
    assert sarif.returncode == 1, sarif.stderr
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads((tree / "scan.sarif").read_text())["runs"][0]["results"] for loc in r["locations"]}
    assert uris == {"ok.py", "bad%FFname.py"}  # percent-encoded raw byte: lossless


@linux_only
def test_baseline_with_an_undecodable_name_is_stable(tree):
    (tree / os.fsdecode(BAD_NAME)).write_bytes(CUDA)
    wrote = _cli("scan", ".", "--write-baseline", "base.json", "--no-cache", cwd=tree)
    assert wrote.returncode == 0, wrote.stderr
    again = _cli("scan", ".", "--baseline", "base.json", "--no-cache", cwd=tree)
    assert again.returncode == 0, again.stdout + again.stderr  # every finding known, none "new"
    (tree / "more.py").write_bytes(CUDA)
    new = _cli("scan", ".", "--baseline", "base.json", "--no-cache", cwd=tree)
    assert new.returncode == 1 and b"more.py" in new.stdout


def _hostile_tree(tree: Path) -> Path:
    (tree / EVIL_NAME).write_bytes(CUDA)
    (tree / NEWLINE_NAME).write_bytes(CUDA)
    if sys.platform == "linux":
        (tree / os.fsdecode(BAD_NAME)).write_bytes(CUDA)
    (tree / "ok.py").write_bytes(b"import torch\nx = torch.zeros(2).cuda()  # \x1b[2J\x07 in a comment\n")
    return tree


def _assert_terminal_safe(data: bytes) -> None:
    for raw in RAW_CONTROL:
        assert raw not in data, (raw, data[:2000])
    data.decode("utf-8")  # no stray undecodable bytes either


def test_text_and_github_output_escape_names_and_recorded_reasons(tree):
    _hostile_tree(tree)
    scan = json.loads(_cli("scan", ".", "--format", "json", "--no-cache", cwd=tree).stdout)
    ok = next(f for f in scan["findings"] if f["path"] == "ok.py" and f["code"] == "DEV010")
    forged = "\nforged.py:9:9: DEV001 error: \x1b]52;c;ZXZpbA==\x07 fake finding"
    (tree / ".migrate").mkdir()
    (tree / ".migrate" / "fix-record.json").write_text(json.dumps({
        "schema_version": 1, "target": "npu", "root": str(tree), "files": [],
        "declined": [{"path": "ok.py", "code": "DEV010", "symbol": ok["symbol"], "reason": "because" + forged}],
    }))
    text = _cli("scan", ".", "--no-cache", cwd=tree)
    assert text.returncode == 1, text.stderr
    _assert_terminal_safe(text.stdout)
    lines = text.stdout.decode().splitlines()
    assert not any(line.startswith(("forged.py", "line.py")) for line in lines)
    assert any(line.startswith("new\\nline.py:2:") for line in lines)
    assert any("because\\nforged.py:9:9" in line for line in lines)
    assert any(line.startswith("evil\\x1b]52;c;aGVsbG8=\\x07") for line in lines)

    github = _cli("scan", ".", "--format", "github", "--no-cache", cwd=tree)
    _assert_terminal_safe(github.stdout)
    assert all(line.startswith(b"::") for line in github.stdout.splitlines())


def test_fix_diff_escapes_names_and_control_bytes_in_source(tree):
    _hostile_tree(tree)
    proc = _cli("fix", ".", "--diff", "--no-cache", cwd=tree)
    assert proc.returncode == 1, proc.stderr
    _assert_terminal_safe(proc.stdout)
    _assert_terminal_safe(proc.stderr)
    lines = proc.stdout.decode().splitlines()
    assert "--- a/new\\nline.py" in lines and "+++ b/new\\nline.py" in lines
    assert not any(line.startswith("line.py") for line in lines)
    assert "+x = torch.zeros(2).npu()  # \\x1b[2J\\x07 in a comment" in lines


def test_write_output_leaves_no_temp_file_when_the_text_cannot_be_written(tmp_path):
    from migrator.cli import write_output

    with pytest.raises(UnicodeEncodeError):
        write_output("bad \udcff name", str(tmp_path / "out.json"))
    assert list(tmp_path.iterdir()) == []


def test_sanitiser_forms():
    assert one_line("a\x1b[2Jb\x07c\nd\re\u202ef\x85\x7f\tg") == "a\\x1b[2Jb\\x07c\\nd\\re<U+202E>f\\x85\\x7f\tg"
    assert visible("keep\ttab\nand newline \x1b") == "keep\ttab\nand newline \\x1b"
    assert visible_block("crlf\r\nlone\rcr\n") == "crlf\r\nlone\\rcr\n"
    assert one_line(os.fsdecode(b"x\xff.py")) == "x\\xff.py"
    assert visible("plain text, ünïcode") == "plain text, ünïcode"
    name = os.fsdecode(b"d\xfe/x.py")
    safe = json_safe({"path": name, "other": [name], "root": "fine"})
    assert safe == {"path": "d\\xfe/x.py", "path_bytes": base64.b64encode(b"d\xfe/x.py").decode(),
                    "other": ["d\\xfe/x.py"], "root": "fine"}
    json.dumps(safe, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("out", ["report.html", "report.md"])
def test_reports_show_hostile_names_and_source_as_text(tree, out):
    _hostile_tree(tree)
    proc = _cli("report", ".", "-o", out, "--diffs", "--no-cache", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    _assert_terminal_safe((tree / out).read_bytes())
    assert "evil\\x1b]52;c;aGVsbG8=\\x07" in (tree / out).read_text()
