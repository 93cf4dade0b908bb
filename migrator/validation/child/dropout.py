"""Randomness handled, not hoped (issue 24 item 4, child side): find every dropout the model applies, turn
it off for the numeric runs, and measure it for the statistical check.

Found at run time, wherever the model applies it: the functional dropouts (``F.dropout``, ``dropout1d/2d/3d``,
``alpha_dropout``, ``feature_alpha_dropout`` — which ``nn.Dropout*`` modules call — with ``training`` and
``p > 0``), ``F.scaled_dot_product_attention(dropout_p=...)`` (both through a ``TorchFunctionMode``), and the
fused ops of the reference layers, which report their drop probability through :func:`fused`
(``npu_fusion_attention(keep_prob=...)`` of the emulation, the ``flash_attn`` CPU reference's ``dropout_p``).
Each is recorded as a *site*: the module running when it was applied (``blocks.0.attn``) and its rate.

:class:`Dropout` ``(model, neutral=True)`` makes every such call a no-op (identity, ``dropout_p=0``,
``keep_prob=1``); with ``neutral=False`` it only records, plus the share of elements each functional
dropout kept (its keep rate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.overrides import TorchFunctionMode

from . import passthrough

FUNCTIONAL = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
SEEDS = 8  # forwards per side with dropout on (the statistical check)

_active: Dropout | None = None  # the census in force in this process (the fused-op layers report to it)


def fused(op: str, p: float) -> float:
    """The drop probability a fused op should use: ``p`` reported to the census in force, 0 when neutralised."""
    census = _active
    if census is None or p <= 0.0:
        return p
    census.seen(op, p)
    return 0.0 if census.neutral else p


class Dropout:
    """Context manager: the dropout census of one model (see the module docstring)."""

    def __init__(self, model: torch.nn.Module, neutral: bool) -> None:
        self.neutral = neutral
        self.sites: dict[str, set[float]] = {}
        self.kept: dict[str, list[float]] = {}   # site -> [kept, total] elements of the functional dropouts
        self._names = {id(m): n or "_root" for n, m in model.named_modules()}
        self._stack: list[str] = []
        self._handles: list = []
        self._mode: Any = None

    def seen(self, op: str, p: float) -> None:
        self.sites.setdefault(self._stack[-1] if self._stack else "_root", set()).add(round(float(p), 6))

    def facts(self) -> dict[str, Any]:
        return {"sites": {s: sorted(r) for s, r in sorted(self.sites.items())},
                "kept": {s: v[0] / v[1] for s, v in self.kept.items() if v[1]}}

    def __enter__(self) -> Dropout:
        global _active
        from torch.nn.modules import module as module_mod

        self._handles = [module_mod.register_module_forward_pre_hook(self._pre),
                         module_mod.register_module_forward_hook(self._post)]
        self._mode = _mode(self)
        self._mode.__enter__()
        _active = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = None
        self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()

    def _pre(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        name = self._names.get(id(module))
        if name is not None:
            self._stack.append(name)

    def _post(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self._names.get(id(module)) is not None and self._stack:
            self._stack.pop()


def _mode(census: Dropout) -> TorchFunctionMode:
    import torch
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func: Callable[..., Any], types: Iterable[type], args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name in FUNCTIONAL and _is_functional(func, name):
                p = float(kwargs.get("p", args[1] if len(args) > 1 else 0.5))
                training = kwargs.get("training", args[2] if len(args) > 2 else True)
                if not training or p <= 0.0:
                    return passthrough.call(func, *args, **kwargs)
                census.seen(f"F.{name}", p)
                if census.neutral:
                    return args[0] if args else kwargs["input"]
                out = passthrough.call(func, *args, **kwargs)
                x = args[0] if args else kwargs["input"]
                if isinstance(out, torch.Tensor) and name == "dropout":  # elementwise: its keep rate is observable
                    site = census._stack[-1] if census._stack else "_root"
                    counts = census.kept.setdefault(site, [0.0, 0.0])
                    nonzero = x != 0
                    counts[0] += float((out != 0)[nonzero].sum())
                    counts[1] += float(nonzero.sum())
                return out
            if func is torch.nn.functional.scaled_dot_product_attention:
                if len(args) > 4:
                    args, kwargs = args[:4], dict(kwargs, dropout_p=args[4], **_rest(args))
                p = float(kwargs.get("dropout_p", 0.0))
                if p > 0.0:
                    census.seen("scaled_dot_product_attention", p)
                    if census.neutral:
                        kwargs["dropout_p"] = 0.0
            return passthrough.call(func, *args, **kwargs)

    return Mode()


def _is_functional(func: Callable[..., Any], name: str) -> bool:
    import torch

    return func is getattr(torch.nn.functional, name, None)


def _rest(args: tuple[Any, ...]) -> dict[str, Any]:
    """SDPA's positional arguments after ``dropout_p`` as keywords."""
    return dict(zip(("is_causal", "scale", "enable_gqa"), args[5:]))


def statistics(forward: Callable[[int], tuple[float, Dropout]], seeds: int = SEEDS) -> dict[str, Any]:
    """``forward(seed)`` -> loss, with dropout on, for ``seeds`` seeds: the sites, keep rates and the losses."""
    losses: list[float] = []
    sites: dict[str, set[float]] = {}
    kept: dict[str, list[float]] = {}
    for seed in range(seeds):
        census = forward(seed)
        losses.append(census[0])
        for site, rates in census[1].sites.items():
            sites.setdefault(site, set()).update(rates)
        for site, (k, n) in census[1].kept.items():
            acc = kept.setdefault(site, [0.0, 0.0])
            acc[0] += k
            acc[1] += n
    return {"sites": {s: sorted(r) for s, r in sorted(sites.items())}, "losses": losses,
            "kept": {s: [k, n] for s, (k, n) in kept.items()}}
