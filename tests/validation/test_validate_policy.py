"""Each side's precision policy as data, and the k-step training comparison (unit level, no child processes)."""

from __future__ import annotations

import pytest

from migrator.validation.parent.policy import compare_policies, describe


def _facts(autocast_on=28, forwards=28, dtype="bfloat16", acts="bfloat16", params="float32", grads="float32",
           scaler=None):
    return {"policy": {"module_forwards": forwards, "autocast_on": autocast_on,
                       "autocast_dtype": dtype if autocast_on else None, "activation_dtypes": {acts: forwards},
                       "param_dtypes": {params: 10}, "grad_dtypes": {grads: 10}},
            "scaler": scaler}


SCALER = {"class": "GradScaler", "enabled": True, "init_scale": 65536.0}


def test_same_policy_passes_and_describes_both_sides():
    row = compare_policies(_facts(scaler=SCALER), _facts(scaler=SCALER), "bf16")
    assert row["status"] == "pass" and row["worst"] == 0
    assert "autocast bfloat16 at 28/28" in row["message"] and "GradScaler on (scale 65536)" in row["message"]


@pytest.mark.parametrize("migrated, expected", [
    (_facts(autocast_on=2, acts="float32", scaler=SCALER), "autocast on at 2/28 module forwards (migrated) vs 28/28"),
    (_facts(dtype="float16", acts="float16", scaler=SCALER), "autocast dtype float16 (migrated) vs bfloat16 (original)"),
    (_facts(params="bfloat16", scaler=SCALER), "params mostly bfloat16 (migrated) vs float32 (original)"),
    (_facts(grads="bfloat16", scaler=SCALER), "grads mostly bfloat16 (migrated) vs float32 (original)"),
    (_facts(scaler=None), "GradScaler only on the original side"),
    (_facts(scaler=dict(SCALER, enabled=False)), "GradScaler off (migrated) vs on (original)"),
    (_facts(scaler=dict(SCALER, init_scale=1.0)), "GradScaler scale 1.0 (migrated) vs 65536.0 (original)"),
])
def test_every_policy_difference_warns_naming_both_values(migrated, expected):
    row = compare_policies(_facts(scaler=SCALER), migrated, "bf16")
    assert row["status"] == "warn" and expected in row["message"], row
    assert row["original"] == describe(_facts(scaler=SCALER)) and row["migrated"] == describe(migrated)


def test_no_facts_on_one_side_gives_no_row():
    assert compare_policies(None, _facts(), "fp32") is None


def test_training_updates_fp32_logic_and_bf16_ratio():
    torch = pytest.importorskip("torch")
    from migrator.validation.parent.compare import Run
    from migrator.validation.parent.compare_train import compare_training

    def run(delta):
        event = {"name": "Train.after3.w", "match": "train.after3.w", "kind": "training", "module": "_root",
                 "cls": "AdamW", "scope": "training", "shape": list(delta.shape), "dtype": "torch.float32",
                 "stats_only": False}
        return Run({"migrate": {"events": [event]}}, {"Train.after3.w": delta})

    g = torch.linspace(-1, 1, 64) * 3e-4
    noise = torch.sin(torch.arange(64.0)) * 3e-6  # a bf16-sized error of the reference (1 %)
    same = compare_training(run(g), run(g + noise), run(g.clone()), run(g + noise))
    assert [v.status for v in same.verdicts] == ["pass"]
    lost_unscale = compare_training(run(g), run(g + noise), run(g * 0.8), run(g * 0.8))  # updates shrunk
    (v,) = lost_unscale.verdicts
    assert v.status == "fail" and v.check("train_rel_l2_fp32").status == "fail"
    assert v.check("train_ratio").status == "fail"
    bf16_only = compare_training(run(g), run(g + noise), run(g.clone()), run(g + 20 * noise))
    (v,) = bf16_only.verdicts
    assert v.check("train_rel_l2_fp32").status == "pass" and v.check("train_ratio").status == "fail"
