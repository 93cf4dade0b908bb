"""Script mode: ``migrate validate ORIGINAL --script train.py -- ARGS`` (a smoke check).

The unmodified training script runs K optimizer steps (``--curve-steps``) in four children: the
original as is (R) and with autocast forced off (G, the fp32 golden), the migrated copy as is (T16)
and with autocast off (T32). Global hooks do the rest, without touching the script:

* ``register_module_forward_(pre_)hook`` records every module call of step 0 (names from the first
  module called at top level, the "root");
* at the root's first forward the original side rounds the root's floating state to bf16 once and
  saves it; the other runs wait for it and load it in place (so the optimizer keeps its references):
  same weights everywhere, sha256 recorded; the root's first inputs are hashed on every side;
* ``register_optimizer_step_pre_hook`` records the (clipped, reduced) grads of step 0 and counts
  steps; ``Tensor.backward`` / ``torch.autograd.backward`` record the loss of every step; after K
  steps the run stops (``StopScript``, a BaseException the script's ``except Exception`` won't eat).

S1 compares step 0 with the usual verdicts and the parameter updates after the K steps; the
K-step loss curve (T16 vs R) is reported, warning above a 2e-3 relative difference, and never fails
the stage. S2 runs the script under torchrun at N ranks on both sides (:mod:`.script_parallel`);
S0/S3 need the protocol (a template is in the notes).
Each side runs in its own precision policy (an fp16 script runs fp16 on CPU too: neither the CUDA
remap nor the emulation substitutes bf16); the effective policy of R and T16 at step 0 (autocast
coverage and dtype, activation/param/grad dtypes, :mod:`.policy`) is recorded and compared.
Limits: G needs the script's bf16 policy to be autocast (a ``model.to(bfloat16)`` script has no
fp32 golden this way, and then R = G: the result says so); a script that never calls an
optimizer stops only at its own end.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

from ...facts import CheckRow
from ...records import ScriptJob, ScriptStatus, Side, other_tree
from ...verdict import Verdict
from ..comparison.compare import Comparison, Run, compare_runs
from ..results import StageResult
from ..script_parallel import CURVE_WARN, PROTOCOL_TEMPLATE, loss_diffs, run_script_s2
from ..stage_kit import StageContext, could_not_run, failure_text, numeric_stage

if TYPE_CHECKING:
    from ..launcher import Child, ChildResult

__all__ = ["PROTOCOL_TEMPLATE", "run", "run_s2"]

Policy = Literal["as_is", "fp32"]
# the four runs: (side, autocast as the script has it or forced off, whether it writes the shared weights)
RUNS: dict[str, tuple[Side, Policy, bool]] = {
    "R": ("original", "as_is", True), "G": ("original", "fp32", False),
    "T16": ("migrated", "as_is", False), "T32": ("migrated", "fp32", False)}
FAILURE_ORDER = ("R", "T16", "G", "T32")  # the run whose failure is reported when several failed


def run(ctx: StageContext) -> StageResult:
    """Script mode's S1: four children (two at a time), then step 0, the k-step updates and the loss curve."""
    opts = ctx.opts
    ctx.say(f"script mode: {opts.script} {' '.join(opts.script_args)} for {opts.curve_steps} steps, "
            "original (as is, fp32) and migrated (as is, fp32)")
    results = _run_children(ctx)
    ctx.layers = {"original": dict(results["R"].status.layers), "migrated": dict(results["T16"].status.layers)}
    ctx.note_imports({"original": results["R"].status, "migrated": results["T16"].status})
    ctx.manifest["weights_sha256"] = results["R"].status.weights_sha256
    failures = {k: failure for k, r in results.items() if (failure := r.failure()) is not None}
    if failures:
        key, failure = sorted(failures.items(), key=lambda kv: FAILURE_ORDER.index(kv[0]))[0]
        side = RUNS[key][0]
        # the original failing is no verdict on the migration either: it could not run (exit 2)
        verdict = Verdict.ERROR if failure.phase in ("entry", "harness") or side == "original" else Verdict.FAIL
        summary = (f"the {side} script failed ({key})" if verdict == Verdict.FAIL else
                   f"could not run: the original script fails ({key})" if failure.phase == "run" else
                   f"{could_not_run(side, failure)} ({key})")
        return StageResult("S1", verdict, summary=summary, reason=f"{side} script ({key}) {failure_text(failure)}")
    statuses = {k: r.status for k, r in results.items()}
    return _compare(ctx, statuses, seconds=sum(r.seconds for r in results.values()))


def run_s2(ctx: StageContext) -> StageResult:
    """Script mode's S2: the script under torchrun on both sides (:mod:`..script_parallel`)."""
    return run_script_s2(ctx.opts, ctx.original, ctx.migrated, ctx.work, ctx.progress)


def _run_children(ctx: StageContext) -> dict[str, ChildResult[ScriptStatus]]:
    from .. import launcher

    opts = ctx.opts
    assert opts.script is not None  # script mode runs only with --script
    env = launcher.child_env(opts.seed, opts.threads)
    results: dict[str, ChildResult[ScriptStatus]] = {}
    pending = list(RUNS.items())
    active: list[tuple[str, Child]] = []
    while pending or active:
        while pending and len(active) < 2:
            key, (side, policy, writes) = pending.pop(0)
            job = ScriptJob(side=side, policy=policy, writes_weights=writes,
                            tree=(tree := ctx.original if side == "original" else ctx.migrated), script=opts.script,
                            other_tree=other_tree(tree, ctx.original, ctx.migrated), pythonpath=opts.pythonpath,
                            args=tuple(opts.script_args), curve_steps=opts.curve_steps, seed=opts.seed,
                            threads=opts.threads, shared=ctx.shared, out=os.path.join(ctx.work, "script", key),
                            wait_timeout=opts.timeout, max_bytes=opts.max_bytes)
            active.append((key, launcher.start(job, key, env, opts.timeout)))
        key, child = active.pop(0)
        results[key] = launcher.wait(child, ScriptStatus)
    return results


def _compare(ctx: StageContext, st: dict[str, ScriptStatus], seconds: float) -> StageResult:
    opts = ctx.opts
    comparison = Comparison()
    golden, reference = Run.load(st["G"].step0), Run.load(st["R"].step0)
    assert golden is not None  # an ok script status always names its step-0 dump (script_hooks.run_script)
    same_policy = st["R"].losses[:1] == st["G"].losses[:1]  # autocast off changed nothing: R is no reference
    comparison.extend(compare_runs(golden, None if same_policy else reference, Run.load(st["T32"].step0),
                                   Run.load(st["T16"].step0), label="step0/", gate_unmatched=True))
    if all(st[k].train for k in RUNS):
        from ..comparison.compare_train import compare_training

        comparison.extend(compare_training(Run.load(st["G"].train), None if same_policy else
                                           Run.load(st["R"].train), Run.load(st["T32"].train),
                                           Run.load(st["T16"].train)))
    n = min(len(st["T16"].losses), len(st["R"].losses))
    diffs = loss_diffs(st["T16"].losses, st["R"].losses)
    worst = max(diffs) if diffs else 0.0
    curve_check: CheckRow = {
        "check": f"loss curve, {n} steps (smoke check, not a gate)",
        "status": Verdict.WARN if worst > CURVE_WARN else Verdict.PASS, "worst": worst,
        "message": f"max per-step relative loss difference T vs R {worst:.3g} (bound {CURVE_WARN})"}
    notes = [f"script mode: {opts.script} {' '.join(opts.script_args)}; weights shared at the root's first forward"]
    if st["T16"].input_sha256 != st["R"].input_sha256:
        notes.append("the migrated script's first inputs differ from the original's (input sha256)")
    if same_policy:
        notes.append("the script's bf16 policy is not autocast (forcing autocast off changed nothing): no fp32 golden")
    from ..comparison.policy import compare_policies
    from ..comparison.randomness import dropout_check

    policy_row = compare_policies(st["R"].precision, st["T16"].precision, "as-is")
    dropout_row, dropout_notes = dropout_check(st["R"].dropout, st["T16"].dropout, script=True)
    notes += dropout_notes
    cpu_row = cpu_path_row(st, os.path.join(ctx.original, opts.script or ""))
    rows = (curve_check,) + tuple(r for r in (policy_row, dropout_row, cpu_row) if r is not None)
    return numeric_stage("S1", comparison, bench={"seconds": round(seconds, 2)}, notes=notes,
                         extra_summary=f"loss curve max rel diff {worst:.3g}", extra_checks=rows)


CPU_PATH = "accelerator path (autocast regions entered)"


def cpu_path_row(st: dict[str, ScriptStatus], script: str) -> CheckRow | None:
    """A warning when the script has an autocast region and neither as-is run entered it: the program chose
    its CPU path (its arguments or environment select the CPU), so the precision path the hardware runs was
    never compared (issue 45: a bf16 -> fp16 slip inside it was invisible). Both sides are offered an
    accelerator (CUDA on the original, the NPU on the port, both emulated on the CPU)."""
    policies = [facts.policy if (facts := st[k].precision) is not None else None for k in ("R", "T16")]
    if any(p is None or p.autocast_on for p in policies):
        return None
    try:
        with open(script, encoding="utf-8", errors="replace") as fh:
            if "autocast" not in fh.read():
                return None
    except OSError:
        return None
    return CheckRow(check=CPU_PATH, status=Verdict.WARN,
                    message="autocast never entered on either side: the program chose its CPU path (its arguments "
                            "or environment select the CPU), so the precision path the hardware runs was not "
                            "compared; run it with its accelerator device (CUDA and the NPU are emulated on the CPU)")
