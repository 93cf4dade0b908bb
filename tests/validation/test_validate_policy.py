"""Each side's precision policy as data, and the k-step training comparison (unit level, no child processes)."""

from __future__ import annotations

import pytest

from migrator.validation import records
from migrator.validation.facts import PrecisionFacts
from migrator.validation.parent.comparison import policy


def _read(facts):
    """The facts as the child writes them, read as the parent reads a status (strictly)."""
    return None if facts is None else records.from_json(facts, PrecisionFacts, "status.json")


def compare_policies(original, migrated, label):
    return policy.compare_policies(_read(original), _read(migrated), label)


def describe(facts):
    return policy.describe(_read(facts))


def _facts(autocast_on=28, forwards=28, dtype="bfloat16", acts="bfloat16", params="float32", grads="float32",
           scaler=None):
    return {"policy": {"module_forwards": forwards, "autocast_on": autocast_on,
                       "autocast_dtype": dtype if autocast_on else None, "activation_dtypes": {acts: forwards},
                       "param_dtypes": {params: 10}, "grad_dtypes": {grads: 10}},
            "scaler": scaler}


SCALER = {"class": "GradScaler", "enabled": True, "init_scale": 65536.0, "growth_factor": 2.0,
          "growth_interval": 2000.0, "backoff_factor": 0.5, "dynamic": True, "trajectory": [65536.0] * 3,
          "skipped_steps": 0}


def test_same_policy_passes_and_describes_both_sides():
    row = compare_policies(_facts(scaler=SCALER), _facts(scaler=SCALER), "bf16")
    assert row["status"] == "pass" and row["worst"] == 0
    assert "autocast bfloat16 at 28/28" in row["message"]
    assert "GradScaler on (init_scale 65536, growth_factor 2, growth_interval 2000, backoff_factor 0.5)" in row["message"]


@pytest.mark.parametrize("migrated, expected", [
    (_facts(autocast_on=2, acts="float32", scaler=SCALER), "autocast on at 2/28 module forwards (migrated) vs 28/28"),
    (_facts(params="bfloat16", scaler=SCALER), "params (master weights) mostly bfloat16 (migrated) vs float32 (original)"),
    (_facts(grads="bfloat16", scaler=SCALER), "grads mostly bfloat16 (migrated) vs float32 (original)"),
])
def test_a_policy_difference_the_numerics_judge_warns_naming_both_values(migrated, expected):
    row = compare_policies(_facts(scaler=SCALER), migrated, "bf16")
    assert row["status"] == "warn" and expected in row["message"], row
    assert row["original"] == describe(_facts(scaler=SCALER)) and row["migrated"] == describe(migrated)


@pytest.mark.parametrize("migrated, expected", [
    (_facts(dtype="float16", acts="float16", scaler=SCALER), "autocast dtype float16 (migrated) vs bfloat16 (original)"),
    (_facts(scaler=None), "GradScaler lost: no GradScaler (migrated)"),
    (_facts(scaler=dict(SCALER, enabled=False)), "GradScaler lost: GradScaler off (migrated)"),
    (_facts(scaler=dict(SCALER, init_scale=1.0)), "GradScaler init_scale 1 (migrated) vs 65536 (original)"),
    (_facts(scaler=dict(SCALER, growth_interval=1000.0)), "GradScaler growth_interval 1000 (migrated) vs 2000"),
    (_facts(scaler=dict(SCALER, growth_factor=4.0)), "GradScaler growth_factor 4 (migrated) vs 2 (original)"),
    (_facts(scaler=dict(SCALER, backoff_factor=0.25)), "GradScaler backoff_factor 0.25 (migrated) vs 0.5"),
    (_facts(scaler=dict(SCALER, dynamic=False)), "GradScaler dynamic False (migrated) vs True (original)"),
    (_facts(scaler=dict(SCALER, skipped_steps=1, trajectory=[32768.0] * 3)), "GradScaler skipped steps 1 (migrated) vs 0"),
    (_facts(scaler=dict(SCALER, trajectory=[65536.0, 131072.0, 131072.0])), "GradScaler scale per step"),
])
def test_a_changed_16_bit_format_or_scaler_fails_naming_the_setting(migrated, expected):
    row = compare_policies(_facts(scaler=SCALER), migrated, "bf16")
    assert row["status"] == "fail" and expected in row["message"], row


def test_fp16_autocast_for_bf16_without_a_scaler_fails_naming_both_settings():
    row = compare_policies(_facts(scaler=None), _facts(dtype="float16", acts="float16", scaler=None), "as-is")
    assert row["status"] == "fail"
    assert "autocast dtype float16 (migrated) vs bfloat16 (original)" in row["message"]
    assert "fp16 autocast without a GradScaler" in row["message"]


def test_one_region_in_another_16_bit_format_fails_naming_the_region():
    regions = {"_root": "bfloat16", "blocks.0.attn": "bfloat16", "blocks.0.mlp": "bfloat16"}
    original, migrated = _facts(scaler=None), _facts(scaler=None)
    original["policy"]["autocast_regions"] = regions
    migrated["policy"]["autocast_regions"] = dict(regions, **{"blocks.0.attn": "float16"})
    row = compare_policies(original, migrated, "bf16")
    assert row["status"] == "fail" and "blocks.0.attn: autocast float16 (migrated) vs bfloat16 (original)" in row["message"]
    migrated["policy"]["autocast_regions"] = dict(regions, **{"blocks.0.attn": "off"})
    assert compare_policies(original, migrated, "bf16")["status"] == "warn"


def test_the_scaler_trajectory_is_recorded_per_step():
    torch = pytest.importorskip("torch")
    from migrator.validation.child.policy_probe import ScalerTrajectory

    scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    traj = ScalerTrajectory()
    for value in (1.0, float("inf"), 1.0):
        before = float(scaler.get_scale())
        scaler.scale((w * value).sum()).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        traj.after_update(scaler, before)
    facts = traj.facts()
    assert facts["trajectory"] == [16.0, 8.0, 16.0] and facts["skipped_steps"] == 1
    assert facts["init_scale"] == 8.0 and facts["growth_interval"] == 1.0 and facts["dynamic"] is True


def test_no_facts_on_one_side_gives_no_row():
    assert compare_policies(None, _facts(), "fp32") is None


def test_training_updates_fp32_logic_and_bf16_ratio():
    torch = pytest.importorskip("torch")
    from migrator.validation.parent.comparison.compare import Run
    from migrator.validation.parent.comparison.compare_train import compare_training

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


def test_a_zero_golden_update_compares_the_two_bf16_sides_not_infinity():
    """A conv bias before GroupNorm: the fp32 update is exactly 0, the bf16 sides move by rounding noise."""
    torch = pytest.importorskip("torch")
    from migrator.validation.parent.comparison.compare_train import compare_training

    run = _training_run
    w = torch.linspace(-1, 1, 64) * 3e-4
    zero = torch.zeros(16)
    noise = torch.sin(torch.arange(16.0)) * 3e-6
    same = compare_training(run(w=w, bias=zero), run(w=w, bias=noise), run(w=w, bias=zero.clone()),
                            run(w=w, bias=noise.clone()))
    assert [v.status for v in same.verdicts] == ["pass", "pass"], [v.checks for v in same.verdicts]
    moved = compare_training(run(w=w, bias=zero), run(w=w, bias=noise), run(w=w, bias=zero + 3e-4),
                             run(w=w, bias=zero + 3e-4))  # the port really trains a bias the original does not
    bias = next(v for v in moved.verdicts if v.name.endswith("bias"))
    assert bias.status == "fail" and bias.check("train_ratio").status == "fail"


def test_an_update_that_fp32_rounding_alone_moves_is_judged_against_that_noise():
    """A LayerNorm bias whose Adam update is noise: the original's own nudged run moves it by 5e-3, so a
    refactor's 1.4e-3 is within its noise floor; a parameter with a quiet floor keeps the 1e-4/1e-3 bounds."""
    torch = pytest.importorskip("torch")
    from migrator.validation.parent.comparison.compare_train import compare_training

    run = _training_run
    g = torch.linspace(-1, 1, 64) * 3e-4
    wobble = torch.cos(torch.arange(64.0)) * 3e-4 * torch.linspace(-1, 1, 64).norm() / torch.cos(torch.arange(64.0)).norm()
    golden, nudged = run(bias=g, w=g), run(bias=g + 5e-3 * wobble, w=g + 1e-7 * wobble)
    port = run(bias=g + 1.4e-3 * wobble, w=g + 1.4e-3 * wobble)
    without = compare_training(golden, None, port, None)
    assert [v.check("train_rel_l2_fp32").status for v in without.verdicts] == ["fail", "fail"]
    floor = compare_training(golden, None, port, None, golden_noise=nudged)
    bias, w = floor.verdicts
    assert bias.check("train_rel_l2_fp32").status == "pass" and w.check("train_rel_l2_fp32").status == "fail"


def _training_run(**deltas):
    """A recorded k-step training run holding each named parameter's update."""
    from migrator.validation.parent.comparison.compare import Run

    events = [{"name": f"Train.after3.{n}", "match": f"train.after3.{n}", "kind": "training", "module": "_root",
               "cls": "AdamW", "scope": "training", "shape": list(d.shape), "dtype": "torch.float32",
               "stats_only": False} for n, d in deltas.items()]
    return Run({"migrate": {"events": events}}, {f"Train.after3.{n}": d for n, d in deltas.items()})
