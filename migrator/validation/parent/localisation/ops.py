"""First divergent op, with its arguments (parent side): what msprobe users do by hand.

When S1 fails inside a module (or in the loss), that step is rerun on both sides with an op trace
inside the module (:mod:`.optrace`, one child per side, only on failure). The first divergent op is
found by data flow (:mod:`.dataflow`): the op whose inputs agree with the original and whose output
does not (fp32: rel_l2 > 1e-4; bf16 policy: > 1e-2), or a buffer that differs after model build;
its effective semantic arguments are diffed against the original op of the same kind
(``flash_attn_func`` ≡ ``npu_fusion_attention`` ≡ SDPA: attention; apex ``FusedRMSNorm`` ≡
``npu_rms_norm``: rms_norm; ...; :mod:`.op_semantics`), e.g.
``scale: 1 (npu default) vs 0.25 (flash_attn default 1/√16)``, or against the attributes of the
module a fused op replaced. A failure localised to the
optimizer or the training steps gets the diff of the two optimizers' hyper-parameters instead.
"""

from __future__ import annotations

import json
import os
from typing import TypedDict

from ... import op_semantics as S
from ...records import OptimizerRun, Side, SideStatus, TraceJob, TraceStatus, other_tree
from ...verdict import Verdict
from ..comparison.compare import TensorVerdict
from ..options import Options
from .dataflow import DivergentOp, Trace
from .first_failure import localise

LOSS_TARGET = "loss_fn"  # the op trace's target for a divergence in the loss (child.optrace.LOSS_TARGET)
FP32_METRICS = ("rel_l2_fp32", "mismatch_fp32", "grad_missing", "norm_rel_fp32", "train_rel_l2_fp32")
DIVERGES = {"fp32": 1e-4, "bf16": 1e-2}


class DivergenceTarget(TypedDict, total=False):
    """Where S1's divergence sits: the optimizer (``optimizer``, after k ``training`` steps or alone), or a
    ``module`` at S1 ``step`` under ``policy`` (fp32 / bf16) to trace op by op."""

    optimizer: bool
    training: bool
    module: str
    step: int
    policy: str


def target_of(verdicts: list[TensorVerdict]) -> DivergenceTarget | None:
    """The localised tensor's module, S1 step and policy; None when it is not inside a module."""
    loc = localise(verdicts)
    if loc is None:
        return None
    v = next((x for x in verdicts if f"{x.label}{x.name}" == loc.tensor), None)
    if v is None:
        return None
    if v.category in ("optimizer", "training"):
        return {"optimizer": True, "training": v.category == "training"}
    module = LOSS_TARGET if v.category == "loss" else v.scope
    if not v.label.startswith("step") or module is None:
        return None
    return {"module": module,
            "step": int(v.label.split("/")[0].removeprefix("step")),
            "policy": "fp32" if loc.metric in FP32_METRICS else "bf16"}


def run_traces(opts: Options, original: str, migrated: str, work: str, shared: str,
               target: DivergenceTarget) -> str | tuple[str, ...]:
    """Both sides' op traces (two children at once); returns (original dir, migrated dir) or a reason."""
    from .. import launcher

    env = launcher.child_env(opts.seed, opts.threads)
    children = []
    sides: tuple[tuple[Side, str], ...] = (("original", original), ("migrated", migrated))
    for side, tree in sides:
        job = TraceJob(side=side, tree=tree, other_tree=other_tree(tree, original, migrated), entry=opts.entry,
                       pythonpath=opts.pythonpath, seed=opts.seed, threads=opts.threads, shared=shared,
                       step=target["step"], policy=target["policy"], bf16_policy=opts.bf16_policy,
                       module=target["module"], out=os.path.join(work, "optrace", side))
        children.append(launcher.start(job, f"optrace-{side}", env, opts.timeout))
    results = [launcher.wait(c, TraceStatus) for c in children]
    for r in results:
        failure = r.failure()
        if failure is not None:
            return f"op trace on the {r.name.removeprefix('optrace-')} side failed: " \
                   f"{failure.error.summary if failure.error else 'no status'}"
    return tuple(os.path.join(work, "optrace", s) for s in ("original", "migrated"))


def _load(run_dir: str) -> Trace:
    from safetensors.torch import load_file

    with open(os.path.join(run_dir, "ops.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    return Trace(doc, load_file(os.path.join(run_dir, "ops.safetensors")))


def first_divergent_op(original_dir: str, migrated_dir: str, policy: str) -> DivergentOp:
    """Walk back along the migrated data flow to the first op whose inputs agree with the original
    and whose output does not (:mod:`.dataflow`); a buffer that differs after model build, or an op
    fed by one, is named as such."""
    from . import dataflow

    return dataflow.locate(_load(original_dir), _load(migrated_dir), DIVERGES[policy], policy)


def describe(found: DivergentOp, module: str) -> str:
    if not found.get("migrated_op"):
        return f"inside {module}: {found.get('note', '')}"
    if found.get("buffer"):
        return f"inside {module}: " + "; ".join(found["argument_diff"])
    shape = "" if found["shapes"][0] == found["shapes"][1] else f", shapes {found['shapes'][1]} vs {found['shapes'][0]}"
    text = (f"first divergent op inside {module}: {found['migrated_op']} (migrated) vs {found['original_op']} "
            f"(original), op #{found['index']}, {found['policy']} rel_l2 {found['rel_l2']:.3g}{shape}")
    said = [found["cause"]] if found.get("cause") else []
    if said or found["argument_diff"]:
        text += "; " + "; ".join(said + found["argument_diff"])
    return text


def message(found: DivergentOp) -> str:
    """The check row's message: the cause in the user's words first, then the argument diff."""
    said = [found["cause"]] if found.get("cause") else []
    return "; ".join(said + found.get("argument_diff", [])) or "same semantic arguments"


def optimizer_diff(opt_o: OptimizerRun | None, opt_m: OptimizerRun | None) -> str | None:
    """``FusedAdam (original) vs AdamW (migrated): betas: (0.9, 0.999) (AdamW) vs (0.9, 0.95) (FusedAdam)``."""
    if not opt_o or not opt_m or not opt_o.semantic or not opt_m.semantic:
        return None
    lines = S.diff(S.from_json(opt_o.semantic), S.from_json(opt_m.semantic), (opt_o.name, opt_m.name))
    head = f"{opt_m.name} (migrated) vs {opt_o.name} (original)"
    return f"{head}: " + ("; ".join(lines) if lines else "same lr, betas, eps, weight decay and adam_w_mode")


def optimizer_cause(target: DivergenceTarget, orig_status: SideStatus, mig_status: SideStatus) -> str | None:
    """For a divergence after k training steps, the step phase whose effect differs
    (:mod:`.phases`); else (and for the optimizer in isolation) the optimizers' argument diff."""
    from ..comparison import phases

    if target.get("training"):
        found = phases.cause(orig_status.train.get("fp32"), mig_status.train.get("fp32"))
        if found:
            return found
    return optimizer_diff(orig_status.optimizer, mig_status.optimizer)


def failing(verdicts: list[TensorVerdict]) -> bool:
    return any(v.status == Verdict.FAIL for v in verdicts)
