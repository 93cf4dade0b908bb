"""The performance lint completed by the op census (issue 42 item 3): the acceptance program
(tests/fixtures/perf/acceptance) gets exactly one perf finding per cost, at the user's line; the census
half (shapes that change between steps, the advisor's AICPU rules) on rows of its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from migrator import api
from migrator.census import aicpu_rules, store
from migrator.census.perf_lint import dynamic_shapes, lint
from migrator.ground.usage_error import UsageError

ACCEPTANCE = Path(__file__).resolve().parents[1] / "fixtures" / "perf" / "acceptance"


def _line_of(path: Path, marker: str) -> int:
    [number] = [i for i, text in enumerate(path.read_text().splitlines(), 1) if marker in text]
    return number


@pytest.fixture(scope="module")
def traced_tree(tmp_path_factory):
    tree = tmp_path_factory.mktemp("perf") / "acceptance"
    shutil.copytree(ACCEPTANCE, tree)
    census, path, _ = api.trace_ops(tree / "train.py", steps=3)
    return tree, census, path


@pytest.mark.slow
def test_the_acceptance_program_gets_exactly_one_finding_per_cost(traced_tree):
    tree, _, _ = traced_tree
    train = tree / "train.py"
    expected = sorted([
        ("PERF001", "train.py", _line_of(train, "losses.append(loss.item())")),
        ("PERF001", "train.py", _line_of(train, "kept.cpu()")),
        ("PERF001", "train.py", _line_of(train, "torch.nonzero(")),
        ("PERF002", "train.py", _line_of(train, "{loss.item():.4f}")),
        ("PERF003", "train.py", _line_of(train, "h.double()")),
        ("PERF004", "train.py", _line_of(train, "convert_sync_batchnorm")),
        ("PERF006", "launch.sh", _line_of(tree / "launch.sh", "ASCEND_LAUNCH_BLOCKING=1")),
        ("PERF011", "train.py", _line_of(train, "torch.randint(")),
    ])
    result = api.scan([tree], root=tree, use_cache=False)
    perf = sorted((f.code, f.path, f.line) for f in result.findings if f.family == "perf")
    assert perf == expected
    severities = {f.code: f.severity for f in result.findings if f.family == "perf"}
    assert severities["PERF002"] == "info" and severities["PERF001"] == "warning"


@pytest.mark.slow
def test_the_census_alone_sees_the_costs_the_static_scan_also_names(traced_tree):
    """Without the merge the census has its own sites on the nonzero and float64 lines: the scan keeps the
    static finding there (one per line), and the changing length is the census' alone."""
    tree, census, path = traced_tree
    train = tree / "train.py"
    by_line = {(s.impl, s.line) for s in census.perf}
    assert ("dynamic-shape", _line_of(train, "torch.randint(")) in by_line
    assert ("dynamic-shape", _line_of(train, "torch.nonzero(")) in by_line  # a data-dependent size
    assert ("aicpu-dtype", _line_of(train, "h.double()")) in by_line  # cast to float64: off the 8.0.RC1 list
    assert store.load(path).perf == census.perf  # written and read back through the schema
    shape = next(s for s in census.perf if s.line == _line_of(train, "torch.randint("))
    assert "step 1: 7, step 2: 9, step 3: 12" in shape.message


@pytest.mark.slow
def test_one_traced_step_compares_no_shapes(tmp_path):
    tree = tmp_path / "acceptance"
    shutil.copytree(ACCEPTANCE, tree)
    census, _, _ = api.trace_ops(tree / "train.py", steps=1, write=False)
    assert not [s for s in census.perf if s.impl == "dynamic-shape"]
    assert any("one step traced" in note for note in census.notes)


def _row(op, line, steps, phase="forward", dtypes=("fp32",), out_dtypes=None):
    """A census child row: `steps` maps step -> (input shapes, output shapes) of its one call."""
    row = {"level": "aten", "op": op, "dtypes": list(dtypes), "phase": phase, "count": len(steps),
           "user_frame": {"path": "train.py", "line": line, "function": "main"},
           "step_shapes": [[s, [[ins, outs]]] for s, (ins, outs) in sorted(steps.items())]}
    if out_dtypes is not None:
        row["out_dtypes"] = list(out_dtypes)
    return row


def test_ops_that_change_together_are_one_change_at_the_op_that_makes_the_sizes():
    rows = [
        _row("aten::randint.low", 10, {0: ([], [[4, 7]]), 1: ([], [[4, 9]])}, phase="setup", dtypes=()),
        _row("aten::embedding", 20, {0: ([[50, 16], [4, 7]], [[4, 7, 16]]), 1: ([[50, 16], [4, 9]], [[4, 9, 16]])}),
        _row("aten::view", 21, {0: ([[4, 7, 16]], [[28, 16]]), 1: ([[4, 9, 16]], [[36, 16]])}),
        _row("aten::mm", 21, {0: ([[28, 16], [16, 2]], [[28, 2]]), 1: ([[36, 16], [16, 2]], [[36, 2]])}),
        _row("aten::mm", 30, {0: ([[28, 2], [2, 16]], [[28, 16]]), 1: ([[36, 2], [2, 16]], [[36, 16]])},
             phase="backward"),
    ]
    [change] = dynamic_shapes(rows)
    assert change.user is not None and change.user.line == 10
    assert change.ops == {"aten::randint.low", "aten::embedding", "aten::view", "aten::mm"}


def test_a_value_dependent_size_is_a_change_of_its_own():
    rows = [
        _row("aten::gt.Scalar", 5, {0: ([[4, 8]], [[4, 8]]), 1: ([[4, 8]], [[4, 8]])}),
        _row("aten::nonzero", 6, {0: ([[4, 8]], [[11, 2]]), 1: ([[4, 8]], [[13, 2]])}, dtypes=("bool",)),
        _row("aten::index_select", 7, {0: ([[32], [11]], [[11]]), 1: ([[32], [13]], [[13]])}),
    ]
    [change] = dynamic_shapes(rows)
    assert (change.user.line, change.from_values) == (6, True)


def test_shapes_that_stay_the_same_or_vary_only_in_backward_start_nothing():
    same = _row("aten::mm", 5, {0: ([[4, 8], [8, 2]], [[4, 2]]), 1: ([[4, 8], [8, 2]], [[4, 2]])})
    backward = _row("aten::sum", 9, {0: ([[3]], [[]]), 1: ([[5]], [[]])}, phase="backward")
    assert dynamic_shapes([same, backward]) == []
    assert lint([backward], steps=2, cann_version=None).sites == ()


def test_aicpu_dtypes_follow_the_chosen_cann_version():
    """float64 is on the 8.0.RC1 list for every op but `cast`, off the 7.0.RC1 one (aicpu_rules.yaml)."""
    add = _row("aten::add.Tensor", 12, {}, dtypes=("fp64", "fp64"), out_dtypes=("fp64",))
    cast = _row("aten::_to_copy", 11, {}, dtypes=("fp32",), out_dtypes=("fp64",))
    assert aicpu_rules.newest_version() == "8.0.RC1"
    newest = lint([add, cast], steps=1, cann_version=None).sites
    assert [(s.impl, s.line) for s in newest] == [("aicpu-dtype", 11)]
    older = lint([add, cast], steps=1, cann_version="7.0.RC1").sites
    assert [(s.impl, s.line) for s in older] == [("aicpu-dtype", 11), ("aicpu-dtype", 12)]
    assert "float64 to float32" in older[1].message and "CANN 7.0.RC1" in older[1].message
    backward = dict(add, phase="backward")
    assert lint([backward], steps=1, cann_version="7.0.RC1").sites == ()


def test_an_unknown_cann_version_is_refused_before_the_program_runs(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.migrate]\ncann-version = '6.3.RC2'\n")
    (tmp_path / "train.py").write_text("raise SystemExit('must not run')\n")
    with pytest.raises(UsageError, match=r"6\.3\.RC2.*7\.0\.RC1, 7\.0\.0, 8\.0\.RC1"):
        api.trace_ops(tmp_path / "train.py", steps=2)


def test_a_census_site_is_reported_at_its_line_unless_a_static_finding_is_there(tmp_path):
    code = "import torch\nfor x in loader:\n    n = torch.nonzero(x)\n    y = model(x)\n    y.sum().backward()\n"
    census = {"format": 1, "program": {"target": ".", "mode": "script", "steps": 2}, "soc": "A2",
              "torch_npu_version": "2.14.0", "ops": [], "perf": [
                  {"impl": "dynamic-shape", "path": "train.py", "line": 3, "message": "nonzero's size"},
                  {"impl": "dynamic-shape", "path": "train.py", "line": 4, "message": "sizes change here"}]}
    (tmp_path / ".migrate").mkdir()
    (tmp_path / ".migrate" / "op-trace.json").write_text(json.dumps(census))
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(code)
    result = api.scan([tmp_path], root=tmp_path, use_cache=False)
    perf = sorted((f.code, f.line, f.message) for f in result.findings if f.family == "perf")
    assert [(c, n) for c, n, _ in perf] == [("PERF001", 3), ("PERF011", 4)]
    assert perf[1][2] == "sizes change here"
