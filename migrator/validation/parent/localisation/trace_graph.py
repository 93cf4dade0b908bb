"""An op trace read as a graph (parent side): who read whom, the tensor an input source holds, and
the original op a migrated input stands for. Shared by the fused-op causes (:mod:`.fused_causes`)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor


@dataclass(frozen=True)
class Trace:
    doc: Any  # ops.json: {"events", "modules", "buffers"} (a bare event list from older traces)
    tensors: Any

    @property
    def events(self) -> list[dict[str, Any]]:
        return self.doc if isinstance(self.doc, list) else self.doc.get("events", [])

    @property
    def modules(self) -> dict[str, dict[str, Any]]:
        return {} if isinstance(self.doc, list) else self.doc.get("modules", {})

    def tensor(self, i: int) -> Any:
        """The op's output, or None where the trace's byte budget ran out."""
        return self.tensors.get(self.events[i]["name"])


def readers(trace: Trace) -> dict[int, list[int]]:
    """Op index -> the ops that read its output, in trace order."""
    out: dict[int, list[int]] = {}
    for i, event in enumerate(trace.events):
        for src in event.get("inputs", []):
            if src[0] == "op":
                out.setdefault(src[1], []).append(i)
    return out


def descendants(trace: Trace, starts: Iterable[int]) -> set[int]:
    kids, seen, stack = readers(trace), set(), list(starts)
    while stack:
        for child in kids.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def ancestors(trace: Trace, end: int) -> set[int]:
    seen: set[int] = set()
    stack = [end]
    while stack:
        for src in trace.events[stack.pop()].get("inputs", []):
            if src[0] == "op" and src[1] not in seen:
                seen.add(src[1])
                stack.append(src[1])
    return seen


def read_tensor(trace: Trace, src: list[Any]) -> Tensor | None:
    """The tensor an input source held: an op's output, a buffer as built, the traced module's input."""
    if src[0] == "op":
        return trace.tensor(src[1])
    if src[0] in ("buffer", "input"):
        return trace.tensors.get(f"{src[0]}.{src[1]}")
    return None


def _through_copies(mig: Trace, src: list[Any], matched: dict[int, int | None]) -> int | list[Any] | None:
    """The original op index a migrated source agrees with, following copies and casts back; the leaf
    source where the copies end at one; None where it diverges or nothing is known."""
    while src[0] == "op":
        m = matched.get(src[1])
        if m is not None and m >= 0:
            return m
        event = mig.events[src[1]]
        if m is None or event.get("same_as") is None:
            return None
        src = event["inputs"][event["same_as"]]
    return list(src)


def original_of(mig: Trace, src: list[Any], matched: dict[int, int | None]) -> int | None:
    """The original op whose output a migrated op's agrees with, through copies and casts."""
    found = _through_copies(mig, src, matched)
    return found if isinstance(found, int) else None


def starts_for(orig: Trace, mig: Trace, src: list[Any], matched: dict[int, int | None]) -> set[int]:
    """The original ops that produced what a migrated input holds (an agreeing op), or that read the
    same leaf (parameter, buffer, module input)."""
    found = _through_copies(mig, src, matched)
    if isinstance(found, int):
        return {found}
    if found is None or found[0] not in ("param", "buffer", "input"):
        return set()
    return {i for i, event in enumerate(orig.events) if found in [list(s) for s in event.get("inputs", [])]}


def projection(trace: Trace, src: list[Any]) -> str | None:
    """``gate`` for a tensor made by an op that read parameter ``block.mlp.gate.weight``."""
    if src[0] != "op":
        return None
    params = [s[1] for s in trace.events[src[1]].get("inputs", []) if s[0] == "param"]
    if not params:
        return None
    parts = str(params[0]).split(".")
    return parts[-2] if len(parts) > 1 else parts[0]


def constant(event: dict[str, Any]) -> float | None:
    """The one plain number an op was called with (``mul(0.125)``), else None."""
    text = event.get("args", "")
    if not text or "=" in text:
        return None
    try:
        value = ast.literal_eval(f"({text},)")
    except (ValueError, SyntaxError):
        return None
    numbers = [v for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return float(numbers[0]) if len(numbers) == 1 and len(value) == 1 else None


ARITHMETIC = frozenset({"mul", "mul_", "imul", "div", "div_", "truediv", "itruediv", "add", "add_", "iadd"})


def op_names(trace: Trace, indices: Iterable[int], limit: int = 10) -> str:
    """``matmul, mul 0.125, where, softmax, matmul``: the ops in trace order, an arithmetic op's constant."""
    names = []
    for i in sorted(indices):
        event = trace.events[i]
        c = constant(event) if event["op"] in ARITHMETIC else None
        names.append(event["op"] if c is None else f"{event['op']} {c:g}")
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
