"""One forward/backward run of a protocol model under a dtype policy (child side).

Policies: ``fp32`` (the golden G, and the migrated fp32 logic check) and the bf16 policy, either
``amp`` (``torch.autocast(device, bfloat16)`` over fp32 master weights, what the samples' train.py
do) or ``pure`` (``model.to(bfloat16)``). Weights are rounded to bf16 once and loaded everywhere
(numerics.md §3.4), batches are shared by file; both are hashed (sha256) into the manifest.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .errors import CannotRun, ProgramFault

if TYPE_CHECKING:
    import torch

    from .protocol import Entry
    from .recorder import Recorder

Tensors = dict[str, "torch.Tensor"]  # a state dict, shared weights, a batch's tensors by name

OPTIMIZER_STEPS = 3


# ---------------------------------------------------------------------------- hashing / files
def tensor_hash(tensors: Tensors) -> str:
    """sha256 over (name, dtype, shape, bytes) in sorted name order."""
    import torch

    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def round_weights(model: torch.nn.Module) -> Tensors:
    """State dict with every floating tensor rounded to bf16 once (kept as fp32 values)."""
    import torch

    out = {}
    for name, value in model.state_dict().items():
        if torch.is_tensor(value):
            value = value.detach().to("cpu")
            out[name] = value.to(torch.bfloat16).float() if value.is_floating_point() else value.clone()
    return out


def save_tensors(tensors: Tensors, path: str) -> None:
    from safetensors.torch import save

    from migrator.ground import safe_write

    safe_write.write_bytes(path, save({k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}))


def load_tensors(path: str) -> Tensors:
    from safetensors.torch import load_file

    return load_file(path)


def _flatten_batch(value: Any, prefix: str, tensors: Tensors) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        key = prefix or "batch"
        tensors[key] = value.detach().to("cpu").contiguous()
        return {"__tensor__": key}
    if isinstance(value, dict):
        return {"__dict__": {k: _flatten_batch(v, f"{prefix}.{k}" if prefix else str(k), tensors)
                             for k, v in value.items()}}
    if isinstance(value, (list, tuple)):
        kind = "__tuple__" if isinstance(value, tuple) else "__list__"
        return {kind: [_flatten_batch(v, f"{prefix}.{i}" if prefix else str(i), tensors)
                       for i, v in enumerate(value)]}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    raise CannotRun(f"batch element of type {type(value).__name__} cannot be recorded "
                    "(use tensors, numbers, strings, dicts, lists, tuples)")


def _unflatten_batch(spec: Any, tensors: Tensors) -> Any:
    if isinstance(spec, dict):
        if "__tensor__" in spec:
            return tensors[spec["__tensor__"]]
        if "__dict__" in spec:
            return {k: _unflatten_batch(v, tensors) for k, v in spec["__dict__"].items()}
        if "__tuple__" in spec:
            return tuple(_unflatten_batch(v, tensors) for v in spec["__tuple__"])
        if "__list__" in spec:
            return [_unflatten_batch(v, tensors) for v in spec["__list__"]]
    return spec


def save_batch(batch: Any, path_prefix: str) -> str:
    """Write ``<prefix>.safetensors`` + ``<prefix>.json``; return the batch hash."""
    tensors: Tensors = {}
    spec = _flatten_batch(batch, "", tensors)
    save_tensors(tensors, path_prefix + ".safetensors")
    from migrator.ground import safe_write

    safe_write.write_text(path_prefix + ".json", json.dumps(spec))
    return batch_hash(batch)


def load_batch(path_prefix: str) -> Any:
    with open(path_prefix + ".json", encoding="utf-8") as fh:
        spec = json.load(fh)
    return _unflatten_batch(spec, load_tensors(path_prefix + ".safetensors"))


def batch_hash(batch: Any) -> str:
    tensors: Tensors = {}
    spec = _flatten_batch(batch, "", tensors)
    h = hashlib.sha256(json.dumps(spec, sort_keys=True).encode())
    h.update(tensor_hash(tensors).encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------- batches
def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, fn) for v in value)
    return value


def prepare_batch(batch: Any, device: str, policy: str, bf16_policy: str) -> Any:
    """Move tensors to ``device``; under the pure-bf16 policy float inputs become bf16."""
    import torch

    def fn(t: torch.Tensor) -> torch.Tensor:
        t = t.to(device)
        if policy == "bf16" and bf16_policy == "pure" and t.is_floating_point():
            t = t.to(torch.bfloat16)
        return t

    return map_tensors(batch, fn)


def split_batch(batch: Any, parts: int) -> list[Any]:
    """Split a batch along dim 0 into ``parts`` equal micro-batches (for programs whose
    ``make_batch`` does not take a rank). Every tensor must have the same leading size."""
    sizes: set[int | None] = set()  # None: a 0-d tensor

    def collect(t: torch.Tensor) -> torch.Tensor:
        sizes.add(t.shape[0] if t.dim() else None)
        return t

    map_tensors(batch, collect)
    size = sizes.pop() if len(sizes) == 1 else None
    if size is None:
        raise CannotRun("cannot split this batch over ranks: its tensors do not share one leading batch "
                         "dimension (give make_batch(step, rank, world_size))")
    if size % parts:
        raise CannotRun(f"batch size {size} does not divide over {parts} ranks (give make_batch(step, rank, "
                         "world_size) or a larger batch)")
    chunk = size // parts
    def part(i: int) -> Any:
        return map_tensors(batch, lambda t: t[i * chunk:(i + 1) * chunk].clone())

    return [part(i) for i in range(parts)]


# ---------------------------------------------------------------------------- running
class WeightsMismatch(ProgramFault):
    """The model's parameters do not match the shared weights (names or shapes)."""


def build_model(entry: Entry, weights: Tensors, device: str, policy: str, bf16_policy: str) -> torch.nn.Module:
    """``make_model(dropout=0.0)``, load the shared weights (strict), move, set the dtype policy."""
    import torch

    model = entry.make_model(dropout=0.0)
    own = model.state_dict()
    missing = sorted(set(own) - set(weights))
    unexpected = sorted(set(weights) - set(own))
    shapes = [k for k in own if k in weights and tuple(own[k].shape) != tuple(weights[k].shape)]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"not in the shared weights: {', '.join(missing[:5])}")
        if unexpected:
            parts.append(f"not in this model: {', '.join(unexpected[:5])}")
        if shapes:
            parts.append("shape differs: " + ", ".join(
                f"{k} {tuple(own[k].shape)} vs {tuple(weights[k].shape)}" for k in shapes[:5]))
        raise WeightsMismatch("unmatched state_dict: " + "; ".join(parts))
    model.load_state_dict(weights, strict=True)
    model.to(device)
    model.train()
    if policy == "bf16" and bf16_policy == "pure":
        model.to(torch.bfloat16)
    return model


def autocast(policy: str, bf16_policy: str, device: str) -> AbstractContextManager[Any]:
    import torch

    if policy == "bf16" and bf16_policy == "amp":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def model_inputs(entry: Entry, batch: Any) -> tuple[tuple[object, ...], dict[str, object]]:
    """The model call's (args, kwargs) from a batch: a dict by keyword (the entry's `input_keys` only, when
    given), a tuple or list by position, anything else as the one argument."""
    if isinstance(batch, dict):
        if entry.input_keys is not None:
            return (), {k: batch[k] for k in entry.input_keys if k in batch}
        return (), dict(batch)
    if isinstance(batch, (tuple, list)):
        return tuple(batch), {}
    return (batch,), {}


def forward_backward(entry: Entry, model: torch.nn.Module, call_model: Callable[..., Any], batch: Any, policy: str,
                     bf16_policy: str, device: str, recorder: Recorder, loss_scale: float = 1.0) -> torch.Tensor:
    """Run ``loss_fn(model(batch), batch)`` and its backward under the recorder; return the loss."""
    args, kwargs = model_inputs(entry, batch)
    with recorder.api_mode(), autocast(policy, bf16_policy, device):
        out = call_model(*args, **kwargs)
        loss = entry.loss_fn(out, batch)
    recorder.record_loss(loss)
    (loss * loss_scale if loss_scale != 1.0 else loss).backward()
    return loss


def param_grads(model: torch.nn.Module) -> list[tuple[str, torch.Tensor | None]]:
    return [(name, p.grad) for name, p in model.named_parameters()]


# ---------------------------------------------------------------------------- optimizer in isolation
def synthetic_grads(weights: Tensors, names: list[str], seed: int) -> Tensors:
    """Deterministic fp32 grads, identical on both sides: N(0, 1e-3²) with 1 % exact zeros.

    Each optimizer step draws fresh ones (the seed includes the step): with one constant gradient,
    bias-corrected Adam's update is lr·sign(g) whatever the betas, so a lost beta would pass."""
    import torch

    grads = {}
    for i, name in enumerate(names):
        g = torch.Generator().manual_seed(seed * 100003 + i)
        shape = weights[name].shape
        grad = torch.randn(shape, generator=g) * 1e-3
        grad[torch.rand(shape, generator=g) < 0.01] = 0.0
        grads[name] = grad
    return grads


def optimizer_updates(entry: Entry, weights: Tensors, device: str, seed: int,
                      recorder_cls: type[Recorder]) -> tuple[Recorder, str, dict[str, list[Any]]]:
    """fp32 master params through ``make_optimizer(model)`` for ``OPTIMIZER_STEPS`` steps with the
    same synthetic fp32 grads; records each step's update ``p_after - p_before`` (numerics.md §3.2:
    optimizers compared in isolation, never by step-1 bf16 updates). Returns (the recorder, the
    optimizer's class name, its semantic arguments as JSON)."""
    assert entry.make_optimizer is not None  # called only for a protocol that has one
    model = build_model(entry, weights, device, "fp32", "amp")
    optimizer = entry.make_optimizer(model)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    shapes = {n: p.detach().cpu() for n, p in named}
    rec = recorder_cls(model)
    for step in range(OPTIMIZER_STEPS):
        grads = synthetic_grads(shapes, [n for n, _ in named], seed * 1009 + step)
        before = {n: p.detach().clone() for n, p in named}
        for n, p in named:
            p.grad = grads[n].to(device=p.device, dtype=p.dtype).clone()
        optimizer.step()
        for n, p in named:
            delta = (p.detach() - before[n]).float()
            rec._event(f"Optimizer.{type(optimizer).__name__}.step.{step}.{n}", f"optim.step{step}.{n}",
                       "optimizer", n.rpartition(".")[0] or "_root", type(optimizer).__name__, "optimizer", delta)
    from .. import op_semantics

    names = {id(p): n for n, p in model.named_parameters()}  # what each parameter gets, by name
    return rec, type(optimizer).__name__, op_semantics.jsonable(op_semantics.optimizer(optimizer, names))


# ---------------------------------------------------------------------------- k real training steps
TRAIN_STEPS = 3


def train_updates(entry: Entry, weights: Tensors, batches: list[Any], device: str, policy: str, bf16_policy: str,
                  seed: int, recorder_cls: type[Recorder], neutral: bool = False,
                  perturb: bool = False) -> tuple[Recorder, dict[str, Any]]:
    """``TRAIN_STEPS`` real steps of the program: forward + ``loss_fn`` under the policy, then the
    program's ``train_step(model, optimizer, loss, scaler)`` (its scaled backward, unscale, clip,
    ``step``), else ``backward()`` + ``step()``; ``scaler`` from ``make_scaler()`` (else None).
    Records each parameter's update after the last step, ``p_k - p_0`` in fp32 (what the optimizer
    really did, loss scaling included), and returns (recorder, facts: losses, policy, scaler)."""
    import torch

    from .. import determinism

    assert entry.make_optimizer is not None  # called only for a protocol that has one
    determinism.seed_all(seed)
    model = build_model(entry, weights, device, policy, bf16_policy)
    if perturb:
        nudge_weights(model, seed)
    optimizer = entry.make_optimizer(model)
    scaler = entry.make_scaler() if entry.make_scaler is not None else None
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    start = {n: p.detach().float().clone() for n, p in named}
    state = _step_state(model)  # what the step may update besides the trained parameters: EMA, running stats
    state_start = {n: b.detach().float().clone() for n, b in state}
    facts: dict[str, Any] = {"steps": TRAIN_STEPS, "losses": [], "optimizer": type(optimizer).__name__,
                             "train_step": entry.train_step is not None}
    from .phase_probe import PhaseProbe
    from .policy_probe import PolicyProbe, ScalerTrajectory, current_scale
    from .user_calls import clear_grads

    trajectory = ScalerTrajectory()
    if scaler is not None:
        trajectory.seen(scaler)

    probe = PolicyProbe(model, device).attach()
    probe.watch(optimizer)
    phases = PhaseProbe(model, optimizer, scaler).attach()  # the step's phases, for naming a divergence
    for step in range(TRAIN_STEPS):
        data = prepare_batch(batches[step % len(batches)], device, policy, bf16_policy)
        args, kwargs = model_inputs(entry, data)
        with _noise_rounding(perturb and policy == "bf16", seed * 1000 + 500 + step):
            with autocast(policy, bf16_policy, device), dropout_context(model, neutral):
                loss = entry.loss_fn(model(*args, **kwargs), data)
            facts["losses"].append(float(loss.detach().float()))
            if entry.train_step is not None:
                before = current_scale(scaler)
                entry.train_step(model, optimizer, loss, scaler)
                if scaler is not None:
                    trajectory.after_update(scaler, before)
            else:
                loss.backward()
                optimizer.step()
                clear_grads(optimizer, "optimizer")
        if step == 0:
            probe.detach()
            facts["policy"] = probe.facts(model)
        phases.next_step()
    facts["phases"] = phases.detach()
    facts["scaler"] = trajectory.facts()
    rec = recorder_cls(model)
    with torch.no_grad():
        for n, p in named:
            rec._event(f"Train.after{TRAIN_STEPS}.{n}", f"train.after{TRAIN_STEPS}.{n}", "training",
                       n.rpartition(".")[0] or "_root", type(optimizer).__name__, "training",
                       p.detach().float() - start[n])
        for n, b in state:  # graded like the parameter updates (issue 37 item 3: an EMA decay slip)
            rec._event(f"Train.after{TRAIN_STEPS}.{n}", f"train.after{TRAIN_STEPS}.{n}", "training",
                       n.rpartition(".")[0] or "_root", "state", "training", b.detach().float() - state_start[n])
    return rec, facts


NUDGE = 2.0**-22  # relative: two fp32 ulps, far below any bf16 rounding


def _noise_rounding(on: bool, seed: int) -> AbstractContextManager[Any]:
    """The bf16 noise floor run's rounding: every bf16 result rounded stochastically (a nudge of two fp32 ulps
    leaves bf16 roundings as they were, so that run's errors equalled R's)."""
    if not on:
        return contextlib.nullcontext()
    from .stochastic_rounding import mode

    return mode(seed)


def nudge_weights(model: torch.nn.Module, seed: int) -> None:
    """Each trained weight times ``1 ± NUDGE`` (a fixed random sign per value): the noise floor run of the
    original (issue 37 item 4b) — how far its own updates move when nothing but fp32 rounding changes."""
    import torch

    generator = torch.Generator().manual_seed(seed + 7919)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad and p.is_floating_point():
                sign = torch.randint(0, 2, p.shape, generator=generator).to(p.dtype) * 2 - 1
                p.mul_(1 + NUDGE * sign.to(p.device))


def _step_state(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """The model's floating buffers and frozen parameters (an EMA copy, running statistics), by name."""
    frozen = [(n, p) for n, p in model.named_parameters() if not p.requires_grad and p.is_floating_point()]
    return frozen + [(n, b) for n, b in model.named_buffers() if b.is_floating_point()]


class Timer:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self) -> float:
        return round(time.perf_counter() - self.t0, 3)


# ---------------------------------------------------------------------------- dropout (issue 24 item 4)
def dropout_context(model: torch.nn.Module, neutral: bool) -> AbstractContextManager[Any]:
    """The numeric runs' dropout: neutralised (identity) when the original applies any, else untouched."""
    from .dropout import Dropout

    return Dropout(model, neutral=True) if neutral else contextlib.nullcontext()


def dropout_census(entry: Entry, weights: Tensors, batch: Any, device: str, seed: int, seeds: int = 0) -> dict[str, Any]:
    """One fp32 forward in train mode with dropout as the program has it: its dropout sites. With
    ``seeds``: that many forwards, one seed each, for the statistical check (losses, keep rates)."""
    import torch

    from .. import determinism
    from .dropout import Dropout, statistics

    data = prepare_batch(batch, device, "fp32", "amp")
    args, kwargs = model_inputs(entry, data)

    def forward(s: int) -> tuple[float, Dropout]:
        determinism.seed_all(seed + s)
        model = build_model(entry, weights, device, "fp32", "amp")
        with torch.no_grad(), Dropout(model, neutral=False) as census:
            loss = entry.loss_fn(model(*args, **kwargs), data)
        return float(loss.detach().float()), census

    try:
        if not seeds:
            return {"sites": forward(0)[1].facts()["sites"]}
        return statistics(forward, seeds)
    except Exception as exc:  # noqa: BLE001 - the numeric runs meet the same error with the recorder on: reported there
        from .errors import summarize

        return {"sites": {}, "error": summarize(exc)}
