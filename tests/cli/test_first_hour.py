"""What a first-time user runs into: ruff-style conveniences and messages that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator.cli import main
from migrator.plan.configs import from_dict
from migrator.plan.model import ModelError
from migrator.plan.model_checks import check_numbers


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text("import torch\n\nx = torch.zeros(2).cuda()\ny = torch.zeros(2).cuda()\n"
                                       "torch.cuda.synchronize()\n")
    return tmp_path


def test_statistics_counts_each_code_most_frequent_first(tree):
    result = _run("scan", str(tree), "--root", str(tree), "--no-cache", "--statistics")
    assert result.exit_code == 1
    *table, total = result.stdout.splitlines()
    lines = [line.split("\t") for line in table]
    assert lines[0][:2] == ["2", "DEV010"] and lines[0][2].startswith("[*]")
    assert [row[1] for row in lines] == ["DEV010", "DEV001"]
    assert lines[1][2].startswith("[*]")
    assert total == "Found 3 findings (3 fixable with `migrate fix`)."


def test_show_source_prints_the_line_and_a_caret_under_each_finding(tree):
    result = _run("scan", str(tree), "--root", str(tree), "--no-cache", "--show-source", "-q")
    out = result.stdout.splitlines()
    at = next(i for i, line in enumerate(out) if line.startswith("train.py:3:"))
    assert out[at + 1] == "    3 | x = torch.zeros(2).cuda()"
    assert out[at + 2].strip().startswith("|") and out[at + 2].count("^") >= 4


@pytest.mark.parametrize("content", [{}, {"README.md": "# notes\n"}])
def test_nothing_to_scan_is_a_warning_and_exit_2(tmp_path, content):
    for name, text in content.items():
        (tmp_path / name).write_text(text)
    result = _run("scan", str(tmp_path), "--root", str(tmp_path), "--no-cache")
    assert result.exit_code == 2
    assert "no files to scan" in result.stderr


def test_an_explicit_text_file_is_not_parsed_as_python(tmp_path):
    (tmp_path / "notes.txt").write_text("this is not ( python\n")
    result = _run("scan", str(tmp_path / "notes.txt"), "--root", str(tmp_path), "--no-cache")
    assert result.exit_code == 2
    assert "notes.txt: skipped: not a file migrate reads" in result.stderr and "parse" not in result.stdout


def test_an_extensionless_script_named_explicitly_is_still_python(tmp_path):
    (tmp_path / "train").write_text("#!/usr/bin/env python\nimport torch\nx = torch.zeros(1).cuda()\n")
    result = _run("scan", str(tmp_path / "train"), "--root", str(tmp_path), "--no-cache", "-q")
    assert "train:3:" in result.stdout


def test_validate_on_a_file_points_at_script(tree):
    result = _run("validate", str(tree / "train.py"))
    assert result.exit_code == 2
    assert f"migrate validate {tree} --script train.py" in result.stderr


def test_plan_without_a_protocol_does_not_suggest_script(tree):
    result = _run("plan", str(tree), "--cluster", "a2-8x")
    assert result.exit_code == 2
    assert "--model CONFIG.json" in result.stderr and "--script" not in result.stderr


@pytest.mark.parametrize("values, said", [
    ({"heads": 0}, "sizes must be positive: heads = 0 (`num_attention_heads`)"),  # given, so not "missing heads"
    ({"hidden": -64}, "hidden = -64 (`hidden_size`)"),
    ({"heads": 30, "kv_heads": 7, "hidden": 3840}, "30 attention heads are not a multiple of 7 KV heads"),
])
def test_plan_model_numbers_are_checked_with_the_key_named(values, said):
    keys = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads", "vocab": "vocab_size"}
    doc = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10}
    doc.update({keys[k]: v for k, v in values.items()})
    with pytest.raises(ModelError) as caught:
        from_dict(doc, "m", "config.json")
    assert str(caught.value).startswith("config.json: ") and said in str(caught.value)


def test_a_sound_model_passes_the_number_check():
    check_numbers({"layers": 2, "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 10, "experts": 0}, "ok")


def test_ops_output_file_holds_the_json(tmp_path):
    out = tmp_path / "ops.json"
    result = _run("ops", "torch.nn.Identity", "-o", str(out))
    assert result.exit_code == 0 and "torch.nn.Identity" in result.stdout
    assert json.loads(out.read_text())[0]["name"] == "torch.nn.Identity"


def test_plan_prints_toy_model_sizes_readably_and_says_they_are_toys():
    from migrator.plan.render import parameters, toy_note

    assert [parameters(n) for n in (77_760, 124_000_000, 7_240_000_000)] == [
        "77,760 parameters", "124M parameters", "7.24B parameters"]
    assert "toy model" in toy_note(77_760) and toy_note(7_240_000_000) == ""
