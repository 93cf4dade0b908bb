"""The correct migrations pass every stage; S0 at the real world size; script mode; report embedding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import run_cli  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "migrator" / "ground" / "schema" / "validation.schema.json"


def _schema_check(doc):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))


@pytest.mark.slow
def test_cli_gpt_migrates_then_passes_every_stage(tmp_path):
    out, md, probe = tmp_path / "v.json", tmp_path / "v.md", tmp_path / "msprobe"
    proc = run_cli("validate", "samples/gpt", "-o", str(out), "--markdown", str(md), "--export-msprobe", str(probe))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ("S0    plan          pass", "S1    parity-1card  pass", "S2    parity-dp     pass",
                 "S3    parity-mp     not_run"):
        assert line in proc.stdout, proc.stdout
    assert "npu_emulation" in proc.stdout and "device_remap" in proc.stdout  # the layers are named
    doc = json.loads(out.read_text())
    _schema_check(doc)
    s1 = doc["stages"][1]
    assert {"fp32 logic (T32 vs G, rel_l2)", "bf16 tolerance (ratio to golden)"} <= {c["check"] for c in s1["checks"]}
    assert doc["manifest"]["weights_sha256"] and doc["manifest"]["batch_sha256"]["0"]
    assert doc["manifest"]["determinism"]["migrated"]["deterministic_algorithms"] is True
    assert doc["layers"]["migrated"]["npu_emulation"]
    variants = doc["stages"][2]["summary"]
    assert "ddp x2" in variants and "fsdp2" not in variants  # gpt's parallelize declares "dp" only
    assert any("fsdp2: skipped (the program declares no 'fsdp' plan" in n for n in doc["stages"][2]["notes"])
    assert md.read_text().startswith("### `migrate validate`")
    assert list(probe.glob("s1-migrated-bf16/step0/rank0/dump_tensor_data/*.pt"))
    assert list(probe.glob("s2-ddp-fp32/step0/rank1/dump.json"))
    report = run_cli("report", "samples/gpt", "--validation", str(out), "--format", "md")
    assert report.returncode == 0, report.stderr
    assert "parity-1card" in report.stdout and "parity-dp" in report.stdout


@pytest.mark.slow
def test_moe_passes_plan_parity_and_tensor_expert_parallel(migrated_moe, moe_reference):
    from migrator import api

    result = api.validate(REPO / "samples" / "moe", migrated=str(migrated_moe), compare=str(moe_reference))
    assert result.exit_code == 0, result.text()
    assert [result.stage(s).status for s in ("S0", "S1", "S2")] == ["pass", "pass", "not_run"]
    s3 = result.stage("S3")
    assert s3.status in ("pass", "warn") and "tp x2" in s3.summary and "ep x2" in s3.summary
    routing = [c for c in s3.checks if c["check"] == "routing (exact)"]
    assert routing and routing[0]["tensors"] > 0  # topk indices and per-expert counts compared
    assert any("ep/" in u for u in s3.unmatched) or any("tp/" in u for u in s3.unmatched)  # sharded activations
    s0 = result.stage("S0")
    assert any("every collective issued" in c["check"] and "all_to_all_single" in c["message"] for c in s0.checks)


@pytest.mark.slow
def test_s0_plan_at_384_ranks(migrated_gpt):
    from migrator import api

    result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), stages=("S0",), plan_world_size=384)
    s0 = result.stage("S0")
    assert s0.status == "pass", result.text()
    assert "world 384" in s0.summary and s0.bench["world_size"] == 384
    assert any("21 DTensor" in c["message"] for c in s0.checks)  # FSDP2 shards every parameter


@pytest.mark.slow
def test_s0_fails_when_heads_do_not_divide(migrated_moe):
    from migrator import api

    result = api.validate(REPO / "samples" / "moe", migrated=str(migrated_moe), stages=("S0", "S1"),
                          plan_world_size=6, plan_tp=3)
    s0 = result.stage("S0")
    assert s0.status == "fail" and "heads must divide" in s0.reason
    assert result.stage("S1").status == "not_run" and result.exit_code == 1


@pytest.mark.slow
def test_script_mode_runs_the_unmodified_training_script(migrated_gpt):
    from migrator import api

    result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), script="train.py",
                          script_args=("--tiny",), curve_steps=3)
    assert result.exit_code == 0, result.text()
    s1 = result.stage("S1")
    assert s1.status in ("pass", "warn")
    curve = [c for c in s1.checks if c["check"].startswith("loss curve")]
    assert curve and curve[0]["worst"] < 2e-3
    s2 = result.stage("S2")  # the same script under torchrun at 2 ranks, original vs migrated
    assert s2.status == "pass" and "script x2 (torchrun)" in s2.summary, result.text()
    assert any(c["check"].startswith("params after k training steps, fp32") for c in s2.checks)
    assert result.stage("S3").status == "not_run" and "protocol" in result.stage("S3").reason
    assert any("def make_model(dropout=0.0)" in n for n in result.notes)  # the one-screen template


@pytest.mark.slow
def test_script_mode_runs_an_fp16_script_in_fp16_on_both_sides(migrated_gpt):
    """Each side in its own policy: the original's torch.cuda.amp.autocast(float16) is not run as bf16."""
    from migrator import api

    result = api.validate(REPO / "samples" / "gpt", migrated=str(migrated_gpt), script="train.py",
                          script_args=("--tiny", "--dtype", "float16"), curve_steps=2, stages=("S1",))
    s1 = result.stage("S1")
    assert s1.status in ("pass", "warn"), result.text()
    (row,) = [c for c in s1.checks if c["check"].startswith("precision policy per side")]
    assert row["status"] == "pass"
    assert "autocast float16" in row["original"] and "autocast float16" in row["migrated"], row
