"""Stages as a registry: every stage id has its runner per mode, one gating loop decides what runs, and
the graders read their category's named thresholds."""

from __future__ import annotations

import json

import pytest

from migrator.validation.parent import stages
from migrator.validation.parent.options import ALL_STAGES, Options
from migrator.validation.parent.results import StageResult
from migrator.validation.parent.stage_kit import StageContext
from migrator.validation.verdict import Verdict, worst


def test_the_protocol_mode_runs_every_stage_and_script_mode_says_why_not():
    assert set(stages.PROTOCOL.stages) == set(ALL_STAGES)
    assert set(stages.SCRIPT.stages) == {"S1", "S2"} and "validate.py protocol" in stages.SCRIPT.unavailable


def _context(tmp_path, **options) -> StageContext:
    opts = Options(original=str(tmp_path), migrated=str(tmp_path), **options)
    return StageContext(opts=opts, original=str(tmp_path), migrated=str(tmp_path), work=str(tmp_path),
                        shared=str(tmp_path), manifest={})


def _mode(statuses: dict[str, str], ran: list[str]) -> stages.Mode:
    def runner(ctx: StageContext) -> StageResult:
        ran.append(ctx.stage)
        return StageResult(ctx.stage, statuses.get(ctx.stage, "pass"))

    return stages.Mode("protocol", {sid: runner for sid in ALL_STAGES})


@pytest.mark.parametrize("failing", ["fail", "error"])
def test_a_failing_stage_gates_the_later_ones_unless_forced(tmp_path, failing):
    ran: list[str] = []
    result = stages.run_stages(_mode({"S1": failing}, ran), _context(tmp_path))
    assert ran == ["S0", "S1"]
    assert [s.status for s in result] == ["pass", failing, "not_run", "not_run"]
    assert result[2].reason == "S1 did not pass (--force runs it anyway)"
    ran.clear()
    forced = stages.run_stages(_mode({"S1": failing}, ran), _context(tmp_path, force=True))
    assert ran == list(ALL_STAGES) and forced[3].status == "pass"


def test_unselected_and_unavailable_stages_are_not_run_with_their_reason(tmp_path):
    ran: list[str] = []
    mode = stages.Mode("script", {"S1": _mode({}, ran).stages["S1"], "S2": _mode({}, ran).stages["S2"]},
                       unavailable="needs the protocol", always=("S1",))
    result = stages.run_stages(mode, _context(tmp_path, stages=("S2",)))
    assert ran == ["S1", "S2"]  # S1 runs whatever --stages says in this mode
    assert [(s.id, s.reason) for s in result if s.status == "not_run"] == [("S0", "needs the protocol"),
                                                                           ("S3", "needs the protocol")]
    only_s1 = stages.run_stages(mode, _context(tmp_path, stages=("S1",)))
    assert only_s1[2].reason == "not selected (--stages)"


def test_verdicts_stay_their_strings_in_json():
    stage = StageResult("S1", "warn")
    assert stage.status is Verdict.WARN and str(stage.status) == "warn" and f"{stage.status}" == "warn"
    assert json.loads(json.dumps(stage.to_json()))["status"] == "warn"
    assert worst(["pass", "warn", "not_run", "fail", "error"]) is Verdict.FAIL
    assert worst([]) is Verdict.PASS
    with pytest.raises(ValueError):
        StageResult("S1", "passed")


def test_graders_use_their_category_thresholds():
    torch = pytest.importorskip("torch")
    from migrator.validation.parent.comparison.compare import Run, compare_runs
    from migrator.validation.parent.comparison.thresholds import ActivationThresholds, Bounds, Thresholds

    def run(value):
        event = {"name": "Module.m.X.m.forward.0.output.0", "match": "m.forward.0.output.0",
                 "kind": "forward_output", "module": "m", "cls": "X", "scope": "m", "shape": list(value.shape),
                 "dtype": str(value.dtype)}
        return Run({"migrate": {"events": [event]}}, {event["name"]: value})

    gen = torch.Generator().manual_seed(0)
    golden = torch.randn(256, generator=gen)
    noise = torch.randn(256, generator=gen)
    reference, target = run(golden + 0.01 * noise), run(golden + 0.03 * noise)  # ratio 3 to golden
    default = compare_runs(run(golden), reference, None, target).verdicts[0]
    assert default.check("ratio").value == pytest.approx(3.0, rel=1e-3) and default.status == "fail"
    loose = Thresholds(activations=ActivationThresholds(ratio=Bounds(4.0, 8.0)))
    relaxed = compare_runs(run(golden), reference, None, target, th=loose).verdicts[0]
    assert relaxed.status == "pass" and relaxed.check("ratio").threshold == 8.0
