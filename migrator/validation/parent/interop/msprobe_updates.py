"""The optimizer's updates of parameters in an msprobe dump, judged against the size of the update.

msprobe records the optimizer step as API calls in the `optimizer` scope of construct.json: for AdamW on
CPU `param.mul_(1 - lr * wd)` and `param.addcdiv_(exp_avg, denom, value=-step_size)` per parameter, with
the parameter as `input_args.0` (saved before the call, `requires_grad` true even under the step's no_grad)
and the new value as `output.0`. Adam's first step is about lr·sign(g) (numerics.md 2(b)), so fp32 noise in
a gradient near 0 moves the update by up to lr: on a parameter near 0 that is a large share of the new
value, and the forward bound (rel_l2 ≤ 1e-5 to the parameter) fails a correct port (swin's fused attention:
1.3e-4 on a relative-position bias table). The new value is instead judged like the k-step training check's
updates (`compare_train`): the error of the new value against the size of the golden update,
`rel_l2(new_T − old_G, new_G − old_G)` = ‖new_T − new_G‖ / ‖new_G − old_G‖ (`compare_train.error_against`,
a zero update measured in units of the dump's typical update), with `compare_train.TRAIN_FP32`. The old
value is the record's own input slot and keeps the forward bound, so a parameter that differs before the
step (a decay applied that the original does not apply) still fails there or at the new value.

Only the tensor task (a statistics dump has no size of the update, only the norms of the old and new
value: its records keep the norm check) and fp32 / fp64 parameters; `_foreach_*` steps (lists of
parameters) keep the default bounds."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from ...verdict import Verdict
from ..comparison.thresholds import Bounds, Thresholds
from .msprobe_dumps import Record, Slot

OPTIMIZER_SCOPE = "optimizer"  # construct.json's parent of every record of `optimizer.step()` (msprobe 26)
_IN_PLACE_DUNDERS = ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__")
_FP32 = ("torch.float32", "torch.float64")


def _slot(record: Record, path: str) -> Slot | None:
    return next((s for s in record.slots if s.path == path and s.kind == "tensor"), None)


def is_parameter_update(record: Record) -> bool:
    """An in-place op of the optimizer step on a parameter (its `self` requires grad)."""
    name = record.api.rsplit(".", 1)[-1]
    in_place = (name.endswith("_") and not name.endswith("__")) or name in _IN_PLACE_DUNDERS
    own = _slot(record, "input_args.0")
    return (record.scope == OPTIMIZER_SCOPE and record.direction == "forward" and in_place
            and own is not None and own.requires_grad is True)


class UpdateJudge:
    """Grades the `output.0` of parameter updates of one golden dump (the typical update computed once)."""

    def __init__(self, golden: Iterable[Record], th: Thresholds, cross_device: bool,
                 load: Callable[[str], Any], previous: Iterable[Record] = ()) -> None:
        from ..comparison.compare_train import TRAIN_FP32

        golden = list(golden)
        self._golden = [r for r in golden if is_parameter_update(r)]
        # a later step's module records: each parameter slot beside its value one step before (the golden's)
        before = _module_parameters(previous)
        self._steps = {key: (before[key], slot) for key, slot in _module_parameters(golden).items() if key in before}
        self._bounds: Bounds = TRAIN_FP32.scaled(th.fp32.cross_device_factor) if cross_device else TRAIN_FP32
        self._load = load
        self._scale: float | None = None

    def _typical(self) -> float:
        if self._scale is None:
            from ..comparison.compare_train import typical_scale

            deltas = [d for r in self._golden if (d := self._delta(r)) is not None]
            deltas += [d for old, new in self._steps.values() if (d := self._difference(new, old)) is not None]
            self._scale = typical_scale(deltas)
        return self._scale

    def _difference(self, new: Slot, old: Slot) -> Any:
        if not (new.data_file and old.data_file) or new.shape != old.shape:
            return None
        return self._load(new.data_file).double() - self._load(old.data_file).double()

    def parameter_verdict(self, key: str, target: Slot) -> tuple[Verdict, str, float, float, str] | None:
        """A module record's `parameters.*` slot at a step after the first: its value is the golden's of one step
        before plus one optimizer update, so it is judged against that update's size, like `verdict`."""
        found = self._steps.get((key, target.path))
        if found is None:
            return None
        old, new = found
        judged = self._judge(target, new, old, "since the step before")
        if judged is None or judged[0] == Verdict.PASS:
            return judged
        # a difference proportional to the parameter is no rounding noise: it fails however small (a decay)
        fit = self._decay_fit(target, new, old)
        return (Verdict.FAIL if fit else judged[0], *judged[1:4], judged[4] + fit)

    def after_update(self, key: str, path: str) -> bool:
        """Whether this module record's parameter slot is at a step after the first (one update later)."""
        return (key, path) in self._steps

    def _decay_fit(self, target: Slot, new: Slot, old: Slot) -> str:
        """"; ... a weight_decay ..." when the two updates differ by a multiple of the parameter before the
        step (AdamW's decoupled decay `p *= 1 − lr × weight_decay` one side applies), else ""."""
        before = self._load(old.data_file).double()
        difference = self._load(target.data_file).double() - self._load(new.data_file).double()
        square = float((before * before).sum())
        if square == 0.0 or float(difference.norm()) == 0.0:
            return ""
        factor = float((difference * before).sum()) / square
        left = float((difference - factor * before).norm()) / float(difference.norm())
        if left > 0.1:
            return ""
        side, other = ("port", "original") if factor < 0 else ("original", "port")
        return (f"; the two updates differ by {factor:.3g} × the parameter before the step ({left:.0%} left over): "
                f"a weight_decay (lr × weight_decay = {abs(factor):.3g}) the {side}'s optimizer applies to it and "
                f"the {other}'s does not")

    def _delta(self, record: Record) -> Any:
        new, old = _slot(record, "output.0"), _slot(record, "input_args.0")
        return self._difference(new, old) if new is not None and old is not None else None

    def verdict(self, target: Record, golden: Record) -> tuple[Verdict, str, float, float, str] | None:
        """(status, metric, value, threshold, detail) for the target's `output.0`, or None where the default
        bound applies (not an update, statistics task, another dtype or shape)."""
        if not (is_parameter_update(target) and is_parameter_update(golden)):
            return None
        t_new, g_new, g_old = _slot(target, "output.0"), _slot(golden, "output.0"), _slot(golden, "input_args.0")
        if t_new is None or g_new is None or g_old is None:
            return None
        return self._judge(t_new, g_new, g_old, "")

    def _judge(self, t_new: Slot, g_new: Slot, g_old: Slot, since: str) -> tuple[Verdict, str, float, float, str] | None:
        if not (t_new.data_file and g_new.data_file and g_old.data_file):
            return None
        if t_new.dtype not in _FP32 or (t_new.dtype, t_new.shape) != (g_new.dtype, g_new.shape) or g_new.shape != g_old.shape:
            return None
        from ..comparison.compare_train import error_against

        old = self._load(g_old.data_file).double()
        delta = self._load(g_new.data_file).double() - old
        moved = self._load(t_new.data_file).double() - old
        zero = not (float(delta.norm()) > 0.0 and math.isfinite(float(delta.norm())))
        value = error_against(delta, self._typical() if zero else 0.0)(moved)
        size = f"{float(delta.norm()):.3g}" if not zero else "0 (in units of a typical update)"
        detail = f"error of the new value against the update's size ‖new − old‖{' ' + since if since else ''} = {size}"
        return self._bounds.grade(value), "update_rel_l2", value, self._bounds.pass_at, detail


def _module_parameters(records: Iterable[Record]) -> dict[tuple[str, str], Slot]:
    """{(module record key, `parameters.<name>`): slot} of the forward module records."""
    return {(r.key, s.path): s for r in records if r.key.startswith("Module.") and r.direction == "forward"
            for s in r.slots if s.path.startswith("parameters.") and s.kind == "tensor"}


def _fingerprint(slot: Slot | None) -> tuple | None:
    stats = tuple(value for _, value in slot.stats) if slot is not None else ()
    return (slot.shape, stats) if slot is not None and stats and None not in stats else None


def _read_with_grad(record: Record) -> list[tuple]:
    return [fp for s in record.slots if s.kind == "tensor" and s.requires_grad and s.path.startswith("input_args.")
            and (fp := _fingerprint(s)) is not None]


def parameter_names(records: Iterable[Record]) -> dict[tuple, str]:
    """{fingerprint (shape, statistics): parameter name} from the module records' `parameters.*` slots, followed
    through the optimizer's updates (the decayed parameter `addcdiv_` reads keeps its name)."""
    ordered = sorted(records, key=lambda r: r.order)
    names: dict[tuple, str] = {}
    for record in ordered:
        if record.key.startswith("Module.") and record.direction == "forward":
            prefix = ".".join(record.key.removeprefix("Module.").split(".")[:-3])
            for slot in record.slots:
                if slot.path.startswith("parameters.") and (fp := _fingerprint(slot)) is not None:
                    names.setdefault(fp, f"{prefix}.{slot.path.removeprefix('parameters.')}".lstrip("."))
    for record in ordered:  # no module records (level L1): the parameter as the first call that reads it
        if record.direction == "forward" and record.scope != OPTIMIZER_SCOPE and record.user_line:
            for fp in _read_with_grad(record):
                names.setdefault(fp, f"the parameter {record.api} reads at {record.user_line}")
    for record in ordered:
        if is_parameter_update(record) and (name := names.get(_fingerprint(_slot(record, "input_args.0")) or ())):
            if (fp := _fingerprint(_slot(record, "output.0"))) is not None:
                names.setdefault(fp, name)
    return names


def unnamed_updated(records: Iterable[Record], names: dict[tuple, str]) -> list[tuple]:
    """Fingerprints of the parameters the optimizer updates that `names` has no name for (read by no
    recorded op, at level L1)."""
    found = [fp for r in records if is_parameter_update(r)
             and (fp := _fingerprint(_slot(r, "input_args.0"))) is not None and fp not in names]
    return list(dict.fromkeys(found))


def named_slots(record: Record, names: dict[tuple, str]) -> tuple[tuple[str, str], ...]:
    """(slot, parameter) for the tensor arguments of an optimizer record that are parameters."""
    return tuple((s.path, names[fp]) for s in record.slots
                 if s.kind == "tensor" and s.path.startswith("input_args.") and (fp := _fingerprint(s)) in names)


# torch.optim.Adam / AdamW, single-tensor step (the CPU default): which hyper-parameter each scalar argument is
_HYPER = {("Tensor.add_", "input_args.1"): "eps", ("Tensor.lerp_", "input_args.2"): "betas[0] (1 − beta1)",
          ("Tensor.addcmul_", "input_kwargs.value"): "betas[1] (1 − beta2)",
          ("Tensor.__truediv__", "input_args.1"): "betas[1] (bias correction)",
          ("Tensor.addcdiv_", "input_kwargs.value"): "lr (−lr / bias correction)"}


def hyper_parameter(record: Record, path: str) -> str:
    """The optimizer's hyper-parameter a scalar argument of one of its records carries ("" when not known)."""
    if record.scope != OPTIMIZER_SCOPE:
        return ""
    if record.api == "Tensor.mul_" and path == "input_args.1":
        return "weight_decay (1 − lr × weight_decay)" if is_parameter_update(record) else "betas[1]"
    return _HYPER.get((record.api, path), "")


def _by_input(records: Iterable[Record], decay: bool) -> dict[tuple, Record]:
    """{fingerprint of the parameter before the step: the first update that reads it}, of the decay `mul_`s
    (`decay`) or of the other updates (`addcdiv_` reading a parameter no decay touched first)."""
    found: dict[tuple, Record] = {}
    for r in sorted(records, key=lambda r: r.order):
        if is_parameter_update(r) and (r.api == "Tensor.mul_") == decay:
            if (fp := _fingerprint(_slot(r, "input_args.0"))) is not None:
                found.setdefault(fp, r)
    return found


def decay_diffs(target: Iterable[Record], golden: Iterable[Record], names: dict[tuple, str]
                ) -> list[tuple[Record, str]]:
    """(target record to report at, diff) for each parameter one side's optimizer decays (`mul_` by
    1 − lr × weight_decay) while the other's step reads it undecayed, matched by the parameter's values before
    the step (same shape and statistics: both sides built it from the same seed), not by the records'
    alignment: a parameter moved to another param group is updated at another place in the step."""
    t_records, g_records = list(target), list(golden)
    t_decay, g_decay = _by_input(t_records, True), _by_input(g_records, True)
    t_plain, g_plain = _by_input(t_records, False), _by_input(g_records, False)
    found = []
    for fp, decay in t_decay.items():
        if fp not in g_decay and fp in g_plain:
            found.append((decay, _decay_text("port", "original", decay, names.get(fp, "a parameter"))))
    for fp, decay in g_decay.items():
        if fp not in t_decay and fp in t_plain:
            found.append((t_plain[fp], _decay_text("original", "port", decay, names.get(fp, "a parameter"))))
    return found


def _decay_text(side: str, other: str, decay: Record, name: str) -> str:
    factor = next((s.value for s in decay.slots if s.path == "input_args.1" and s.kind == "value"), None)
    return (f"weight_decay: the {side}'s optimizer decays {name} (mul_ by {factor!r} = 1 − lr × weight_decay), "
            f"the {other}'s does not")
