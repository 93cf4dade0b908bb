"""TOML positions come from tomlkit's round trip: every value and key at the characters it is written
with, whatever surrounds it (comments, arrays, inline tables, dotted keys, tables out of order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import api
from migrator.engine.config_reader import ConfigParseError, parse_config
from migrator.engine.toml_positions import key_span, value_spans

TEXT = (
    '# device = "cuda"  (an old setting)\n'
    "[train]\n"
    "device = 'cuda'   # trailing comment\n"
    'backends = ["gloo", "nccl" , "cuda:1"]\n'
    'opts = { device = "cuda", port = 29500 }\n'
    'a.b.NCCL_X = """\n'
    'nccl"""\n'
    "[env]\n"
    'CUDA_VISIBLE_DEVICES = "0"\n'
    '"NCCL_DEBUG" = "INFO"\n'
    "[[runs]]\n"
    'device = "cuda:0"\n'
    "[train.late]\n"
    "device = 'cuda:1'\n"
)


def _texts(parsed, is_key: bool) -> dict[tuple, str]:
    return {e.path: parsed.text[e.scalar.start : e.scalar.end] for e in parsed.entries
            if e.is_key == is_key and e.scalar.start >= 0}


def test_every_value_is_placed_at_its_own_characters():
    values = _texts(parse_config(TEXT, "toml"), is_key=False)
    assert values[(0, "train", "device")] == "'cuda'"
    assert TEXT.index("'cuda'") > TEXT.index("\n")  # not the commented-out line above
    assert values[(0, "train", "backends", 1)] == '"nccl"'
    assert values[(0, "train", "backends", 2)] == '"cuda:1"'
    assert values[(0, "train", "opts", "device")] == '"cuda"'
    assert values[(0, "train", "opts", "port")] == "29500"
    assert values[(0, "train", "a", "b", "NCCL_X")] == '"""\nnccl"""'
    assert values[(0, "runs", 0, "device")] == '"cuda:0"'
    assert values[(0, "train", "late", "device")] == "'cuda:1'"
    first_cuda = TEXT.index("device = 'cuda'") + len("device = ")
    assert parse_config(TEXT, "toml").entries[2].scalar.start == first_cuda


def test_keys_are_placed_too():
    keys = _texts(parse_config(TEXT, "toml"), is_key=True)
    assert keys[(0, "env", "CUDA_VISIBLE_DEVICES")] == "CUDA_VISIBLE_DEVICES"
    assert keys[(0, "env", "NCCL_DEBUG")] == '"NCCL_DEBUG"'
    assert keys[(0, "train", "a", "b", "NCCL_X")] == "NCCL_X"
    assert keys[(0, "train", "a")] == "a"  # a dotted key's first part
    assert keys[(0, "train", "opts", "device")] == "device"
    assert (0, "train") not in keys  # a [table] header is not read back


def test_value_spans_and_key_span_directly():
    text = 'x = [1, {k = "v"}]\ny.z = 2\n'
    spans = value_spans(text, [("x",), ("x", 1, "k"), ("y", "z"), ("missing",)])
    assert {p: text[a:b] for p, (a, b) in spans.items()} == {("x",): '[1, {k = "v"}]', ("x", 1, "k"): '"v"', ("y", "z"): "2"}
    at = text.index("2")
    assert key_span(text, at, "y", 1) == (text.index("y"), text.index("y") + 1)
    assert key_span(text, at, "z", 0) == (text.index("z"), text.index("z") + 1)
    assert key_span(text, at, "y", 0) is None and key_span(text, at, "y", 2) is None


def test_invalid_toml_is_a_parse_error():
    with pytest.raises(ConfigParseError, match="invalid TOML"):
        parse_config("[train\ndevice = 'cuda'\n", "toml")


def test_findings_point_at_the_value_not_a_comment_and_array_items_are_fixed(tmp_path: Path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('# backend = "nccl" was the default\n[dist]\nbackends = ["gloo", "nccl"]\nbackend = "nccl"\n')
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert [f"{f.location()} {f.code}" for f in result.findings] == ["run.toml:3:22 DIST007", "run.toml:4:12 DIST007"]  # the characters inside the quotes
    api.fix([tmp_path], root=tmp_path, use_cache=False)
    assert cfg.read_text() == '# backend = "nccl" was the default\n[dist]\nbackends = ["gloo", "hccl"]\nbackend = "hccl"\n'
