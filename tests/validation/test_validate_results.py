"""Recorder (msprobe naming, dump.json, safetensors), msprobe export, result JSON / Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from migrator.validation.child.recorder import Recorder  # noqa: E402
from migrator.validation.dumps import load_dump  # noqa: E402
from migrator.validation.parent.results import StageResult, ValidationResult  # noqa: E402

SCHEMA = Path(__file__).resolve().parents[2] / "migrator" / "ground" / "schema" / "validation.schema.json"


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2  # the "* 2" is Inner's own code


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x, scale=1.0):
        return self.head(self.inner(x) * scale)


def _record(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    net = Net()
    rec = Recorder(net).attach()
    with rec.api_mode():
        out = net(torch.randn(3, 4), scale=0.5)
        out.topk(1, dim=-1)
    loss = out.square().mean()
    rec.record_loss(loss)
    loss.backward()
    rec.record_param_grads([(n, p.grad) for n, p in net.named_parameters()])
    rec.detach()
    rec.save(str(tmp_path / "run"))
    return tmp_path / "run"


def test_recorder_msprobe_names_and_dump_json(tmp_path):
    doc, tensors = load_dump(str(_record(tmp_path)))
    assert doc["task"] == "tensor" and doc["framework"] == "pytorch" and doc["level"] == "mix"
    data = doc["data"]
    fwd = data["Module.inner.fc.Linear.forward.0"]
    assert fwd["input_args"][0]["data_name"] == "Module.inner.fc.Linear.forward.0.input.0.pt"
    assert fwd["output"][0]["dtype"] == "torch.float32" and fwd["output"][0]["shape"] == [3, 4]
    assert {"Max", "Min", "Mean", "Norm", "requires_grad"} <= set(fwd["output"][0])
    assert data["Module._root.Net.forward.0"]["input_kwargs"]["scale"] == {"type": "float", "value": 0.5}
    assert "Module.head.Linear.backward.0" in data  # grad w.r.t. the output, via a tensor hook
    assert set(data["Module.inner.fc.Linear.parameters_grad"]) == {"weight", "bias"}
    assert "Tensor.topk.0.forward" in data
    assert "Module.inner.fc.Linear.forward.0.output.0" in tensors
    assert tensors["Tensor.topk.0.forward.output.1"].dtype == torch.int64
    events = doc["migrate"]["events"]
    kinds = [e["kind"] for e in events]
    assert kinds.index("forward_output") < kinds.index("loss") < kinds.index("backward") < kinds.index("param_grad")
    head_in = next(e for e in events if e["match"] == "head.forward.0.input.0")
    assert head_in["scope"] == "_root"  # computed by Net's own code (the "* scale")
    fc_out = next(e for e in events if e["match"] == "inner.fc.forward.0.output.0")
    assert fc_out["scope"] == "inner.fc"


def test_recorder_reports_the_active_module_on_a_crash():
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    net = torch.nn.Sequential(torch.nn.Linear(2, 2), Boom())
    rec = Recorder(net).attach()
    with pytest.raises(RuntimeError):
        net(torch.randn(1, 2))
    assert rec.active_modules() == ["_root (Sequential)", "1 (Boom)"]


def test_msprobe_export_layout(tmp_path):
    from migrator.validation.parent.interop.msprobe_export import export_tree

    work = tmp_path / "work"
    run = _record(work / "s1" / "migrated" / "bf16" / "step0" / "rank0")
    assert run.exists()
    n = export_tree(str(work), str(tmp_path / "msprobe"))
    assert n == 1
    dest = next((tmp_path / "msprobe").rglob("dump.json")).parent
    assert dest.relative_to(tmp_path / "msprobe").parts[-2:] == ("step0", "rank0")
    doc = json.loads((dest / "dump.json").read_text())
    data_name = doc["data"]["Module.inner.fc.Linear.forward.0"]["output"][0]["data_name"]
    loaded = torch.load(dest / "dump_tensor_data" / data_name, weights_only=True)
    assert loaded.shape == (3, 4)
    assert Path(doc["dump_data_dir"]) == dest / "dump_tensor_data"
    assert (dest / "stack.json").exists() and (dest / "construct.json").exists()


def _result(*stages):
    return ValidationResult(original="/a", migrated="/b", stages=tuple(stages),
                            layers={"original": {"device_remap": "cuda->cpu"}, "migrated": {}})


def test_result_json_validates_against_the_schema_and_exit_codes():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    worst = ({"tensor": "x", "category": "forward", "metric": "ratio", "value": float("inf"), "threshold": 2.0,
              "status": "fail"},)
    ok = _result(StageResult("S0", "pass"), StageResult("S1", "warn"), StageResult("S2", "not_run", reason="x"),
                 StageResult("S3", "not_run"))
    failed = _result(StageResult("S0", "pass"), StageResult("S1", "fail", worst=worst, first_divergence="m (M)",
                                                            bench={"seconds": float("nan")}))
    errored = _result(StageResult("S1", "error", reason="cannot import"))
    for result, code in ((ok, 0), (failed, 1), (errored, 2)):
        doc = json.loads(json.dumps(result.to_json(), allow_nan=False))  # strict JSON: no Infinity/NaN
        jsonschema.validate(doc, schema)
        assert doc["exit_code"] == result.exit_code == code
    md = failed.markdown()
    assert "| S1 | parity-1card | **fail** |" in md and "first divergence" in md
    text = failed.text()
    assert "S1    parity-1card" in text and "device_remap" in text


def _stage_with_checks() -> ValidationResult:
    checks = (
        {"check": "fp32 logic (T32 vs G, rel_l2)", "status": "pass", "tensors": 9, "worst": 1.2e-6,
         "threshold": 1e-4, "metric": "rel_l2_fp32", "worst_tensor": "step0/Module.fc.Linear.forward.0.output.0"},
        {"check": "bf16 tolerance (ratio to golden)", "status": "fail", "tensors": 9, "worst": 7.5,
         "threshold": 2.0, "metric": "ratio", "worst_tensor": "step0/Module.attn.Attention.forward.0.output.0"},
    )
    worst = ({"tensor": "step0/Module.attn.Attention.forward.0.output.0", "category": "forward", "metric": "ratio",
              "value": 7.5, "threshold": 2.0, "status": "fail", "module": "attn (Attention)",
              "msprobe": {"cosine": 0.9912, "max_abs": 0.25, "max_rel": 3.1, "thousandth": 0.42}},)
    s1 = StageResult("S1", "fail", summary="9 tensors", checks=checks, worst=worst)
    return ValidationResult(original="a", migrated="b", stages=(s1,))


def test_text_names_metric_value_and_threshold_and_msprobe_metrics():
    result = _stage_with_checks()
    text = result.text()
    assert "fail: bf16 tolerance (ratio to golden): ratio 7.5 (threshold 2)" in text
    assert "fp32 logic" not in text  # passing checks only with --verbose
    assert "cosine 0.991, max_abs 0.25, max_rel 3.1, thousandth 0.42" in text
    assert "pass: fp32 logic (T32 vs G, rel_l2): rel_l2_fp32 1.2e-06 (threshold 0.0001)" in result.text(verbose=True)
    md = result.markdown()
    assert "| bf16 tolerance (ratio to golden) | fail | ratio | 7.5 | 2 |" in md
    assert "| 0.991 | 0.25 | 3.1 | 0.42 |" in md


def test_markdown_escapes_the_programs_error_text():
    """issue 38: `validate --markdown` wrote the program's error text as raw HTML."""
    hostile = "boom <script>alert(1)</script> <img src=x onerror=alert(2)> | @team"
    stages = (StageResult("S1", "error", summary="ran", reason=hostile, first_divergence="<b>m</b>`x"),
              StageResult("S2", "fail", reason=hostile, first_divergence="<img src=y onerror=z>"))
    md = ValidationResult(original="<i>a</i>", migrated="b", stages=stages).markdown()
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)  # raw HTML allowed, as on a forge
    assert all(tag not in html for tag in ("<script", "<img", "<b>", "<i>")), html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "\\| &#64;team" in md
