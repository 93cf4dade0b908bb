"""`migrate scan --add-noqa`: one `# noqa: CODES` per line of a finding, merged, idempotent, bytes kept."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from migrator import api
from migrator.cli import main
from migrator.engine.add_noqa import with_codes

HEAD = "import torch\nx = torch.zeros(2)\n"


def _tree(root: Path, files: dict[str, bytes | str]) -> Path:
    (root / "pyproject.toml").write_text("")
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def _findings(root: Path) -> list[tuple[str, int, str]]:
    result = api.scan([root], root=root, use_cache=False)
    return [(f.path, f.line, f.code) for f in result.findings if f.family != "coverage"]


def _add(root: Path):
    return api.add_noqa(api.scan([root], root=root, use_cache=False))


def test_codes_merge_into_an_existing_noqa_and_one_comment_takes_all_codes_of_a_line(tmp_path):
    _tree(tmp_path, {"m.py": HEAD + "y = x.cuda()  # noqa: E501 - long\n"
                             "z = x.cuda(); w = torch.device('cuda')\n"
                             "v = x.cuda(); u = torch.device('cuda')  # noqa: DEV012\n"})
    assert [code for _, _, code in _findings(tmp_path)] == ["DEV010", "DEV010", "DEV012", "DEV010"]
    outcome = _add(tmp_path)
    assert (outcome.comments, outcome.files) == (3, ("m.py",))
    lines = (tmp_path / "m.py").read_text().splitlines()
    assert lines[2] == "y = x.cuda()  # noqa: E501, DEV010 - long"
    assert lines[3] == "z = x.cuda(); w = torch.device('cuda')  # noqa: DEV010, DEV012"
    assert lines[4] == "v = x.cuda(); u = torch.device('cuda')  # noqa: DEV012, DEV010"
    assert _findings(tmp_path) == []


def test_a_second_run_adds_nothing_and_changes_no_byte(tmp_path):
    _tree(tmp_path, {"m.py": HEAD + "y = x.cuda()\n", "requirements.txt": "cupy-cuda12x==12.0\n"})
    first = _add(tmp_path)
    assert (first.comments, first.files) == (2, ("m.py", "requirements.txt"))
    assert (tmp_path / "requirements.txt").read_text() == "cupy-cuda12x==12.0  # noqa: ENV010\n"
    before = {p: (tmp_path / p).read_bytes() for p in ("m.py", "requirements.txt")}
    second = _add(tmp_path)
    assert (second.comments, second.files) == (0, ())
    assert {p: (tmp_path / p).read_bytes() for p in before} == before
    assert _findings(tmp_path) == []


def test_a_crlf_latin1_file_keeps_its_bytes_but_the_comment(tmp_path):
    original = (b"# -*- coding: latin-1 -*-\r\nimport torch\r\nname = '\xe9t\xe9'\r\n"
                b"y = torch.zeros(2).cuda()   \r\nz = 1\r\n")
    _tree(tmp_path, {"m.py": original})
    assert _add(tmp_path).comments == 1
    assert (tmp_path / "m.py").read_bytes() == original.replace(
        b"y = torch.zeros(2).cuda()   \r\n", b"y = torch.zeros(2).cuda()  # noqa: DEV010\r\n")
    assert _findings(tmp_path) == []


def test_a_bom_and_a_last_line_without_newline_are_kept(tmp_path):
    _tree(tmp_path, {"m.py": b"\xef\xbb\xbfimport torch\ny = torch.zeros(2).cuda()"})
    _add(tmp_path)
    assert (tmp_path / "m.py").read_bytes() == b"\xef\xbb\xbfimport torch\ny = torch.zeros(2).cuda()  # noqa: DEV010"


def test_a_finding_inside_a_multi_line_string_gets_its_comment_where_the_string_ends(tmp_path):
    source = (HEAD + 'msg = f"""\n{x.cuda()}\n""", f"""\n{x.cuda()}"""\n'  # two strings: lines 3-6
              "s = x.cuda() + \\\n    1\n"  # a backslash continuation: the comment goes on the next line
              "t = torch.cuda.synchronize(\n    x.cuda())\n")  # inside brackets: its own line is fine
    _tree(tmp_path, {"m.py": source})
    assert [line for _, line, _ in _findings(tmp_path)] == [4, 6, 7, 9, 10]
    assert _add(tmp_path).comments == 4
    lines = (tmp_path / "m.py").read_text().splitlines()
    assert lines[5] == '{x.cuda()}"""  # noqa: DEV010'  # both string findings: one comment, one code
    assert lines[2] == 'msg = f"""' and lines[3] == "{x.cuda()}"  # the strings are untouched
    assert lines[6:8] == ["s = x.cuda() + \\", "    1  # noqa: DEV010"]
    assert lines[8:10] == ["t = torch.cuda.synchronize(  # noqa: DEV001", "    x.cuda())  # noqa: DEV010"]
    assert _findings(tmp_path) == []
    assert _add(tmp_path).comments == 0


def test_a_noqa_where_a_string_ends_hides_only_that_strings_lines(tmp_path):
    body = 'a = """\n{}""".format(x.cuda())\nb = x.cuda()\nc = f"""\n{x.cuda()}\n"""  # noqa: DEV010\n'
    _tree(tmp_path, {"m.py": HEAD + body})  # line 7, inside c's string, is hidden by the noqa of line 8
    assert _findings(tmp_path) == [("m.py", 4, "DEV010"), ("m.py", 5, "DEV010")]


def test_notebooks_and_shell_scripts_are_left_with_a_note(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": ["import torch\n", "y = torch.zeros(2).cuda()\n"]}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    files = {"n.ipynb": json.dumps(notebook), "run.sh": "export CUDA_VISIBLE_DEVICES=0\npython train.py\n"}
    _tree(tmp_path, files)
    before = {p: (tmp_path / p).read_bytes() for p in files}
    outcome = _add(tmp_path)
    assert (outcome.comments, outcome.files) == (0, ())
    assert any("notebooks" in n for n in outcome.notes) and any("shell scripts" in n for n in outcome.notes)
    assert {p: (tmp_path / p).read_bytes() for p in files} == before


def test_with_codes_never_repeats_a_code_and_reads_only_the_comment():
    assert with_codes("y = 1  # noqa: dev010", 7, ["DEV010"]) == "y = 1  # noqa: dev010"
    assert with_codes("s = '# noqa: DEV001'", None, ["DEV010"]) == "s = '# noqa: DEV001'  # noqa: DEV010"
    assert with_codes("y = 1  # noqa", 7, ["DEV010"]) == "y = 1  # noqa  # noqa: DEV010"  # a blanket noqa stays one


def test_the_cli_says_how_many_comments_in_how_many_files(tmp_path):
    _tree(tmp_path, {"a.py": HEAD + "y = x.cuda()\n", "b.py": HEAD + "y = x.cuda()\nz = x.cuda()\n"})
    run = CliRunner().invoke(main, ["scan", str(tmp_path), "--no-cache", "--add-noqa"])
    assert run.exit_code == 0 and "added 3 noqa comment(s) in 2 file(s)" in run.output
    again = CliRunner().invoke(main, ["scan", str(tmp_path), "--no-cache", "--add-noqa"])
    assert "added 0 noqa comment(s) in 0 file(s)" in again.output
    clean = CliRunner().invoke(main, ["scan", str(tmp_path), "--no-cache", "--select", "DEV"])
    assert clean.exit_code == 0, clean.output
