"""`migrate fix` on Triton kernels (issue 41 item 3): the migration guide's vector add becomes the guide's
ported version, and the KERN016/018/019/022 rewrites on kernels the catalogue examples do not cover."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from migrator import api

FIXTURES = Path(__file__).parents[1] / "fixtures" / "triton_kernels"
GUIDE = Path(__file__).resolve().parents[3] / "shared" / "data" / "triton-ascend" / "migration_guide" / "migrate_from_gpu.md"
ANNOTATION = re.compile(r"\s*#\s*\[(Added|Deleted|Modified)\].*$")  # the guide's notes on its diff lines
OUR_MARKER = '  # noqa: F401  registers the Ascend "npu" device'  # what `fix` writes after `import torch_npu`


def _sides(diff: str) -> tuple[str, str]:
    """The guide's "before" and "after" from its diff block. Its marker columns are loose (`- DEVICE`,
    `-   assert`): a marker counts as a space and the indent is rounded down to the file's 4-space step."""
    before, after = [], []
    for line in diff.splitlines():
        if line.startswith(("-", "+")):
            body = " " + line[1:]
            indent = len(body) - len(body.lstrip(" "))
            text = " " * (indent // 4 * 4) + ANNOTATION.sub("", body.lstrip(" "))
            (before if line[0] == "-" else after).append(text)
        else:
            before.append(line)
            after.append(line)
    return "\n".join(before) + "\n", "\n".join(after) + "\n"


def _tree(tmp_path: Path, name: str, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / name).write_text(text)
    return tmp_path / name


@pytest.mark.skipif(not GUIDE.is_file(), reason="shared triton-ascend docs absent")
def test_the_fixture_is_the_guides_vector_add_example():
    block = GUIDE.read_text(encoding="utf-8").split("```diff\n", 1)[1].split("```", 1)[0]
    assert (FIXTURES / "guide_vector_add.diff").read_text(encoding="utf-8") == block


def test_fix_diff_turns_the_guides_before_into_its_after(tmp_path):
    before, after = _sides((FIXTURES / "guide_vector_add.diff").read_text(encoding="utf-8"))
    path = _tree(tmp_path, "vector_add.py", before)
    diff = subprocess.run([sys.executable, "-m", "migrator", "fix", "--diff", str(tmp_path)], capture_output=True,
                          text=True, cwd=Path(__file__).parents[2])
    assert path.read_text() == before  # --diff writes nothing
    removed = [line[1:] for line in diff.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].replace(OUR_MARKER, "") for line in diff.stdout.splitlines()
             if line.startswith("+") and not line.startswith("+++")]
    wanted_removed = [b for b in before.splitlines() if b.strip() and b not in after.splitlines()]
    wanted_added = [a for a in after.splitlines() if a.strip() and a not in before.splitlines()]
    assert [r for r in removed if r.strip()] == wanted_removed
    assert [a for a in added if a.strip()] == wanted_added
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    assert path.read_text().replace(OUR_MARKER, "") == after


def test_a_device_lookup_used_as_a_device_becomes_the_current_npu(tmp_path):
    path = _tree(tmp_path, "t.py", "import torch\nimport triton\n\nDEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
                                   "x = torch.ones(3, device=DEVICE)\n")
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    assert 'DEVICE = torch.device("npu", torch.npu.current_device())' in path.read_text()


def test_tuning_knobs_go_and_the_call_keeps_its_layout(tmp_path):
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, n, B: tl.constexpr):\n"
            "    pid = tl.program_id(0)\n    tl.store(x + pid * B + tl.arange(0, B), 0.0)\n\n"
            "def run(x):\n    k[(4,)](x, 16,\n            B=4, num_warps=4, num_stages=3)\n"
            "configs = [triton.Config({'B': 4}, num_warps=8), triton.Config({'B': 8})]\n")
    path = _tree(tmp_path, "t.py", code)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    text = path.read_text()
    assert "    k[(4,)](x, 16,\n            B=4)\n" in text
    assert "configs = [triton.Config({'B': 4}), triton.Config({'B': 8})]" in text


def test_allow_tf32_keeps_a_runtime_flag(tmp_path):
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(a, FAST: tl.constexpr):\n"
            "    x = tl.load(a + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])\n"
            "    tl.store(a, tl.dot(x, x, allow_tf32=FAST))\n")
    path = _tree(tmp_path, "t.py", code)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    assert 'tl.dot(x, x, input_precision="tf32" if FAST else "ieee")' in path.read_text()


PERSISTENT_DECLINES = [
    ("    pid = tl.program_id(0)\n    if pid > 3:\n        return\n", "a `return` in the body"),
    ("    pid = tl.program_id(0)\n    q = tl.program_id(1)\n", "1-D kernel"),
    ("    pid = tl.program_id(0)\n    m = tl.num_programs(0)\n", "tl.num_programs"),
]


@pytest.mark.parametrize("head, reason", PERSISTENT_DECLINES)
def test_the_persistent_rewrite_declines_what_it_cannot_prove_and_scan_says_the_same(tmp_path, head, reason):
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(out, n, B: tl.constexpr):\n" + head
            + "    offs = pid * B + tl.arange(0, B)\n    tl.store(out + offs, 0.0, mask=offs < n)\n\n"
            "def run(out):\n    k[(1000000,)](out, 1000000 * 64, B=64)\n")
    path = _tree(tmp_path, "t.py", code)
    scanned = [f for f in api.scan([tmp_path], root=tmp_path, use_cache=False).findings if f.code == "KERN019"]
    assert scanned and reason in (scanned[0].declined or "")
    outcome = api.fix([path], root=tmp_path, target="npu", use_cache=False)
    declined = [why for c in outcome.plan.changes for f, why in c.declined if f.code == "KERN019"]
    assert declined == [scanned[0].declined]
    assert path.read_text() == code


def test_a_launch_whose_grid_is_unknown_there_declines_the_whole_kernel(tmp_path):
    # the big launch is rewritable; the other reads meta['B'] it does not pass (an autotuned B), so its
    # program count is not known where N_PROGRAMS would be passed
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(out, n, B: tl.constexpr):\n"
            "    pid = tl.program_id(0)\n    tl.store(out + pid * B + tl.arange(0, B), 0.0)\n\n"
            "def run(out):\n    k[(1048576,)](out, 67108864, B=64)\n\n"
            "def run_tuned(out, n):\n    grid = lambda meta: (triton.cdiv(n, meta['B']),)\n    k[grid](out, n)\n")
    path = _tree(tmp_path, "t.py", code)
    outcome = api.fix([path], root=tmp_path, target="npu", use_cache=False)
    declined = [why for c in outcome.plan.changes for f, why in c.declined if f.code == "KERN019"]
    assert declined and "meta['B']" in declined[0] and "autotuned" in declined[0]


def test_libdevice_bound_by_conditional_imports_becomes_tl_math_and_nothing_else_moves(tmp_path):
    from tests.engine.test_triton_kernels import CONDITIONAL_LIBDEVICE

    path = _tree(tmp_path, "t.py", CONDITIONAL_LIBDEVICE)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    text = path.read_text()
    # the local `rsqrt` may still be libdevice's (three imports bind it): spelled in full, once
    assert "    tl.store(x, tl.math.rsqrt(tl.load(x)))\n" in text
    assert "    return torch.rsqrt(y)\n" in text  # an attribute named rsqrt is no use of the name


def test_dropping_the_last_keyword_keeps_the_closing_bracket_where_it_was(tmp_path):
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n"
            "    tl.store(x + tl.arange(0, B), 0.0)\n\n"
            "def run(x, warps):\n    k[(4,)](\n        x,\n        B=4,\n        num_warps=warps,\n    )\n")
    path = _tree(tmp_path, "t.py", code)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    assert "    k[(4,)](\n        x,\n        B=4,\n    )\n" in path.read_text()


def test_dropping_the_last_keyword_keeps_the_comments_of_the_argument_before_it(tmp_path):
    """flash-attn's cross-entropy launch: `BLOCK_SIZE=BLOCK_SIZE,  # constants` then `num_warps=...` last."""
    code = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, n, B: tl.constexpr):\n"
            "    tl.store(x + tl.arange(0, B), 0.0)\n\n"
            "def run(x, warps):\n    k[(4,)](\n        x,\n        8,  # shapes\n        # the block\n"
            "        B=4,  # constants\n        num_warps=warps,\n    )\n")
    path = _tree(tmp_path, "t.py", code)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    fixed = path.read_text()
    assert "        8,  # shapes\n        # the block\n        B=4,  # constants\n    )\n" in fixed, fixed
    assert "num_warps" not in fixed


KERNEL = ("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n"
          "    tl.store(x + tl.arange(0, B), 0.0)\n\n")


@pytest.mark.parametrize(("launch", "fixed_launch"), [
    pytest.param("    k[(4,)](\n        x,\n        B=4,\n        num_warps=w,  # tuned on A100\n    )\n",
                 "    k[(4,)](\n        x,\n        B=4,\n        # tuned on A100\n    )\n", id="last-trailing"),
    pytest.param("    k[(4,)](\n        x,\n        num_warps=w,  # tuned on A100\n        # the block\n        B=4,\n    )\n",
                 "    k[(4,)](\n        x,\n        # tuned on A100\n        # the block\n        B=4,\n    )\n",
                 id="middle-trailing-and-the-next-ones-leading"),
    pytest.param("    k[(4,)](\n        x,\n        # tuned on A100\n        num_warps=w,\n        B=4,\n    )\n",
                 "    k[(4,)](\n        x,\n        # tuned on A100\n        B=4,\n    )\n", id="on-the-line-before"),
    pytest.param("    k[(4,)](\n        x,\n        B=4,\n        num_warps=w  # tuned on A100\n    )\n",
                 "    k[(4,)](\n        x,\n        B=4\n        # tuned on A100\n    )\n", id="last-without-trailing-comma"),
    pytest.param("    k[(4,)](x, num_warps=w,  # tuned on A100\n            B=4)\n",
                 "    k[(4,)](x,  # tuned on A100\n            B=4)\n", id="sharing-the-line-before"),
    pytest.param("    c = triton.Config(\n        {'B': 64},\n        num_stages=1,  # for the unit test\n        num_warps=w)\n",
                 "    c = triton.Config(\n        {'B': 64}\n        # for the unit test\n        )\n", id="deepspeed-config"),
    pytest.param("    k[(4,)](x, num_warps=w, B=4)  # tuned on A100\n",
                 "    k[(4,)](x, B=4)  # tuned on A100\n", id="one-line-call"),
])
def test_a_comment_on_a_dropped_argument_stays_where_the_argument_was(tmp_path, launch, fixed_launch):
    """deepspeed's `num_stages=1,  # this is mainly for unit test, ...` lost its comment with the argument."""
    path = _tree(tmp_path, "t.py", KERNEL + "def run(x, w):\n" + launch)
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    fixed = path.read_text()
    assert fixed.endswith("def run(x, w):\n" + fixed_launch), fixed
    compile(fixed, "t.py", "exec")
    api.fix([path], root=tmp_path, target="npu", use_cache=False)
    assert path.read_text() == fixed  # a second run changes nothing


def test_the_first_argument_dropped_on_the_portable_target_keeps_its_comment(tmp_path):
    launch = "    k[(4,)](\n        num_warps=w,  # tuned on A100\n        x=x,\n        B=4,\n    )\n"
    path = _tree(tmp_path, "t.py", KERNEL + "def run(x, w):\n" + launch)
    api.fix([path], root=tmp_path, target="portable", use_cache=False)
    assert path.read_text().endswith("    k[(4,)](\n        # tuned on A100\n        x=x,\n        B=4,\n    )\n")
