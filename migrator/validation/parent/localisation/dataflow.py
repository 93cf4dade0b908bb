"""The first divergent op by data flow (parent side; torch only inside the functions).

Both sides traced the same module on the same weights and batch (:mod:`..child.optrace`): every op,
its output and where each tensor input came from. A migrated op *agrees* when some original op
produced the same tensor (same shape, rel_l2 within the policy's limit): fused and unfused code
compare, whatever the op order. From the last migrated op that agrees with nothing, the walk goes
back along its diverging inputs to an op whose inputs all agree and whose output does not: the
cause. Named with it:

* a buffer that differs after model build (before the first step: RoPE cos/sin caches, masks),
  before any op, and as the cause when that op reads it;
* output values that are the original's reordered (head layout, KV-head repeat order);
* a bool mask and an additive ``-inf`` mask that allow the same keys agree (two encodings), and an
  op on no tensor with a constant output (``zeros``) cannot diverge; where the walk passes an
  attention op, the attention pattern it ends up with (which query sees which key) is named;
* the semantic diff against the original op of the same kind that read the same inputs, and a
  fused op's arguments against the attributes of the module it replaced on the original side
  (``eps``, ``scale``, rotary mode).
"""

from __future__ import annotations

from typing import Any, TypedDict

from ... import op_semantics as S
from .trace_graph import Trace


class DivergentOp(TypedDict, total=False):
    """What :func:`locate` found: the first op (or buffer) whose output differs while its inputs agree, or a
    ``note`` why there is none; the keys are the S1 check row's (JSON) fields."""

    original_op: str | None
    migrated_op: str | None
    ops: list[int]  # traced ops per side, when no single op diverges
    note: str
    index: int
    rel_l2: float
    shapes: list[Any]
    policy: str
    argument_diff: list[str]
    cause: str  # a fused op's difference from the subgraph it replaced, in the user's words
    module: str | None
    buffer: str

# semantic key of a fused op -> the module attributes that hold the same setting
MODULE_ATTRS = {"eps": ("eps", "variance_epsilon", "epsilon", "norm_eps"),
                "scale": ("scale", "softmax_scale", "scaling"),
                "rotary mode": ("rotary_mode", "interleaved")}


def _rel(a: Any, b: Any) -> float:
    from ... import metrics as M

    return M.rel_l2(b, a) if tuple(a.shape) == tuple(b.shape) else float("inf")


class _ByShape:
    """The original's op outputs by shape, with norms to skip hopeless pairs."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.groups: dict[tuple[int, ...], list[tuple[int, Any, float]]] = {}
        for i in range(len(trace.events)):
            t = trace.tensor(i)
            if t is None:
                continue
            self.groups.setdefault(tuple(t.shape), []).append((i, t, float(t.double().norm())))

    def match(self, t: Any, limit: float, dtype: str | None = None) -> int | None:
        norm = float(t.double().norm())
        best, best_value = None, limit
        for i, o, o_norm in self.groups.get(tuple(t.shape), []):
            if _mask_encodings(self.trace.events[i].get("dtype"), o, dtype, t):
                return i
            if abs(norm - o_norm) > limit * max(o_norm, 1e-30) * 1.0001 and not (norm == o_norm == 0.0):
                continue
            value = _rel(o, t)
            if value < best_value or (best is None and value <= limit):  # ties: the earliest producer
                best, best_value = i, value
        return best

    def reordered(self, t: Any, limit: float) -> int | None:
        """An original output holding the same values in another order."""
        flat = t.flatten().sort().values
        for i, o, _ in self.groups.get(tuple(t.shape), []):
            if _rel(o.flatten().sort().values, flat) <= limit and _rel(o, t) > limit:
                return i
        return None


def _mask_encodings(dtype_a: str | None, a: Any, dtype_b: str | None, b: Any) -> bool:
    """A bool mask and an additive one (0 keep, -inf masked) that allow the same keys, either polarity."""
    from ... import metrics as M

    if (dtype_a == "bool") == (dtype_b == "bool") or None in (dtype_a, dtype_b):
        return False
    flags, additive = (a, b) if dtype_a == "bool" else (b, a)
    finite = additive[additive.isfinite()]
    if bool((finite != 0).any() & (finite > M.MASKED_BELOW).any()):
        return False  # not an additive mask
    keep, flags = additive > M.MASKED_BELOW, flags != 0
    return bool((keep == flags).all()) or bool((keep != flags).all())


def _constant(event: dict[str, Any], t: Any) -> bool:
    """An op on no tensor (zeros, ones, full) whose output is one value: shape only, nothing to diverge."""
    return not event.get("inputs") and t.numel() > 0 and bool((t == t.flatten()[0]).all())


def _buffer_diffs(orig: Trace, mig: Trace, limit: float) -> dict[str, float]:
    names = [n for n in mig.tensors if n.startswith("buffer.") and n in orig.tensors]
    out = {}
    for n in names:
        value = _rel(orig.tensors[n], mig.tensors[n])
        if value > limit:
            out[n.removeprefix("buffer.")] = value
    return out


def _counterpart(orig: Trace, mig: Trace, e: int, matched: dict[int, int | None]) -> int | None:
    """The original op that read what migrated op ``e`` read: same kind first, else the first reader;
    for an op on leaves only, the same-kind op on the same leaves, else the nearest same-kind op."""
    event = mig.events[e]
    kind = event["kind"]
    fed = {m for src in event.get("inputs", []) if src[0] == "op" for m in [matched.get(src[1])] if m is not None}
    readers = [i for i, o in enumerate(orig.events)
               if any(src[0] == "op" and src[1] in fed for src in o.get("inputs", []))] if fed else []
    same = [i for i in readers if orig.events[i]["kind"] == kind]
    if same or readers:
        return (same or readers)[0]
    leaves = [src for src in event.get("inputs", []) if src[0] != "op"]
    kinds = [i for i, o in enumerate(orig.events) if o["kind"] == kind]
    on_leaves = [i for i in kinds if [s for s in orig.events[i].get("inputs", []) if s[0] != "op"] == leaves]
    candidates = on_leaves or kinds
    if not candidates:
        return None
    where = e / max(len(mig.events), 1)
    return min(candidates, key=lambda i: abs(i / max(len(orig.events), 1) - where))


def _attribute_lines(semantic: dict[str, Any], module: dict[str, Any] | None) -> list[str]:
    """A fused op's arguments against the replaced module's attributes (original side)."""
    if not module:
        return []
    lines = []
    for key, (value, how) in semantic.items():
        for attr in MODULE_ATTRS.get(key, ()):
            if attr not in module:
                continue
            expected = module[attr]
            if attr == "interleaved":
                expected = "interleave" if expected else "half"
            if isinstance(value, float) and isinstance(expected, (int, float)) and not isinstance(expected, bool):
                same = abs(value - expected) <= 1e-9 * max(abs(expected), 1.0)
            else:
                same = str(value) == str(expected)
            if not same:
                lines.append(f"{key}: {S.format_value(value)} ({how}) vs {S.format_value(expected)} "
                             f"(the original {module.get('class', 'module')}.{attr})")
            break
    return lines


def _matches(orig: Trace, mig: Trace, by_shape: _ByShape, buffers: dict[str, float],
             limit: float) -> dict[int, int | None]:
    """Migrated op -> the original op whose output agrees (-1: agrees without one, None: diverges)."""
    matched: dict[int, int | None] = {}
    for i, event in enumerate(mig.events):
        t = mig.tensor(i)
        if t is None:  # not stored: unknown, so not blamed
            matched[i] = -1
            continue
        matched[i] = -1 if _constant(event, t) else by_shape.match(t, limit, event.get("dtype"))
        if matched[i] is None and event.get("same_as") is not None:  # a copy or cast of an agreeing input
            src = event["inputs"][event["same_as"]]
            agrees = matched.get(src[1]) is not None if src[0] == "op" else not (src[0] == "buffer" and src[1] in buffers)
            matched[i] = -1 if agrees else None
    return matched


def locate(orig: Trace, mig: Trace, limit: float, policy: str) -> DivergentOp:
    by_shape = _ByShape(orig)
    buffers = _buffer_diffs(orig, mig, limit)
    matched = _matches(orig, mig, by_shape, buffers, limit)
    diverging = sorted(i for i, m in matched.items() if m is None)
    if not diverging:
        if buffers:
            return _buffer_cause(buffers, None, mig, policy)
        return {"original_op": None, "migrated_op": None, "ops": [len(orig.events), len(mig.events)],
                "note": "no single traced op diverges: the module composes the same ops differently"}
    e, path = diverging[-1], [diverging[-1]]
    while True:
        bad = [src[1] for src in _followed(orig, mig, e, matched, by_shape) if src[0] == "op" and src[1] in diverging]
        if not bad:
            break
        e = min(bad)
        path.append(e)
    event = mig.events[e]
    read = [src[1] for src in event.get("inputs", []) if src[0] == "buffer" and src[1] in buffers]
    if read or (buffers and not event.get("inputs")):
        return _buffer_cause(buffers, e, mig, policy)
    return _named(orig, mig, path, matched, by_shape, limit, policy)


def _named(orig: Trace, mig: Trace, path: list[int], matched: dict[int, int | None], by_shape: _ByShape,
           limit: float, policy: str) -> DivergentOp:
    """The walk's cause ``path[-1]`` with its original counterpart and argument diff; a fused op on the
    path whose own arguments differ from the subgraph it replaced is named instead, with the cause."""
    from . import fused_causes

    fused = fused_causes.find(fused_causes.Context(orig, mig, matched, limit, lambda x: by_shape.match(x, limit)), path)
    own = fused if fused is not None and fused.own else None  # the fused op's arguments, not how its input was built
    e = own.index if own is not None else path[-1]
    event, t = mig.events[e], mig.tensor(e)
    moved = by_shape.reordered(t, limit) if own is None else None
    o = moved if moved is not None else _counterpart(orig, mig, e, matched)
    if own is not None and own.original_index is not None:
        o = own.original_index
    lines: list[str] = []
    if moved is not None:
        lines.append(f"the same values as the original's {orig.events[moved]['op']} output in another order "
                     "(head layout / KV-head repeat order)")
    lines += _argument_lines(orig, mig, e, o)
    lines += _attention_downstream(orig, mig, path[:-1], matched)
    if own is not None:
        original_op = own.original_op
    elif o is None and event.get("module") in orig.modules:
        original_op = f"{orig.modules[event['module']].get('class', 'module')} in primitive ops"
    else:
        original_op = orig.events[o]["op"] if o is not None else "?"
    value = _rel(orig.tensor(o), t) if o is not None and orig.tensor(o) is not None else float("inf")
    found: DivergentOp = {"original_op": original_op, "migrated_op": event["op"], "index": e, "rel_l2": value,
                          "shapes": [orig.events[o]["shape"] if o is not None else event["shape"], event["shape"]],
                          "policy": policy, "argument_diff": lines, "module": event.get("module")}
    if fused is not None:
        found["cause"] = fused.text
        found["argument_diff"] = [line for line in lines if line.split(":")[0] not in fused.restates]
    return found


def _followed(orig: Trace, mig: Trace, e: int, matched: dict[int, int | None], by_shape: _ByShape) -> list:
    """The inputs the walk may go back along. An attention op's mask (inputs after q, k, v) only
    where the attention pattern differs and the original holds a tensor of the mask's shape: a
    compressed mask for a sparse mode encodes the mode, not the pattern (it has no counterpart)."""
    event = mig.events[e]
    inputs = event.get("inputs", [])
    if event["kind"] != "attention" or not event.get("semantic") or len(inputs) <= 3:
        return inputs
    o = _counterpart(orig, mig, e, matched)
    pattern_m = event["semantic"].get("attention pattern", [None])[0]
    pattern_o = (orig.events[o].get("semantic") or {}).get("attention pattern", [None])[0] if o is not None else None
    if pattern_o is None and pattern_m is not None:  # an eager original: the pattern its softmax ended up with
        from .fused_attention import eager

        original = eager(orig, mig, e, matched)
        pattern_o = original.pattern if original is not None else None
    if pattern_m is not None and pattern_m == pattern_o:
        return inputs[:3]
    masks = [src for src in inputs[3:] if src[0] == "op"
             and tuple(mig.events[src[1]]["shape"]) in by_shape.groups]
    return inputs[:3] + masks


def _argument_lines(orig: Trace, mig: Trace, e: int, o: int | None) -> list[str]:
    """The op's semantic diff, its plain arguments against the same op's, and a fused op's
    arguments against the replaced module's attributes."""
    event = mig.events[e]
    other: dict[str, Any] = orig.events[o] if o is not None else {}
    lines: list[str] = []
    if event.get("semantic") and other.get("semantic"):
        lines += S.diff(S.from_json(other["semantic"]), S.from_json(event["semantic"]), (other["op"], event["op"]))
    elif other.get("op") == event["op"] and other.get("args", "") != event.get("args", ""):
        lines.append(f"arguments: {event['op']}({event.get('args', '')}) (migrated) vs "
                     f"{other['op']}({other.get('args', '')}) (original)")
    if event.get("semantic"):
        said = {line.split(":")[0] for line in lines}
        attrs = _attribute_lines(S.from_json(event["semantic"]), orig.modules.get(event.get("module") or ""))
        lines += [line for line in attrs if line.split(":")[0] not in said]
    return lines


def _attention_downstream(orig: Trace, mig: Trace, path: list[int], matched: dict[int, int | None]) -> list[str]:
    """Where the walk passed an attention op (its mask diverged): the attention pattern it ends up with."""
    for a in reversed(path):  # the attention nearest the cause
        event = mig.events[a]
        if event["kind"] != "attention" or not event.get("semantic"):
            continue
        o = _counterpart(orig, mig, a, matched)
        if o is None or not orig.events[o].get("semantic"):
            continue
        found = [line for line in S.diff(S.from_json(orig.events[o]["semantic"]), S.from_json(event["semantic"]),
                                         (orig.events[o]["op"], event["op"])) if line.startswith("attention pattern")]
        if found:
            return [f"so {event['op']} (op #{a}) gets another {found[0]}"]
    return []


def _buffer_cause(buffers: dict[str, float], e: int | None, mig: Trace, policy: str) -> DivergentOp:
    name, value = next(iter(buffers.items()))
    reader = f", first read by {mig.events[e]['op']} (op #{e})" if e is not None else ""
    others = f" ({len(buffers) - 1} more buffers differ: {', '.join(list(buffers)[1:4])})" if len(buffers) > 1 else ""
    return {"original_op": f"buffer {name}", "migrated_op": f"buffer {name}", "index": e if e is not None else -1,
            "rel_l2": value, "shapes": [None, None], "policy": policy, "buffer": name,
            "argument_diff": [f"buffer {name} differs after model build, before the first step{reader}{others}"]}
