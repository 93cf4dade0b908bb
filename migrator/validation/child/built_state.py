"""The model as each side's own code builds it from the seed, before any weight is shared (issue 37 item 2).

Both sides are then loaded with the original's weights, so without this a port's own initialisation never
runs: a LayerScale whose ``init_values`` the port ignores passed. Every parameter and buffer is described
by its statistics (the parent compares them: constants exactly, random initialisations by distribution); an
integer or bool tensor (a relative-position index, a mask) also by a digest of its values, compared exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def describe(model: torch.nn.Module) -> dict[str, dict[str, Any]]:
    """name -> {cls, shape, dtype, mean, std, min, max[, digest]} of every parameter and buffer."""
    import hashlib

    import torch

    owners = {name: type(module).__name__ for name, module in model.named_modules()}
    state: dict[str, dict[str, Any]] = {}
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    with torch.no_grad():
        for name, t in tensors:
            if t.is_complex() or t.numel() == 0 or name in state:
                continue
            x = t.detach().to("cpu", torch.float64).flatten()
            exact = {} if t.is_floating_point() else {
                "digest": hashlib.sha256(t.detach().to("cpu").contiguous().numpy().tobytes()).hexdigest()}
            state[name] = {**exact, "cls": owners.get(name.rpartition(".")[0], ""), "shape": tuple(t.shape),
                           "dtype": str(t.dtype).removeprefix("torch."), "mean": float(x.mean()),
                           "std": float(x.std()) if x.numel() > 1 else 0.0, "min": float(x.min()),
                           "max": float(x.max())}
    return state
