"""`migrate fix --fuse` (issue 42 item 2): each FUS site becomes `if getattr(x, "is_npu", False):` + the
fused torch_npu op with the exact argument mapping, the original kept as the other devices' branch; off by
default; a second run changes nothing; unsound sites are declined with the reason."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.fix.fusion_rewrite import fuse_text

FIXTURES = Path(__file__).resolve().parents[1] / "census" / "programs" / "fusion"
EXPECTED = {
    "rms_norm": "return torch_npu.npu_rms_norm(hidden_states, self.weight, epsilon=self.variance_epsilon)[0]",
    "swiglu": "return self.down(torch_npu.npu_swiglu(self.gate_up(x), dim=-1))",
    "rope": "return torch_npu.npu_rotary_mul(q, cos, sin, rotary_mode='half')",
    "attention": ("return torch_npu.npu_fusion_attention(q, k, v, head_num=q.shape[1], input_layout='BNSD', "
                  "scale=1.0 / math.sqrt(k.size(-1)), atten_mask=self.bias[:, :, :T, :T] == 0, keep_prob=1.0)[0]"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_gets_its_fused_branch_before_the_original(name):
    text = (FIXTURES / name / "validate.py").read_text()
    new, applied, declined = fuse_text(text)
    ast.parse(new)
    assert len(applied) == 1 and declined == []
    lines = new.splitlines()
    at = next(i for i, line in enumerate(lines) if EXPECTED[name] in line)
    assert lines[at - 2].strip().startswith("if getattr(") and ', "is_npu", False):' in lines[at - 2]
    assert lines[at - 1].strip() == "import torch_npu"
    assert new.replace("".join(line + "\n" for line in lines[at - 2:at + 1]), "") == text  # the original, untouched
    assert fuse_text(new)[0] == new  # already fused: nothing more


def test_the_branch_sits_where_the_arguments_hold_what_the_pattern_read():
    """RMSNorm rebinds its input after the pattern reads it: the branch goes before that."""
    new, _, _ = fuse_text((FIXTURES / "rms_norm" / "validate.py").read_text())
    lines = new.splitlines()
    branch = next(i for i, line in enumerate(lines) if "is_npu" in line)
    assert lines[branch - 1].strip() == "def forward(self, hidden_states):"


DECLINED = {
    "undefined weight": ('''import torch
def norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
''', "`weight` in the fused call is not defined here"),
    "rebound": ('''import torch
def norm(x, weight, eps):
    v = x.pow(2).mean(-1, keepdim=True)
    x = x + 1
    return weight * (x * torch.rsqrt(v + eps))
''', "`x` is rebound"),
    "not returned": ('''import torch.nn.functional as F
def mlp(h, out):
    a, b = h.chunk(2, dim=-1)
    out.append(F.silu(a) * b)
''', "not what the function returns"),
    "side effect skipped": ('''import torch
def norm(x, weight, eps, log):
    v = x.pow(2).mean(-1, keepdim=True)
    log.append(v)
    return weight * (x * torch.rsqrt(v + eps))
''', "other than an assignment"),
}


@pytest.mark.parametrize("case", sorted(DECLINED))
def test_a_site_the_branch_would_change_is_declined_with_the_reason(case):
    text, reason = DECLINED[case]
    new, applied, declined = fuse_text(text)
    assert new == text and applied == []
    [(_, _, why)] = declined
    assert reason in why


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(FIXTURES / name, tree)
    return tree


def test_fix_leaves_fusion_sites_alone_by_default(tmp_path):
    tree = _tree(tmp_path, "swiglu")
    before = (tree / "validate.py").read_text()
    api.fix([tree], root=tree, use_cache=False)
    assert (tree / "validate.py").read_text() == before


def test_fix_fuse_records_a_numerics_edit_and_the_rescan_has_no_advice_left(tmp_path):
    tree = _tree(tmp_path, "attention")
    outcome = api.fix([tree], root=tree, use_cache=False, fuse=True)
    [edit] = [e for c in outcome.plan.changes for e in c.edits]
    assert (edit.code, edit.fix_kind) == ("FUS004", "numerics")
    assert "torch_npu.npu_fusion_attention(" in (tree / "validate.py").read_text()
    assert [f for f in outcome.remaining.findings if f.family == "fusion"] == []
    again = api.fix([tree], root=tree, use_cache=False, fuse=True, write=False)
    assert not any(c.changed for c in again.plan.changes)
