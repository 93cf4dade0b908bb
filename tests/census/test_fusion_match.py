"""The advisor's patterns on the census's data flow, and the join with the AST's findings (issue 42)."""

from __future__ import annotations

from migrator.census.advisor_rules import AdvisorRule, load_rules, parse_pattern
from migrator.census.fusion_agreement import agree
from migrator.census.fusion_match import match_flow


def node(op, *inputs, line=None, path="m.py"):
    out = {"op": op, "inputs": list(inputs)}
    if line is not None:
        out.update(path=path, line=line, function="f")
    return out


def rule(api, pattern):
    return AdvisorRule(api, pattern, parse_pattern(pattern, "test"), "7.0.0", 2)


ATTENTION = [
    node("transpose", line=5),                 # 0  k^T
    node("matmul", 0, line=5),                 # 1  q @ k^T
    node("mul", 1, line=5),                    # 2  * scale
    node("slice", line=6),                     # 3  the mask buffer (beside the chain)
    node("eq", 3, line=6),                     # 4  == 0
    node("masked_fill", 2, 4, line=6),         # 5
    node("softmax", 5, line=7),                # 6
    node("matmul", 6, line=8),                 # 7  @ v
]


def test_ops_that_build_an_operand_beside_the_chain_do_not_break_it():
    [m] = [m for m in match_flow(ATTENTION, load_rules()) if m.rule.fused_api == "torch_npu.npu_fusion_attention"]
    assert (m.line, m.ops) == (8, ("matmul", "mul", "masked_fill", "softmax", "matmul"))
    assert {line for _, line in m.lines} == {5, 6, 7, 8}


def test_the_same_ops_not_feeding_each_other_do_not_match():
    flow = [node("matmul", line=1), node("mul", line=2), node("softmax", line=3), node("matmul", line=4)]  # no links
    assert not [m for m in match_flow(flow, load_rules()) if m.rule.fused_api == "torch_npu.npu_fusion_attention"]


def test_optional_slots_may_be_left_out_and_repeated_ones_filled():
    rope = rule("torch_npu.npu_rotary_mul", "(chunk)-neg-cat-(mul){0,2}-add")
    flow = [node("chunk", line=1), node("neg", 0, line=1), node("cat", 1, 0, line=1), node("add", 2, line=2)]
    assert [m.ops for m in match_flow(flow, [rope])] == [("chunk", "neg", "cat", "add")]
    flow = [node("chunk", line=1), node("neg", 0, line=1), node("cat", 1, line=1), node("mul", 2, line=2),
            node("mul", 3, line=2), node("mul", 4, line=2), node("add", 5, line=2)]
    assert match_flow(flow, [rope]) == []  # three muls: more than {0,2}


def test_an_op_and_its_in_place_form_are_one_op():
    masked = rule("x", "softmax-(mul){0,1}-(masked_fill_)")
    assert len(match_flow([node("softmax", line=1), node("masked_fill", 0, line=2)], [masked])) == 1
    assert match_flow([node("softmax", line=1), node("masked_scatter", 0, line=2)], [masked]) == []


def test_a_match_ending_in_library_code_has_no_site():
    flow = [node("chunk"), node("silu", 0), node("mul", 1, 0)]
    assert match_flow(flow, [rule("torch_npu.npu_swiglu", "(chunk)-silu-mul")]) == []


def test_agreement_says_which_source_found_a_site():
    matches = match_flow(ATTENTION, load_rules())
    sites = agree(matches, [("m.py", 8, "FUS004"), ("m.py", 30, "FUS001")])
    by_api = {s.fused_api: s for s in sites}
    both = by_api["torch_npu.npu_fusion_attention"]
    assert (both.found_by, both.ast_code, both.rule) == ("census+ast", "FUS004", matches[0].rule.name)
    ast_only = by_api["torch_npu.npu_rms_norm"]
    assert ast_only.found_by == "ast" and ast_only.rule is None and "AST only" in ast_only.detail
    census_only = agree(matches, [])
    assert [s.found_by for s in census_only] == ["census"] and "census only" in census_only[0].detail


def test_an_ast_finding_on_another_line_of_the_chain_agrees():
    """The AST reports the rsqrt's line, the census the last op's: one site when the chain holds both lines."""
    flow = [node("pow", line=3), node("mean", 0, line=3), node("add", 1, line=4), node("rsqrt", 2, line=4),
            node("mul", 3, line=5)]
    [site] = agree(match_flow(flow, load_rules()), [("m.py", 4, "FUS001")])
    assert (site.found_by, site.line, site.ast_line) == ("census+ast", 5, 4)


def test_ops_of_a_cuda_librarys_cpu_stand_in_are_no_match():
    """apex's FusedRMSNorm runs as our CPU reference: its pow/rsqrt are not code the user wrote."""
    flow = [node("pow", line=3), node("mean", 0, line=3), node("add", 1, line=3), node("rsqrt", 2, line=3),
            node("mul", 3, line=3)]
    assert len(match_flow(flow, load_rules())) == 1
    for n in flow:
        n["reference"] = True
    assert match_flow(flow, load_rules()) == []


def test_addmm_needs_a_matrix_product_feeding_its_chain():
    """x-transformers 2.31.10 rotary: `t * cos * scale + rotate_half(t) * sin * scale` is mul-mul-add on
    elementwise products (bench/perf_lint_review.py); `beta * M + alpha * (A @ B)` is addmm's."""
    addmm = rule("torch.addmm", "mul-mul-add")
    rotary = [node("cos", line=1), node("mul", 0, line=1), node("mul", 1, line=1), node("add", 2, line=1)]
    assert match_flow(rotary, [addmm]) == []
    product = [node("mm", line=1), node("mul", 0, line=1), node("mul", 1, line=1), node("add", 2, line=1)]
    assert [m.line for m in match_flow(product, [addmm])] == [1]
