"""Fusion findings from the op census (issue 42 item 1): on each fixture the advisor's pattern names
exactly the fused API the AST names, at the same site; samples/resnet gets none."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")

from migrator import api  # noqa: E402
from migrator.census.advisor_rules import ADVISOR_VERSION  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "census" / "programs" / "fusion"
EXPECTED = {"rms_norm": ("torch_npu.npu_rms_norm", "FUS001"), "swiglu": ("torch_npu.npu_swiglu", "FUS002"),
            "rope": ("torch_npu.npu_rotary_mul", "FUS003"), "attention": ("torch_npu.npu_fusion_attention", "FUS004")}


def _census(tmp_path: Path, source: Path):
    tree = tmp_path / source.name
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("csrc", "__pycache__"))
    census, _, _ = api.trace_ops(tree, root=tree, write=False)
    return census


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_gets_exactly_its_fused_api_where_the_ast_puts_it(tmp_path, name):
    api_name, code = EXPECTED[name]
    [site] = _census(tmp_path, FIXTURES / name).fusions
    assert (site.fused_api, site.found_by, site.ast_code) == (api_name, "census+ast", code)
    assert site.rule is not None and site.rule.startswith(api_name + ": ") and ADVISOR_VERSION in site.rule
    assert "cann_version" in site.rule


@pytest.mark.slow
def test_resnet_gets_no_fusion_finding_from_the_census(tmp_path):
    assert _census(tmp_path, REPO / "samples" / "resnet").fusions == ()
