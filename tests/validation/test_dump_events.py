"""The dump event record between the recorder (child) and the comparer (parent): written and read
strictly through the records' converter, so the two sides cannot drift apart silently."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from migrator.validation.child.recorder import Recorder  # noqa: E402
from migrator.validation.dumps import DUMP_FILE, DumpEvent  # noqa: E402
from migrator.validation.parent.comparison.compare import Run, compare_runs  # noqa: E402
from migrator.validation.records import RecordError  # noqa: E402


def _recorded(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    rec = Recorder(net).attach()
    loss = net(torch.randn(5, 4)).square().mean()
    rec.record_loss(loss)
    loss.backward()
    net[1].bias.grad = None  # a parameter without a grad: a "missing" event
    rec.record_param_grads([(n, p.grad) for n, p in net.named_parameters()])
    rec.detach()
    rec.save(str(tmp_path / "run"))
    return tmp_path / "run"


def test_recorded_events_come_back_as_the_records_written(tmp_path):
    run_dir = _recorded(tmp_path)
    run = Run.load(str(run_dir))
    assert run is not None and run.events and all(isinstance(e, DumpEvent) for e in run.events)
    missing = run.by_match["1.bias.grad"]
    assert missing.missing and missing.shape is None and missing.kind == "param_grad"
    weight = run.by_match["0.weight.grad"]
    assert weight.shape == (3, 4) and weight.dtype == "torch.float32" and not weight.missing
    assert weight.norm == pytest.approx(float(run.tensor("0.weight.grad").norm()), rel=1e-5)
    # the same run compared with itself passes on every tensor it holds data for
    same = compare_runs(run, None, run, None, gate_unmatched=True)
    assert same.verdicts and all(v.status == "pass" for v in same.verdicts)


@pytest.mark.parametrize("change,problem", [
    (lambda e: e.update(colour="red"), "colour"),              # a field the record does not have
    (lambda e: e.pop("match"), "match"),                       # a required field missing
    (lambda e: e.update(kind="sideways"), "kind"),             # a kind no comparer knows
])
def test_a_dump_event_that_does_not_match_the_record_names_the_file_and_field(tmp_path, change, problem):
    run_dir = _recorded(tmp_path)
    path = run_dir / DUMP_FILE
    doc = json.loads(path.read_text())
    change(doc["migrate"]["events"][0])
    path.write_text(json.dumps(doc))
    with pytest.raises(RecordError, match=problem) as info:
        Run.load(str(run_dir))
    assert str(path) in str(info.value) and "event 0" in str(info.value)
