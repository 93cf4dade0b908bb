"""Issue 39 item 3: CUDA names used as values, not called, are fixed where the target has a name with the
same call signature (`amp_autocast = torch.cuda.amp.autocast` as in timm's train.py, a partial of it,
`torch.cuda.Stream`/`Event` passed as classes, `getattr(torch.cuda, "synchronize")`), and scan calls them
fixable with the same precheck; `getattr(torch.cuda, name)` with a computed name is declined in both."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrator import api
from migrator.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fix_agreement  # noqa: E402

NPU_IMPORT = 'import torch_npu  # noqa: F401  registers the Ascend "npu" device\n'

# name -> (source, {target: text after `migrate fix`})
CASES = {
    "assigned-autocast": (
        "import torch\n\namp_autocast = torch.cuda.amp.autocast\nwith amp_autocast():\n    pass\n",
        {
            "npu": f"import torch\n{NPU_IMPORT}\namp_autocast = torch.npu.amp.autocast\nwith amp_autocast():\n    pass\n",
            "portable": (
                "import functools\n\nimport torch\n\nfrom _migrate_runtime import _migrate_device\n\n"
                "amp_autocast = functools.partial(torch.autocast, _migrate_device().type, dtype=torch.float16)\n"
                "with amp_autocast():\n    pass\n"
            ),
        },
    ),
    "partial-of-autocast": (
        "import functools\n\nimport torch\n\nbf16 = functools.partial(torch.cuda.amp.autocast, dtype=torch.bfloat16)\n",
        {
            "npu": f"import functools\n\nimport torch\n{NPU_IMPORT}\n"
                   "bf16 = functools.partial(torch.npu.amp.autocast, dtype=torch.bfloat16)\n",
            "portable": (
                "import functools\n\nimport torch\n\nfrom _migrate_runtime import _migrate_device\n\n"
                "bf16 = functools.partial(functools.partial(torch.autocast, _migrate_device().type, dtype=torch.float16), "
                "dtype=torch.bfloat16)\n"
            ),
        },
    ),
    "imported-autocast-name": (
        "from functools import partial\n\nfrom torch.cuda.amp import autocast\n\namp_autocast = autocast\n"
        "bf16 = partial(autocast, dtype=None)\n",
        {
            "npu": f"from functools import partial\n\nimport torch\n{NPU_IMPORT}\namp_autocast = torch.npu.amp.autocast\n"
                   "bf16 = partial(torch.npu.amp.autocast, dtype=None)\n",
            "portable": (
                "from functools import partial\n\nimport torch\nfrom _migrate_runtime import _migrate_device\n\n"
                "amp_autocast = partial(torch.autocast, _migrate_device().type, dtype=torch.float16)\n"
                "bf16 = partial(partial(torch.autocast, _migrate_device().type, dtype=torch.float16), dtype=None)\n"
            ),
        },
    ),
    "stream-class": (
        "import torch\n\nstream_cls = torch.cuda.Stream\nside = stream_cls()\n",
        {
            "npu": f"import torch\n{NPU_IMPORT}\nstream_cls = torch.npu.Stream\nside = stream_cls()\n",
            "portable": "from _migrate_runtime import _migrate_device_module\n\n"
                        "stream_cls = _migrate_device_module().Stream\nside = stream_cls()\n",
        },
    ),
    "event-argument": (
        "import torch\n\n\ndef make(cls):\n    return cls(enable_timing=True)\n\n\nstart = make(torch.cuda.Event)\n",
        {
            "npu": f"import torch\n{NPU_IMPORT}\n\ndef make(cls):\n    return cls(enable_timing=True)\n\n\n"
                   "start = make(torch.npu.Event)\n",
            "portable": "from _migrate_runtime import _migrate_device_module\n\n\n"
                        "def make(cls):\n    return cls(enable_timing=True)\n\n\nstart = make(_migrate_device_module().Event)\n",
        },
    ),
    "getattr-literal": (
        'import torch\n\ngetattr(torch.cuda, "synchronize")()\n',
        {
            "npu": f'import torch\n{NPU_IMPORT}\ngetattr(torch.npu, "synchronize")()\n',
            "portable": 'from _migrate_runtime import _migrate_device_module\n\n'
                        'getattr(_migrate_device_module(), "synchronize")()\n',
        },
    ),
}
PARAMS = [pytest.param(name, target, id=f"{name}-{target}") for name in CASES for target in ("npu", "portable")]


def _tree(tmp_path: Path, code: str) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "m.py").write_text(code)
    return root


def _check(root: Path, target: str) -> int:
    result = CliRunner().invoke(main, ["fix", str(root), "--target", target, "--check", "--no-cache", "--no-record",
                                       "--fail-on", "never", "-q"], catch_exceptions=False)
    return result.exit_code


@pytest.mark.parametrize("name, target", PARAMS)
def test_a_value_reference_is_fixed_and_scan_calls_it_fixable(tmp_path, name, target):
    code, after = CASES[name]
    root = _tree(tmp_path, code)
    scanned = api.scan([root], root=root, target=target, use_cache=False).findings
    assert scanned and all(f.fix is not None and f.declined is None for f in scanned), [(f.code, f.declined) for f in scanned]
    assert _check(root, target) == 1  # the check sees the work before the fix

    outcome = api.fix([root], root=root, target=target, use_cache=False)
    text = (root / "m.py").read_text()
    assert text == after[target]
    ast.parse(text)
    assert not [d for c in outcome.plan.changes for d in c.declined]
    again = api.fix([root], root=root, target=target, use_cache=False)
    assert not [c for c in again.plan.changes if c.changed] and (root / "m.py").read_text() == text
    assert _check(root, target) == 0


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_scan_claims_exactly_the_value_references_fix_applies(tmp_path, target):
    program = tmp_path / "values.py"
    program.write_text("import functools\n" + "".join(code.replace("import functools\n", "") for code, _ in CASES.values()))
    report = fix_agreement.measure(program, target, tmp_path / "run")
    assert report.claimed and report.agrees, "\n".join(report.examples())


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_getattr_with_a_computed_name_is_declined_in_scan_and_fix(tmp_path, target):
    code = "import torch\n\n\ndef call(name):\n    return getattr(torch.cuda, name)()\n"
    root = _tree(tmp_path, code)
    [finding] = api.scan([root], root=root, target=target, use_cache=False).findings
    assert finding.code == "DEV008" and finding.fix is None
    assert finding.declined is not None and "computed at run time" in finding.declined
    outcome = api.fix([root], root=root, target=target, use_cache=False)
    assert (root / "m.py").read_text() == code
    assert [why for c in outcome.plan.changes for _, why in c.declined] == [finding.declined]
    assert [f.code for f in outcome.remaining.findings] == ["DEV008"]  # scan still reports it


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_getattr_and_the_written_out_attribute_get_the_same_answer(tmp_path, target):
    """The literal getattr goes through the call rewrites' table: a name with its own rule is that rule's."""
    root = _tree(tmp_path, 'import torch\n\ncap = getattr(torch.cuda, "get_device_capability")()\n'
                           'mod = getattr(torch.cuda, "amp")\n')
    by_line = {f.line: f for f in api.scan([root], root=root, target=target, use_cache=False).findings}
    assert "DEV004 judges it" in (by_line[3].declined or "")
    assert by_line[4].fix is not None  # torch.cuda.amp renames to torch.npu.amp (AMP006)
