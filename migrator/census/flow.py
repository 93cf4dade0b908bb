"""Child side: the data flow of the first traced forward, for the advisor's fusion patterns (imports torch
lazily through the tensors it is handed; no torch import of its own).

A node per outermost torch call that ran a kernel (what the `TorchFunctionMode` sees), named as the
profiler names its aten op (`torch.Tensor.__rmul__` -> `mul`, `F.softmax` -> `softmax`, a slicing
`__getitem__` -> `slice`), with the nodes that produced its tensor inputs. Each output tensor carries
the index of the node that made it (an attribute on the tensor); an in-place op re-tags its tensor.
Ops that only build an operand off the chain (a mask's `eq`, a view of a weight) are then not between
the chain's ops, as they would be in a plain op sequence.
"""

from __future__ import annotations

from typing import Any

TAG = "_migrate_census_flow"
MAX_NODES = 200_000
_REFLECTED = {"radd": "add", "rsub": "sub", "rmul": "mul", "rtruediv": "div", "truediv": "div", "rmatmul": "matmul",
              "rpow": "pow", "floordiv": "floor_divide", "rfloordiv": "floor_divide", "and": "bitwise_and",
              "or": "bitwise_or", "xor": "bitwise_xor", "invert": "bitwise_not", "lt": "lt", "gt": "gt"}
_IN_PLACE = {"iadd": "add_", "isub": "sub_", "imul": "mul_", "itruediv": "div_", "ipow": "pow_", "imatmul": "matmul"}


def _index_kind(index: Any) -> str:
    """aten's op for `x[index]`: slice for slices and `...`, select for ints, index for tensors."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(hasattr(p, "dtype") or isinstance(p, list) for p in parts):
        return "index"
    if any(isinstance(p, int) and not isinstance(p, bool) for p in parts):
        return "select"
    return "slice"


def op_name(api: str, args: tuple) -> str:
    """The profiler's aten name of an outermost torch call (`torch.Tensor.__mul__` -> `mul`)."""
    last = api.rsplit(".", 1)[-1]
    if last.startswith("__") and last.endswith("__") and len(last) > 4:
        bare = last[2:-2]
        if bare == "getitem":
            return _index_kind(args[1]) if len(args) > 1 else "slice"
        return _IN_PLACE.get(bare) or _REFLECTED.get(bare) or bare
    return last


def _tensors_of(value: Any) -> list[Any]:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors_of(item)]
    return []


class Flow:
    """The nodes of the first forward: (op, producer indexes, user frame)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.state = "waiting"  # waiting -> open (first forward) -> closed

    def follow(self, phase: str) -> bool:
        if self.state == "waiting" and phase == "forward":
            self.state = "open"
        elif self.state == "open" and phase != "forward":
            self.state = "closed"
        return self.state == "open" and len(self.nodes) < MAX_NODES

    def add(self, api: str, args: tuple, kwargs: dict | None, result: Any, user: tuple | None,
            reference: bool = False) -> None:
        producers: list[int] = []
        for value in (*args, *(kwargs or {}).values()):
            for tensor in _tensors_of(value):
                made_by = tensor.__dict__.get(TAG)
                if made_by is not None and made_by not in producers:
                    producers.append(made_by)
        index = len(self.nodes)
        node: dict[str, Any] = {"op": op_name(api, args), "inputs": producers}
        if user is not None:
            node["path"], node["line"], node["function"] = user
        if reference:  # inside a CUDA library's CPU stand-in: the library's ops, not the user's
            node["reference"] = True
        self.nodes.append(node)
        for tensor in _tensors_of(result):
            try:
                tensor.__dict__[TAG] = index
            except (AttributeError, TypeError):  # a tensor type without a __dict__
                continue
