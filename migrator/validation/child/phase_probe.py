"""The phases of the program's training step as they run (child side, imports torch).

While the k training steps of S1 run, :class:`PhaseProbe` notes every ``backward()``,
``scaler.unscale_``, ``clip_grad_norm_`` / ``clip_grad_value_``, ``optimizer.step`` and
``optimizer.zero_grad`` in the order they happen, each with the state it leaves: the norm of every
parameter's grad (``None`` grads count as 0), or for ``step`` the norm of every parameter's update,
and its arguments (``max_norm``, ``norm_type``, ``set_to_none``). The parent
(:mod:`..parent.phases`) names the first phase whose input agrees and whose effect differs.
``GradScaler.step`` calls ``unscale_`` itself when the program did not: that shows as ``unscale``
right before ``step``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from .bindings import bindings_of

CLIP = ("clip_grad_norm_", "clip_grad_value_")
# notes a phase from the call's (args, kwargs)
After = Callable[[tuple[Any, ...], dict[str, Any]], None]


class PhaseProbe:
    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scaler: Any) -> None:
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.optimizer, self.scaler = optimizer, scaler
        self.events: list[dict[str, Any]] = []
        self.step = 0
        self.depth = 0
        self._restore: list[tuple[Any, str, Any, bool]] = []  # owner, name, value, was an own attribute

    # ------------------------------------------------------------------ state
    def _grad_norms(self) -> list[float]:
        return [float(p.grad.detach().double().norm()) if p.grad is not None else 0.0 for _, p in self.named]

    def _note(self, phase: str, state: list[float], **args: Any) -> None:
        self.events.append({"step": self.step, "phase": phase, "state": state,
                            "args": {k: v for k, v in args.items() if isinstance(v, (bool, int, float, str))}})

    # ------------------------------------------------------------------ patches
    def _patch(self, owner: object, name: str, wrapper: Callable[..., Any]) -> None:
        own = name in vars(owner) if hasattr(owner, "__dict__") else False
        self._restore.append((owner, name, getattr(owner, name), own))
        setattr(owner, name, wrapper)

    def _outer(self, fn: Callable[..., Any], after: After) -> Callable[..., Any]:
        """Call ``fn``; note its phase with ``after(result, args, kwargs)`` unless inside another phase."""
        probe = self

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            probe.depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                probe.depth -= 1
            if probe.depth == 0:
                after(args, kwargs)
            return out

        return wrapper

    def attach(self) -> PhaseProbe:
        self._patch(torch.Tensor, "backward", self._outer(torch.Tensor.backward,
                                                          lambda a, k: self._note("backward", self._grad_norms())))
        clips = [getattr(torch.nn.utils, name) for name in CLIP]
        for name, fn, places in zip(CLIP, clips, bindings_of(clips)):

            def after(args: tuple[Any, ...], kwargs: dict[str, Any], name: str = name) -> None:
                extra = {k: v for k, v in zip(("max_norm" if name == CLIP[0] else "clip_value", "norm_type"), args[1:])}
                self._note("clip", self._grad_norms(), fn=name, **extra, **kwargs)

            wrapper = self._outer(fn, after)
            for module, attr in places:
                self._patch(module, attr, wrapper)
        if self.scaler is not None and hasattr(self.scaler, "unscale_"):
            self._patch(self.scaler, "unscale_", self._outer(self.scaler.unscale_,
                                                             lambda a, k: self._note("unscale", self._grad_norms())))
        self._patch(self.optimizer, "step", self._step_wrapper(self.optimizer.step))
        self._patch(self.optimizer, "zero_grad", self._outer(
            self.optimizer.zero_grad, lambda a, k: self._note("zero_grad", self._grad_norms(), **k)))
        return self

    def _step_wrapper(self, step: Callable[..., Any]) -> Callable[..., Any]:
        probe = self

        @functools.wraps(step)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            before = [p.detach().clone() for _, p in probe.named]
            probe.depth += 1
            try:
                out = step(*args, **kwargs)
            finally:
                probe.depth -= 1
            if probe.depth == 0:
                probe._note("step", [float((p.detach() - b).double().norm()) for (_, p), b in zip(probe.named, before)])
            return out

        return wrapper

    def next_step(self) -> None:
        self.step += 1

    def detach(self) -> list[dict[str, Any]]:
        for owner, name, value, own in reversed(self._restore):
            if own:
                setattr(owner, name, value)
            else:
                delattr(owner, name)  # an instance's bound method: the class's again
        self._restore.clear()
        return self.events
