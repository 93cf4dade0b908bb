"""Tensors recorded on one side only inside a module whose outputs match: fused away, a note (issue 24 item 2).

A hand port that fuses ``act_fn(gate(x)) * up(x)`` into ``npu_swiglu`` has no ``act_fn`` module on the
migrated side; what the migration must keep is what the enclosing module (``mlp``) returns, and that is
compared. So a one-sided activation (forward input/output, its backward) of module M is excused when the
nearest enclosing module with outputs compared on both sides passes or warns; parameter grads, the loss and
modules present on both sides with other shapes are never excused (they fail in :mod:`.compare`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...verdict import Verdict, worst

# the verdicts and the comparison are compare.TensorVerdict / compare.Comparison: not imported, even for
# types, since compare calls this module (no import circle)

EXCUSABLE = ("forward", "backward", "routing")


def _ancestors(path: str) -> list[str]:
    """``blocks.0.mlp.act_fn`` -> ``blocks.0.mlp``, ``blocks.0``, ``blocks``, ``_root``."""
    parts = path.split(".") if path and path != "_root" else []
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)] + ["_root"] if parts else []


def _output_status(verdicts: Sequence[Any], path: str) -> Verdict | None:
    """The worst status of ``path``'s compared forward outputs, None when none was compared (no import of
    :mod:`.compare`, which calls this module)."""
    prefix = f"{path}.forward."
    found = [v.status for v in verdicts if v.match.startswith(prefix) and ".output." in v.match
             and v.check("unmatched") is None]
    return worst(found) if found else None


def resolve(pending: list[tuple[Any, ...]], out: Any, gate: Callable[..., None]) -> None:
    """Each pending one-sided tensor ``(event, category, order, label, why, run)``: a note when fused away,
    else the unmatched failure (``gate``: :func:`.compare.unmatched_verdict`)."""
    fused: dict[str, str] = {}
    for event, category, order, label, why, run in pending:
        module = event.module or ""
        outer = None
        if category in EXCUSABLE:
            outer = next(((a, s) for a in _ancestors(module) if (s := _output_status(out.verdicts, a)) is not None),
                         None)
        if outer is not None and outer[1] in (Verdict.PASS, Verdict.WARN):
            fused.setdefault(module, outer[0])
            continue
        gate(out, event, category, order, label, why, run, True)
    if fused:
        items = [f"{m} inside {a}" for m, a in fused.items()]
        out.notes.append(f"fused away: {', '.join(items[:6])}{' ...' if len(items) > 6 else ''} "
                         "(recorded on one side only; the enclosing module's outputs match)")


def excuse_inner_ops(out: Any) -> None:
    """Inner op records never decide a verdict (issue 37 item 4): an API call recorded inside a module
    (``api.topk.0.output.0``) that differs while the nearest enclosing module whose outputs were compared
    passes or warns is a note, "computed differently, same result" (top-k on logits then a softmax over
    the k is the same maths as a softmax then top-k renormalised); inside a failing module it stays, to
    localise the failure."""
    kept: list[Any] = []
    excused: dict[str, None] = {}  # ordered, unique
    for v in out.verdicts:
        if v.match.startswith("api.") and v.status in (Verdict.FAIL, Verdict.WARN):
            module = v.scope or "_root"
            outer = next(((a, s) for a in [module, *_ancestors(module)]
                          if (s := _output_status(out.verdicts, a)) is not None), None)
            if outer is not None and outer[1] in (Verdict.PASS, Verdict.WARN):
                excused.setdefault(f"{v.name.split('.forward')[0]} inside {outer[0]}", None)
                continue
        kept.append(v)
    if excused:
        out.verdicts[:] = kept
        items = list(excused)
        out.notes.append(f"computed differently, same result: {', '.join(items[:6])}{' ...' if len(items) > 6 else ''} "
                         "(inner op records differ; the enclosing module's outputs match)")
