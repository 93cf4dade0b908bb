"""Every syntax Python allows goes through `migrate fix`: a site whose rewrite its context cannot
hold is declined with a reason, never an internal error or a file that does not parse."""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

import libcst as cst
import pytest

from migrator import api
from migrator.catalogue.loader import load_catalogue
from migrator.fix import python_fixer, syntax
from tests.engine.helpers import scan_text
from tests.fix.programs import HEADER, SHAPES_312, check_fix_properties, shapes_for

NOQA = 'import torch_npu  # noqa: F401  registers the Ascend "npu" device'


def _fix(tmp_path: Path, text: str, target: str = "npu", name: str = "m.py"):
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    outcome = api.fix([tmp_path], root=tmp_path, target=target, use_cache=False)
    change = next(c for c in outcome.plan.changes if c.path == name)
    return path.read_text(encoding="utf-8"), change


def _declined(change) -> dict[str, str]:
    return {f"{f.line}:{f.column} {f.code}": reason for f, reason in change.declined}


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_a_star_import_does_not_fail_the_file(tmp_path, target):
    # timm train.py / Apex examples/imagenet/main_amp.py: `from x import *` next to a removable import
    text = "import torch\nfrom os import *\nfrom apex import amp\n\nm = torch.nn.Linear(1, 1).cuda()\nm = amp.initialize(m, opt_level='O1')\n"
    after, change = _fix(tmp_path, text, target)
    assert change.error is None
    assert "from os import *\n" in after and "from apex import amp" not in after
    assert "_migrate_amp_initialize(m, opt_level='O1')" in after


def test_a_finding_on_a_star_import_is_declined_with_the_reason(tmp_path):
    after, change = _fix(tmp_path, "import torch\nfrom torch.cuda import *\n\nx = y.cuda()\n")
    assert change.error is None and "from torch.cuda import *" in after and "y.npu()" in after
    assert _declined(change) == {"2:24 DEV008": "a star import binds names that cannot be renamed: import them by name"}


def test_a_form_feed_before_an_indented_line_is_not_inherited_by_inserted_helpers(tmp_path):
    text = 'import torch\n\n\ndef f():\n\x0c    return torch.zeros(1).to("cuda")\n'
    after, change = _fix(tmp_path, text, "portable")
    assert change.error is None and change.declined == ()
    ast.parse(after)
    assert "    return torch.zeros(1).to(_migrate_device().type)\n" in after
    assert "\x0c" not in after.split("def f():")[0]  # the helper above took no form feed


def test_a_form_feed_inside_a_block_keeps_the_sites_matched(tmp_path):
    text = 'import torch\nif True:\n    x = 1\n\x0c    y = torch.zeros(1).to("cuda")\n'
    after, change = _fix(tmp_path, text)
    assert change.declined == ()
    assert after.endswith('    x = 1\n    y = torch.zeros(1).to("npu")\n')


def test_a_page_break_line_is_kept(tmp_path):
    text = 'import torch\n\x0c\nx = torch.zeros(1).to("cuda")\n'
    after, _ = _fix(tmp_path, text)
    assert after == f'import torch\n{NOQA}\n\x0c\nx = torch.zeros(1).to("npu")\n'


def test_form_feeds_are_normalised_only_in_indentation():
    text = 'def f():\n\x0c    s = """\n\x0c  kept in the string"""\n  \x0c    return s\n'
    new, removed = syntax.normalise_form_feeds(text)
    assert new == 'def f():\n    s = """\n\x0c  kept in the string"""\n    return s\n'
    assert removed == {2: 1, 4: 3}
    assert ast.dump(ast.parse(new)) == ast.dump(ast.parse(text))


MATCH = """import torch


def pick(d, t):
    match d:
        case "cuda":
            return t.cuda()
        case torch.cuda.Stream():
            return 2
        case _:
            return 0
"""


def test_a_string_in_a_case_pattern_is_declined_for_portable(tmp_path):
    # Megatron: `match d: case "cuda":`: a call is not a valid pattern
    after, change = _fix(tmp_path, MATCH, "portable")
    assert change.error is None
    assert '        case "cuda":\n            return t.to(_migrate_device())\n' in after
    assert "        case torch.cuda.Stream():\n" in after
    reason = syntax.PATTERN_REASON
    assert _declined(change) == {"6:14 DEV012": reason, "8:14 DEV001": reason}
    assert "_migrate_device_module" not in after  # the declined site's helper is not added either


def test_a_case_pattern_keeps_a_literal_rewrite_for_npu(tmp_path):
    after, change = _fix(tmp_path, MATCH, "npu")
    assert change.declined == ()
    assert '        case "npu":\n' in after and "        case torch.npu.Stream():\n" in after


def test_a_rewrite_inside_an_f_string_takes_the_other_quote_or_is_declined(tmp_path):
    text = 'import torch\nprint(f"{torch.device(0)} {x.cuda()}")\nprint(f\'{f"{torch.device(2)}"}\')\n'
    after, change = _fix(tmp_path, text, "npu")
    assert change.error is None
    assert 'print(f"{torch.device(\'npu\', 0)} {x.npu()}")' in after
    assert 'print(f\'{f"{torch.device(2)}"}\')' in after  # both quotes taken: no spelling before 3.12
    assert _declined(change) == {"3:13 DEV014": syntax.FSTRING_REASON}


@pytest.mark.parametrize(
    "text, column",
    [
        ("import torch\nt.is_cuda = 1\nx = y.cuda()\n", 1),  # a simple statement
        ("import torch\nfor t.is_cuda in y:\n\tif x:\n\t\tx = y.cuda()\n", 5),  # a compound header, tab-indented
    ],
)
def test_a_statement_the_rewrite_would_break_is_undone(tmp_path, text, column):
    # `t.is_cuda` as an assignment target: the portable comparison cannot be assigned to
    rules = load_catalogue().rules
    scanned = scan_text(tmp_path, "import torch\ny = t.is_cuda\n")
    [use] = [f for f in scanned.findings if f.code == "DEV011"]
    target = dataclasses.replace(use, line=2, column=column, end_line=2, end_column=column + 9)
    result = python_fixer.fix_python(text, [target], rules, "portable", False)
    assert result.text == text and result.applied == []
    assert [reason for _, reason in result.declined] == [syntax.STATEMENT_REASON]


def test_a_file_libcst_cannot_parse_gets_its_findings_declined(monkeypatch, tmp_path):
    def refuse(text, config=None):
        raise cst.ParserSyntaxError("unsupported syntax", lines=text.splitlines(True), raw_line=2, raw_column=0)

    monkeypatch.setattr(python_fixer.cst, "parse_module", refuse)
    after, change = _fix(tmp_path, "import torch\nx = y.cuda()\n")
    assert change.error is None and after == "import torch\nx = y.cuda()\n"
    [(_, reason)] = change.declined
    assert reason.startswith("libcst cannot parse this file (line 2: unsupported syntax)")


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python parses PEP 695 / 701")
def test_newer_syntax_than_this_python_gets_a_per_file_message_and_the_run_goes_on(tmp_path):
    (tmp_path / "new.py").write_text(HEADER + SHAPES_312["type-params"])
    after, change = _fix(tmp_path, "import torch\nx = y.cuda()\n", name="old.py")
    assert change.error is None and "y.npu()" in after
    left = api.scan([tmp_path], root=tmp_path, use_cache=False)
    assert [(f.path, f.code) for f in left.findings] == [("new.py", "MIG001")]


def test_a_file_only_moving_tensors_imports_torch_npu_for_the_linter(tmp_path):
    # `.npu()` exists once torch_npu is imported; the import is otherwise unused, hence the noqa
    after, _ = _fix(tmp_path, "import torch\n\nx = torch.zeros(1).cuda()\n")
    assert after == f"import torch\n{NOQA}\n\nx = torch.zeros(1).npu()\n"


@pytest.mark.parametrize("target", ["npu", "portable"])
@pytest.mark.parametrize("shape", sorted(shapes_for()))
def test_every_syntax_shape_goes_through_fix(tmp_path, shape, target):
    counts = check_fix_properties(tmp_path, HEADER + shapes_for()[shape], target)
    assert counts["declined: the fix did not apply at this site"] == 0


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_all_syntax_shapes_in_one_file(tmp_path, target):
    counts = check_fix_properties(tmp_path, HEADER + "\n\n".join(shapes_for().values()), target)
    assert counts["applied"] > 30
    assert counts["declined: the fix did not apply at this site"] == 0


def test_the_users_bare_torch_npu_import_gets_the_noqa_once_it_matters(tmp_path):
    after, _ = _fix(tmp_path, "import torch\nimport torch_npu\n\ntorch.cuda.synchronize()\n")
    assert after == f"import torch\n{NOQA}\n\ntorch.npu.synchronize()\n"
    after, _ = _fix(tmp_path, "import torch\nimport torch_npu\n\ntorch.cuda.synchronize()\ntorch_npu.npu_x()\n", name="used.py")
    assert after.startswith("import torch\nimport torch_npu\n\n")
