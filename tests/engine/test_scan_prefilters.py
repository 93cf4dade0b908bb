"""The scan's cheap tests that decide whether costlier work runs must agree with what they stand for: the
prefilter's substring searches with its pattern, the suppression's tokenizing skip with tokenizing, the
op work-arounds' scope walk with `scope_nodes`, and a scan without an op census with the census reader."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from migrator.engine import comment_lines
from migrator.engine.dtype_evidence import _own_nodes, scope_nodes
from migrator.engine.prefilter import PREFILTER, PREFILTER_WORDS, prefiltered
from migrator.engine.source import split_lines
from migrator.engine.suppress import Directives, Suppression, with_continued_lines
from migrator.ground.model import Finding


@pytest.mark.parametrize("data", [b"", b"import os\n", b"x.to(y)", b"x.to (y)", b"Torch", b"import torch",
                                  b"# migrate: ignore", b"HCCL_ALGO=1", b"amp_c", b"NVTE_FLAG", b"nvte_"])
def test_prefiltered_is_the_pattern_search(data):
    assert prefiltered(data) == bool(PREFILTER.search(data))
    assert all(prefiltered(b"..." + word + b"...") for word in PREFILTER_WORDS)


def _finding(line: int) -> Finding:
    return Finding("DEV010", "tensor-cuda-call", "device", "error", "m.py", line, 1, line, 2, "x.cuda()", "msg")


TEXTS = [
    'a = """\n{}""".format(x.cuda())  # noqa: DEV010\n',  # the string ends on the directive's line
    "s = x.cuda() + \\\n    1  # noqa: DEV010\n",  # a backslash continuation
    "s = 'ab\\\ncd' + x.cuda()  # noqa: DEV010\n",  # a single-quoted string continued by a backslash
    "y = x.cuda()  # noqa: DEV010\nz = x.cuda()\n",  # nothing continued: no tokenizing needed
    "# migrate: ignore[DEV010]\nz = x.cuda()\nw = '''\nq'''\n",
    "a = '\u2028'\nb = 1 \\\n  + x.cuda()  # noqa: DEV010\n",  # a line break str.splitlines counts, the tokenizer not
    "a = 1\r\nb = (1 +\r\n  x.cuda())  # noqa: DEV010\r\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokenizing_skip_changes_no_directive(text):
    from migrator.engine.suppress import parse_directives

    directives = parse_directives(split_lines(text))
    findings = [_finding(n) for n in range(1, len(split_lines(text)) + 1)]
    mapped = comment_lines.continued_lines(text)  # what tokenizing every time gives
    by_line: dict[int, list[Suppression]] = {}
    for s in directives.suppressions:
        by_line.setdefault(s.line, []).append(s)
    extra = tuple(replace(s, line=line) for line, target in mapped.items() for s in by_line.get(target, ()))
    assert with_continued_lines(directives, text, findings) == Directives(directives.skip_file,
                                                                          directives.suppressions + extra)


def test_own_nodes_are_scope_nodes_without_contexts_and_operators():
    skipped = (ast.expr_context, ast.operator, ast.cmpop, ast.unaryop, ast.boolop)
    for path in sorted((Path(__file__).resolve().parents[2] / "migrator" / "engine").glob("*.py")):
        tree = ast.parse(path.read_bytes())
        for body in [tree.body] + [f.body for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            expected = [node for node in scope_nodes(body) if not isinstance(node, skipped)]
            assert [id(n) for n in _own_nodes(body)] == [id(n) for n in expected], path.name


def test_census_facts_are_read_where_the_store_writes_them(tmp_path):
    import json

    from migrator.catalogue.coverage import lookup
    from migrator.census import store
    from migrator.census.model import Census
    from migrator.pipeline import options

    assert options._census_facts(tmp_path) == ((), ())  # no census file: the census package is not needed
    documented = lookup("torch.nn.functional.silu", soc="A2")
    raw = Census({"target": ".", "mode": "script", "steps": 1}, "A2", documented.version, "", 0.0, ()).to_json()
    raw["ops"] = [{"level": "api", "op": "torch.nn.functional.silu", "dtypes": ["fp64"], "count": 1,
                   "status": "partial", "verdict": "unsupported", "sites": [{"phase": "forward", "count": 1}]}]
    store.census_path(tmp_path).parent.mkdir()
    store.census_path(tmp_path).write_text(json.dumps(raw))
    apis, _ = options._census_facts(tmp_path)
    assert apis and apis == store.traced_apis(tmp_path)


def test_a_pool_gets_the_largest_files_first(tmp_path):
    from migrator.engine.discover import Candidate
    from migrator.engine.runner import _largest_first

    sizes = [3, 10, 0, 7]
    todo = []
    for i, size in enumerate(sizes):
        (tmp_path / f"m{i}.py").write_bytes(b"x" * size)
        todo.append((Candidate(tmp_path / f"m{i}.py", f"m{i}.py", "python", False), None, None))
    todo.append((Candidate(tmp_path / "gone.py", "gone.py", "python", False), None, None))  # vanished: size 0
    todo.append((Candidate(tmp_path / "fix.py", "fix.py", "python", False), None, b"y" * 8))  # bytes in hand
    assert _largest_first(todo) == [1, 5, 3, 0, 2, 4]


SEARCHED = [b"", b"import os\n", b"x.TORCH", b"Torch torch", b"\xff\xfecuda\x00", b"\xc3\xa9NCCL\xe2\x84\xaa", b"x.to (",
            b"NoQa migrate: MIGRATE", b"cudapex nvte_ NVTE_", b"\xc4\xb0 m\xc4\xb0grate", b"amp_C amp_c ampc"]


@pytest.mark.parametrize("automaton", [True, False], ids=["re2", "substring searches"])
def test_a_word_set_finds_what_substring_searches_find(automaton, monkeypatch):
    from migrator.ground.word_search import WordSet

    words = (*PREFILTER_WORDS, b"noqa", b"migrate")
    exact, folded = WordSet(words), WordSet(words, ignore_case=True)
    if not automaton:
        for word_set in (exact, folded):
            monkeypatch.setattr(word_set, "_built", True)
    for data in SEARCHED + [b" ".join(SEARCHED)] + [b"..." + w + b"..." for w in words]:
        assert exact.found_in(data) == any(w in data for w in words), data
        assert folded.found_in(data) == any(w.lower() in data.lower() for w in words), data
        lines = {data.count(b"\n", 0, at) for w in words for at in range(len(data)) if data.startswith(w, at)}
        assert {data.count(b"\n", 0, at) for at in exact.starts(data)} == lines
        lowered = data.lower()
        lines = {data.count(b"\n", 0, at) for w in words for at in range(len(data)) if lowered.startswith(w.lower(), at)}
        assert {data.count(b"\n", 0, at) for at in folded.starts(data)} == lines


@pytest.mark.parametrize("text", ["x = 1\n", "x = 1  # NOQA: DEV010\n", "# MİGRATE: ignore[DEV010]\nx = 1\n",
                                  "# Migrate: skip-file\n", "y = 2  # noqa\n", "# \u212a noqa: DEV001\n",
                                  "a = 'é'  # migrate: ignore\r\nb = 1\n", "# mİgrate: ignore\n", "# noqa: X1\r"])
@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_file_directives_are_parse_directives(text, bom):
    from migrator.engine.source import decode_python
    from migrator.engine.suppress import file_directives, parse_directives

    data = bom + text.encode()
    source = decode_python(data)
    assert file_directives(source, data) == parse_directives(source.lines, lowered=source.lowered)


@pytest.mark.parametrize("data", [
    b"", b"x = 1\n", b"x = '\xc3\xa9'\n", b"\xff = 1\n", b"\n\n\xff\n", b"# a\n# b\nx = '\xe9'\n",
    b"\xef\xbb\xbfx = 1\n", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", b"\n# coding: latin-1\nx = '\xe9'\n",
    b"x = 1\n\n# coding: latin-1\ny = '\xe9'\n", b"# coding: nonsense\n", b"\xef\xbb\xbf# coding: latin-1\n",
    b"x = 1\r# coding: latin-1\rx = '\xe9'\r", b"# coding=utf-8\nx = '\xc3\xa9'\n", b"s = 'decoding'\n\xff\n",
])
def test_decoding_without_detect_encoding_is_decoding_with_it(data, monkeypatch):
    from migrator.engine import source

    def decoded() -> object:
        try:
            return source.decode_python(data)
        except source.UnreadableSource as exc:
            return str(exc)

    fast = decoded()
    monkeypatch.setattr(source, "_plain", lambda data: False)  # every file through `tokenize.detect_encoding`
    assert fast == decoded()


HEADERS = [
    b"# Copyright (c) 2024, NVIDIA CORPORATION.\n\nx = 1\n",  # the word in the header only: skipped
    b"#!/usr/bin/env python\n# -*- coding: utf-8 -*-\r\n  # NVIDIA\n\f\nimport os\n",
    b"# NVIDIA\nimport torch\n",  # the word after it too
    b"# NVIDIA\nx = 'NVIDIA_VISIBLE_DEVICES'\n",  # ... in a string
    b"# cuda\ns = '''\n# not a comment: NVIDIA_VISIBLE_DEVICES\n'''\n",  # a '#' line inside a string is no header
    b"# NVIDIA\n# migrate: ignore[DEV001]\nx = 1\n",  # a directive in the header counts
    b"# NVIDIA",  # a last line without its line break is not taken as header
    b"\xef\xbb\xbf# NVIDIA\nx = 1\n",  # a BOM: no header taken
    b"x = 1  # NVIDIA\n",  # a comment after code is no header
    b"# NVIDIA\nx = (\n",  # a syntax error is still reported
    b"# NVIDIA\r\rdef f(:\r",
]


def _split_header(data: bytes) -> tuple[bytes, bytes]:
    """The leading comment lines, and the data with each of them emptied (an oracle written out line by line)."""
    lines = data.splitlines(keepends=True)
    header: list[bytes] = []
    for line in lines:
        if not line.endswith((b"\n", b"\r")) or line.lstrip(b" \t\f").rstrip(b"\r\n")[:1] not in (b"", b"#"):
            break
        header.append(line)
    blanked = [line[len(line.rstrip(b"\r\n")):] for line in header]
    return b"".join(header), b"".join(blanked + lines[len(header):])


@pytest.mark.parametrize("data", HEADERS)
def test_code_prefiltered_ignores_words_only_the_leading_comments_hold(data):
    from migrator.engine.prefilter import code_prefiltered

    header, blanked = _split_header(data)
    assert code_prefiltered(data) == (prefiltered(blanked) or (b"migrate:" in header and prefiltered(data)))


def _scans_with_and_without_the_header_skip(data: bytes, rel: str, monkeypatch) -> tuple:
    from migrator.engine import scan_file
    from migrator.engine.file_scan import ScanOptions

    options = ScanOptions()
    with_skip = scan_file.scan_bytes(data, rel, "python", options)
    with monkeypatch.context() as m:
        m.setattr(scan_file, "code_prefiltered", prefiltered)
        without = scan_file.scan_bytes(data, rel, "python", options)
    return with_skip, without


@pytest.mark.parametrize("data", HEADERS)
def test_the_header_skip_changes_no_result(data, monkeypatch):
    with_skip, without = _scans_with_and_without_the_header_skip(data, "m.py", monkeypatch)
    assert with_skip == without


def test_the_header_skip_changes_no_result_on_the_bundled_code(monkeypatch):
    from migrator.engine.prefilter import code_prefiltered

    root = Path(__file__).resolve().parents[2]
    files = sorted([*(root / "samples").rglob("*.py"), *(root / "tests" / "fixtures").rglob("*.py")])
    skipped = 0
    for path in files:
        data = path.read_bytes()
        for variant in (data, b"# Copyright (c) NVIDIA CORPORATION. cuda nccl triton\n#\n" + data):
            skipped += prefiltered(variant) and not code_prefiltered(variant)
            with_skip, without = _scans_with_and_without_the_header_skip(variant, path.name, monkeypatch)
            assert with_skip == without, path
    assert skipped  # the corpus holds files the skip applies to
