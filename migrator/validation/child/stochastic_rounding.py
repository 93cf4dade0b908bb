"""The original's bf16 run with every bf16 result stochastically rounded (child side): a second sample
of its own bf16 error, the per-tensor noise floor of the bf16 ratio (issue 37 item 4).

Under :class:`StochasticRounding` each op that makes a new bf16 tensor (not a view, not in place, not a
random draw) is run again with its bf16 inputs in fp32, and that fp32 result is rounded to bf16 up or
down with probability equal to its distance from each neighbour (unbiased; the error of a round-to-nearest
result is uniform within half a ulp, a stochastic one has twice its variance: the parent divides the error
by sqrt(2), ``comparison/thresholds.ReferenceNoise``). A value bf16 holds exactly stays exact, so copies,
gathers and concatenations add nothing; an op that cannot run in fp32 keeps its own result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SAMPLES = 2  # stochastically rounded runs of the original per bf16 step (each one more bf16 forward/backward)


def stochastic_bf16(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``x`` (fp32) rounded to bf16 stochastically: a random 16-bit integer added to the dropped bits."""
    import torch

    bits = x.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, generator=generator, dtype=torch.int32).to(x.device)
    rounded = ((bits + noise) & -65536).view(torch.float32)  # int32 wraps only past the largest finite float
    return torch.where(torch.isfinite(x) & torch.isfinite(rounded), rounded, x).to(torch.bfloat16)


def mode(seed: int) -> Any:
    """A ``TorchDispatchMode`` rounding the bf16 results of the ops run under it stochastically."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    def widen(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
            return value.float()
        return torch.float32 if value is torch.bfloat16 else value

    def bf16(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16 and value.numel() > 0

    class StochasticRounding(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # True wraps __torch_dispatch__ in torch._disable_dynamo: imports torch._dynamo (seconds)

        def __init__(self) -> None:
            super().__init__()
            self.generator = torch.Generator().manual_seed(seed)

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            schema = func._schema
            if (schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
                    or torch.Tag.nondeterministic_seeded in func.tags):
                return out
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not any(bf16(o) for o in outs):
                return out
            try:
                wide = func(*tree_map(widen, args), **tree_map(widen, kwargs))
            except Exception:  # noqa: BLE001 - no fp32 kernel for this op: its own rounding stays
                return out
            wides = wide if isinstance(wide, (tuple, list)) else (wide,)
            rounded = [stochastic_bf16(w.to(o.device), self.generator) if bf16(o) and isinstance(w, torch.Tensor)
                       and w.dtype == torch.float32 and w.shape == o.shape else o for o, w in zip(outs, wides)]
            return rounded[0] if isinstance(out, torch.Tensor) else type(out)(rounded)

    return StochasticRounding()
